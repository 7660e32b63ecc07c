"""GPU samples whose labels do not name a recorded job: aliases, then the host and time."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import polars as pl
import pytest
from analytics_scenario import T0, Scenario, at, default_params

from preemptlens.analytics.attribution import attributed, expand_hostlist, rebuild
from preemptlens.analytics.refresh import analyze
from preemptlens.errors import SchemaError
from preemptlens.warehouse import Warehouse


@pytest.mark.parametrize(
    ("text", "hosts"),
    [
        ("node1", ["node1"]),
        ("gpu[01-03,07],login1", ["gpu01", "gpu02", "gpu03", "gpu07", "login1"]),
        ("gpu[008-010]", ["gpu008", "gpu009", "gpu010"]),
        ("r[1-2]n[1-2]", ["r1n1", "r1n2", "r2n1", "r2n2"]),
        ("a[9-10]", ["a9", "a10"]),
    ],
)
def test_slurm_node_lists_expand_as_slurm_prints_them(text: str, hosts: list[str]) -> None:
    assert expand_hostlist(text) == hosts


@pytest.mark.parametrize("text", ["gpu[01-03", "gpu[a-b]", "gpu01]"])
def test_a_broken_node_list_is_refused_with_the_list_named(text: str) -> None:
    with pytest.raises(SchemaError, match="node list"):
        expand_hostlist(text)


def _load(wh: Warehouse, table: str, source: str, rows: list[dict[str, Any]]) -> None:
    wh.load(table, pl.DataFrame([{"cluster": "c1", **r} for r in rows], infer_schema_length=None), source)


def _job(job_id: str, name: str, team: str, gpus: int) -> dict[str, Any]:
    return {"job_id": job_id, "name": name, "team": team, "tier": "low", "preemptible": True, "gpus": gpus,
            "pool": "p", "submit_time": T0}


def _run(job_id: str, hosts: str, gpus: int, start: float, end: float | None) -> dict[str, Any]:
    return {"job_id": job_id, "run": 1, "pool": "p", "hosts": hosts, "gpus": gpus, "start_time": at(start),
            "end_time": None if end is None else at(end), "state": "completed" if end else "running"}


def _sample(label: str | None, host: str, t: float, gpu: int = 0) -> dict[str, Any]:
    return {"host": host, "gpu_uuid": f"GPU-{host}-{gpu}", "gpu_index": gpu, "time": at(t), "busy": 0.0,
            "job_id": label}


@pytest.fixture
def wh(tmp_path: Path) -> Warehouse:
    wh = Warehouse(tmp_path / "w.duckdb")
    _load(wh, "pools", "test", [{"pool": "p", "valid_from": at(-86400), "gpus": 64, "gpus_per_node": 8}])
    # Kubernetes keys pods by UID; the exporter names them namespace/pod. `trainer-0` is
    # recreated (a StatefulSet) with a new UID, so its name means different jobs at different times.
    _load(wh, "jobs", "kubernetes", [
        _job("uid-a", "trainer-0", "ml", 8), _job("uid-b", "trainer-0", "ml", 8), _job("uid-c", "eval", "ml", 4),
    ])
    _load(wh, "job_runs", "kubernetes", [
        _run("uid-a", "n1", 8, 0, 3600), _run("uid-b", "n2", 8, 7200, None), _run("uid-c", "n3", 4, 0, 3600),
    ])
    # Slurm: one job across two whole nodes, two jobs sharing one node.
    _load(wh, "jobs", "slurm", [
        _job("100", "big", "hpc", 16), _job("101", "s1", "hpc", 4), _job("102", "s2", "hpc", 4),
    ])
    _load(wh, "job_runs", "slurm", [
        _run("100", "g[01-02]", 16, 0, 3600), _run("101", "g03", 4, 0, 3600), _run("102", "g03", 4, 1800, 3600),
    ])
    return wh


def _resolve(wh: Warehouse, samples: list[dict[str, Any]]) -> dict[tuple[str, float], str | None]:
    _load(wh, "gpu_samples", "test", samples)
    rebuild(wh)
    got = wh.query(f"SELECT host, time, job_id FROM ({attributed('gpu_samples')})")
    out: dict[tuple[str, float], str | None] = {(s["host"], (s["time"] - T0).total_seconds()): None for s in samples}
    for row in got.iter_rows(named=True):
        out[(row["host"], (row["time"] - T0).total_seconds())] = row["job_id"]
    return out


def test_a_pod_name_resolves_to_the_pod_that_ran_at_that_time(wh: Warehouse) -> None:
    got = _resolve(wh, [_sample("ml/trainer-0", "n1", 600), _sample("ml/trainer-0", "n2", 9000),
                        _sample("ml/trainer-0", "n1", 5000)])
    assert got[("n1", 600)] == "uid-a"
    assert got[("n2", 9000)] == "uid-b"
    # Between the two pods nothing of that name ran, and n1 was free: no job to charge.
    assert got[("n1", 5000)] is None


def test_a_label_that_is_a_recorded_job_is_kept_as_it_is(wh: Warehouse) -> None:
    got = _resolve(wh, [_sample("101", "g03", 600), _sample("uid-c", "n3", 60)])
    assert got[("g03", 600)] == "101"
    assert got[("n3", 60)] == "uid-c"


def test_an_unlabelled_sample_goes_to_the_run_that_held_the_whole_host(wh: Warehouse) -> None:
    got = _resolve(wh, [_sample(None, "g01", 600), _sample(None, "g02", 600, gpu=7), _sample(None, "g01", 4000)])
    assert got[("g01", 600)] == "100"
    assert got[("g02", 600)] == "100"
    assert got[("g01", 4000)] is None  # after the run ended


def test_a_shared_or_partly_held_host_names_nobody(wh: Warehouse) -> None:
    got = _resolve(wh, [
        _sample(None, "g03", 600),  # 101 alone, but with 4 of the node's 8 GPUs
        _sample(None, "g03", 2400),  # 101 and 102 both on it
        _sample(None, "n3", 600),  # uid-c holds 4 of 8
        _sample("ml/unknown", "n1", 600),  # no such pod, but uid-a holds n1 whole
    ])
    assert got[("g03", 600)] is None
    assert got[("g03", 2400)] is None
    assert got[("n3", 600)] is None
    assert got[("n1", 600)] == "uid-a"


def test_recorded_aliases_resolve_array_tasks(wh: Warehouse) -> None:
    _load(wh, "jobs", "slurm", [_job("200_4", "arr", "hpc", 2)])
    _load(wh, "job_runs", "slurm", [_run("200_4", "g04", 2, 0, 3600)])
    _load(wh, "job_aliases", "slurm", [{"alias": "204", "job_id": "200_4"}])
    got = _resolve(wh, [_sample("204", "g04", 600)])
    assert got[("g04", 600)] == "200_4"


def test_without_a_node_size_the_host_counts_the_gpus_it_reported(wh: Warehouse) -> None:
    _load(wh, "jobs", "slurm", [
        {**_job("300", "a", "hpc", 2), "pool": "q"}, {**_job("301", "b", "hpc", 2), "pool": "q"},
    ])
    _load(wh, "job_runs", "slurm", [
        {**_run("300", "h9", 2, 0, 3600), "pool": "q"}, {**_run("301", "h8", 2, 0, 3600), "pool": "q"},
    ])
    got = _resolve(wh, [
        _sample(None, "h9", 600, gpu=0), _sample(None, "h9", 660, gpu=1),  # h9 has two GPUs: 300 holds both
        *(_sample(None, "h8", 600 + 60 * g, gpu=g) for g in range(4)),  # h8 has four: 301 holds half
    ])
    assert got[("h9", 600)] == got[("h9", 660)] == "300"
    assert all(got[("h8", 600 + 60 * g)] is None for g in range(4))


def _hoarded(label: str | None, tmp_path: Path, *, runs_later: bool) -> tuple[float, float]:
    wh = Warehouse(tmp_path / f"{label}-{runs_later}.duckdb")
    sc = Scenario(wh)
    sc.pool("p", 16)
    for gpu in (0, 1):
        sc.samples(label, "n1", gpu, 0, 3600, busy=0.9)
        sc.samples(label, "n1", gpu, 3600, 7200, busy=0.0)
    if runs_later:
        sc.analyze()  # the samples come first: nobody to charge yet
    sc.job("j1", "low", 2, "p", 0)
    sc.run("j1", 1, 2, "p", 0, 7200, "completed", hosts="n1")
    sc.analyze()
    incremental = sc.view("idle_hoarding_runs", "job_id")["idle_gpu_hours"].sum()
    analyze(wh, default_params(), full=True)
    full = sc.view("idle_hoarding_runs", "job_id")["idle_gpu_hours"].sum()
    wh.close()
    return float(incremental), float(full)


@pytest.mark.parametrize("runs_later", [False, True])
def test_unlabelled_samples_of_a_whole_host_count_as_that_runs_hoarding(tmp_path: Path, runs_later: bool) -> None:
    labelled = _hoarded("j1", tmp_path, runs_later=runs_later)
    unlabelled = _hoarded(None, tmp_path, runs_later=runs_later)
    assert labelled[0] == pytest.approx(2.0, rel=0.02)  # two GPUs idle for the run's last hour
    assert unlabelled == pytest.approx(labelled)
