"""Without `cluster.name`, the source names the cluster; real data never lands as `demo`.

Slurm's ClusterName from `scontrol show config` is checked on the real Slurm
(tests/slurm/test_slurm_requeue.py collects without a name).
"""

from __future__ import annotations

import argparse
from dataclasses import replace
from pathlib import Path

import pytest

from preemptlens.collectors import kubernetes, prometheus, slurm
from preemptlens.collectors.slurm.policy import cluster_name_from_config
from preemptlens.commands import simulate
from preemptlens.config import ClusterSettings, Config, load_config
from preemptlens.errors import ConfigError

SACCT_TEXT = Path(__file__).resolve().parent / "cases" / "sacct" / "requeued_job_22_05.txt"
KUBECONFIG = """apiVersion: v1
kind: Config
clusters:
- name: east-api
  cluster: {server: "https://127.0.0.1:6443"}
users:
- name: reader
  user: {token: not-a-real-token}
contexts:
- name: gpu-east
  context: {cluster: east-api, user: reader}
- name: gpu-west
  context: {cluster: east-api, user: reader}
current-context: gpu-east
"""


def _config(tmp_path: Path, text: str = "") -> Config:
    path = tmp_path / "preemptlens.toml"
    path.write_text(text)
    return load_config(str(path))


def _args(module: object, argv: list[str]) -> argparse.Namespace:
    parser = argparse.ArgumentParser()
    module.add_arguments(parser)  # type: ignore[attr-defined]
    return parser.parse_args(argv)


def test_nothing_defaults_to_demo(tmp_path: Path) -> None:
    assert _config(tmp_path).of(ClusterSettings).name == ""
    assert simulate.config_from(_args(simulate, []), _config(tmp_path)).cluster == "sim"


@pytest.mark.parametrize(
    ("selector", "name"),
    [
        ('cluster="gpu-east"', "gpu-east"),
        ('job="dcgm", cluster="a100-prod"', "a100-prod"),
        ('cluster = "x",job=~"dcgm.*"', "x"),
        ('cluster="we\\"ird"', 'we"ird'),
    ],
)
def test_prometheus_takes_the_cluster_its_selector_pins(tmp_path: Path, selector: str, name: str) -> None:
    config = _config(tmp_path, f"[prometheus]\nselector = '{selector}'\n")
    assert prometheus.build(_args(prometheus, []), config).opts.cluster == name


@pytest.mark.parametrize("selector", ["", 'cluster=~"gpu-.*"', 'cluster!="a"', 'job="dcgm"', 'kube_cluster="a"'])
def test_prometheus_without_a_pinned_cluster_asks_for_a_name(tmp_path: Path, selector: str) -> None:
    with pytest.raises(ConfigError, match="pins no cluster label") as err:
        prometheus.build(_args(prometheus, []), _config(tmp_path, f"[prometheus]\nselector = '{selector}'\n"))
    assert "cluster.name" in err.value.hint


def test_cluster_name_wins_over_the_source(tmp_path: Path) -> None:
    config = _config(tmp_path, "[cluster]\nname = \"mine\"\n[prometheus]\nselector = 'cluster=\"theirs\"'\n")
    assert prometheus.build(_args(prometheus, []), config).opts.cluster == "mine"


def test_kubernetes_takes_the_kubeconfig_context(tmp_path: Path) -> None:
    kubeconfig = tmp_path / "kubeconfig"
    kubeconfig.write_text(KUBECONFIG)
    settings = _config(tmp_path).of(kubernetes.KubernetesSettings)
    assert kubernetes.cluster_name(_config(tmp_path), settings, str(kubeconfig)) == "gpu-east"
    chosen = replace(settings, context="gpu-west")
    assert kubernetes.cluster_name(_config(tmp_path), chosen, str(kubeconfig)) == "gpu-west"


def test_kubernetes_in_cluster_without_a_name_asks_for_one(tmp_path: Path) -> None:
    settings = replace(_config(tmp_path).of(kubernetes.KubernetesSettings), api_url="https://127.0.0.1:6443")
    with pytest.raises(ConfigError, match=r"cluster\.name is not set"):
        kubernetes.cluster_name(_config(tmp_path), settings)


def test_slurm_reads_clustername_and_refuses_a_nameless_file(tmp_path: Path) -> None:
    shown = "Configuration data as of 2026-12-03T10:00:00\nAccountingStorageType   = accounting_storage/slurmdbd\n" \
            "ClusterName             = gpu-east\nPreemptType             = preempt/partition_prio\n"
    assert cluster_name_from_config(shown) == "gpu-east"
    assert cluster_name_from_config("PreemptType = preempt/none\n") == ""
    # A recorded --parsable2 document names no cluster (a JSON one does: tests/slurm/test_slurm_parse.py).
    collector = slurm.build(_args(slurm, ["--sacct-file", str(SACCT_TEXT)]), _config(tmp_path))
    with pytest.raises(ConfigError, match=r"cluster\.name is not set"):
        list(collector.batches({}))
