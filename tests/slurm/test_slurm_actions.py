"""The Slurm action on a real Slurm in preempt/qos mode (QOS high preempts QOS
low by requeue; QOS protected is in no Preempt list).

One scenario serves every assertion. Low jobs V and O hold the node's 8 GPUs;
high job H1 preempts one of them (V, the victim). While V waits to restart it
is protected (Slurm changes a QOS only while a job is pending; protecting O,
running, is refused with the reason). H1 is cancelled, V restarts in QOS
protected, and high job H2, needing 4 GPUs, preempts O and not V. Then V,
requeued by the admin, is returned to QOS low.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest
from slurm_harness import QOS_HIGH, QOS_LOW, QOS_PROTECTED, SlurmCluster

from preemptlens.collectors.slurm_actions import SlurmActionSettings, SlurmQosEffector, settings_from
from preemptlens.config import Config
from preemptlens.errors import ConfigError, SourceError

pytestmark = pytest.mark.slow


def _wait(what: str, ok: Callable[[], bool], timeout: float = 60) -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if ok():
            return
        time.sleep(0.3)
    raise AssertionError(f"{what}: not within {timeout:.0f}s")


@dataclass
class Played:
    cluster: SlurmCluster
    effector: SlurmQosEffector
    victim: str = ""
    other: str = ""
    seen: dict[str, Any] = field(default_factory=dict)

    def show(self, job: str) -> dict[str, str]:
        out = self.cluster.run("scontrol", "show", "job", job, "-o").stdout
        return dict(item.split("=", 1) for item in out.split() if "=" in item)

    def state(self, job: str) -> str:
        return self.show(job)["JobState"]

    def qos(self, job: str) -> str:
        return self.cluster.run("squeue", "-h", "-j", job, "-o", "%q").stdout.strip()


def _effector(cluster: SlurmCluster) -> SlurmQosEffector:
    return SlurmQosEffector(SlurmActionSettings(protected_qos=QOS_PROTECTED, bin_dir="",
                                                slurm_conf=str(cluster.conf), timeout_s=30,
                                                fallback_qos=QOS_LOW))


@pytest.fixture(scope="module")
def played(slurm_qos_cluster: SlurmCluster) -> Played:
    c = slurm_qos_cluster
    p = Played(c, _effector(c))
    out = c.root / "jobs"

    def submit(name: str, qos: str) -> str:
        return c.sbatch("-J", name, f"--qos={qos}", "--gres=gpu:4", "-A", "vision", "-c", "1",
                        f"--output={out}/%j.out", script="sleep 600")

    first, second = submit("a", QOS_LOW), submit("b", QOS_LOW)
    _wait("both low jobs running", lambda: p.state(first) == p.state(second) == "RUNNING")
    h1 = submit("h1", QOS_HIGH)
    _wait("H1 running", lambda: p.state(h1) == "RUNNING")
    pending = [j for j in (first, second) if p.state(j) == "PENDING"]
    assert len(pending) == 1, {j: p.state(j) for j in (first, second)}
    p.victim = pending[0]
    p.other = second if p.victim == first else first
    p.seen["other_qos_before"] = p.qos(p.other)

    p.seen["detail"] = p.effector.apply(p.victim, 1)
    p.seen["victim_qos_pending"] = p.qos(p.victim)
    with pytest.raises(SourceError) as refused:
        p.effector.apply(p.other, 1)
    p.seen["refused"] = refused.value
    p.seen["other_qos_after_refusal"] = p.qos(p.other)

    c.run("scancel", h1)
    # A requeued job waits about cred_expire (10 s) before it may start again.
    _wait("the protected victim restarts", lambda: p.state(p.victim) == "RUNNING")
    p.seen["held"] = p.effector.held()

    h2 = submit("h2", QOS_HIGH)
    _wait("H2 running", lambda: p.state(h2) == "RUNNING")
    p.seen["after_h2"] = {j: (p.state(j), p.show(j)["Restarts"], p.qos(j)) for j in (p.victim, p.other)}

    with pytest.raises(SourceError) as running:
        p.effector.undo(p.victim, p.seen["detail"])
    p.seen["undo_running"] = running.value
    c.run("scontrol", "requeue", p.victim)
    _wait("the victim requeued", lambda: p.state(p.victim) == "PENDING")
    p.effector.undo(p.victim, p.seen["detail"])
    p.seen["victim_qos_undone"] = p.qos(p.victim)
    p.seen["held_after_undo"] = p.effector.held()

    c.run("scancel", p.other)
    _wait("O ended", lambda: p.state(p.other) not in ("PENDING", "RUNNING", "COMPLETING"))
    p.effector.undo(p.other, {"qos": QOS_LOW})  # ended: nothing to do, no error
    p.effector.undo("999999", {"qos": QOS_LOW})  # never existed
    with pytest.raises(SourceError, match="no longer holds it"):
        p.effector.apply(p.other, 1)
    c.run("scancel", p.victim, h2)
    return p


def test_a_waiting_job_moves_into_the_protected_qos_and_undo_needs_its_qos(played: Played) -> None:
    assert played.seen["detail"] == {"qos": QOS_LOW}
    assert played.seen["victim_qos_pending"] == QOS_PROTECTED


def test_a_running_job_is_refused_with_the_job_the_command_and_why(played: Played) -> None:
    err = played.seen["refused"]
    assert played.other in err.message
    assert f"scontrol update JobId={played.other} QOS={QOS_PROTECTED}" in err.message
    assert "running" in err.message and "only while it is pending" in err.message
    assert "\n" not in err.message
    assert played.seen["other_qos_after_refusal"] == played.seen["other_qos_before"] == QOS_LOW


def test_held_reports_exactly_the_protected_job(played: Played) -> None:
    assert played.seen["held"] == {played.victim: 1}


def test_high_work_preempts_the_unprotected_job_and_not_the_protected_one(played: Played) -> None:
    after = played.seen["after_h2"]
    # V was preempted once by H1, before it was protected; H2 requeued O, not V.
    assert after[played.victim] == ("RUNNING", "1", QOS_PROTECTED)
    assert after[played.other] == ("PENDING", "1", QOS_LOW)


def test_the_job_returns_to_its_qos_once_it_waits_again(played: Played) -> None:
    err = played.seen["undo_running"]
    assert played.victim in err.message and f"QOS={QOS_LOW}" in err.message
    assert played.seen["victim_qos_undone"] == QOS_LOW
    assert played.seen["held_after_undo"] == {}


def test_bad_ids_and_levels_are_refused_before_any_command(tmp_path: Path) -> None:
    # No command exists there: reaching one would say "not found" instead.
    effector = SlurmQosEffector(SlurmActionSettings(QOS_PROTECTED, str(tmp_path), "", 5.0, QOS_LOW))
    with pytest.raises(SourceError, match="not a Slurm job id"):
        effector.apply("12; rm -rf /", 1)
    with pytest.raises(ConfigError, match="one level"):
        effector.apply("12", 2)
    with pytest.raises(SourceError, match="not a Slurm job id"):
        effector.undo("12 QOS=high", {})
    with pytest.raises(SourceError, match="squeue not found"):
        effector.held()


def test_a_qos_slurm_does_not_know_is_an_error_not_a_silent_success(slurm_qos_cluster: SlurmCluster) -> None:
    c = slurm_qos_cluster
    job = c.sbatch("--hold", f"--qos={QOS_LOW}", "--gres=gpu:1", "-A", "vision",
                   f"--output={c.root / 'jobs'}/%j.out", script="true")
    try:
        effector = SlurmQosEffector(SlurmActionSettings(protected_qos="nosuchqos", bin_dir="",
                                                        slurm_conf=str(c.conf), timeout_s=30, fallback_qos=QOS_LOW))
        with pytest.raises(SourceError, match=f"job {job}") as info:
            effector.apply(job, 1)
        assert "nosuchqos" in info.value.message
    finally:
        c.run("scancel", job)


def test_settings_come_from_slurm_actions_and_the_collectors_slurm_section() -> None:
    config = Config({"slurm_actions": {"protected_qos": "keep"},
                     "slurm": {"bin_dir": "/opt/slurm/bin", "slurm_conf": "/etc/x.conf", "timeout_s": 5.0}})
    assert settings_from(config) == SlurmActionSettings("keep", "/opt/slurm/bin", "/etc/x.conf", 5.0, "normal")
    with pytest.raises(ConfigError, match="protected_qos"):
        settings_from(Config({"slurm_actions": {"protected_qos": "a b"}}))


def test_array_tasks_and_het_components_by_their_warehouse_ids(slurm_qos_cluster: SlurmCluster) -> None:
    c = slurm_qos_cluster
    out = f"--output={c.root / 'jobs'}/%j.out"
    common = (f"--qos={QOS_LOW}", "--gres=gpu:1", "-A", "vision")
    array = c.sbatch("--hold", "--array=1-3", *common, out, script="true")
    het = c.run("sbatch", "--parsable", "--hold", *common, out, ":", *common, "--wrap", "true").stdout.strip()
    ids = (f"{array}_2", f"{het}+1")
    effector = _effector(c)
    try:
        for job in ids:
            assert effector.apply(job, 1) == {"qos": QOS_LOW}
        assert effector.held() == dict.fromkeys(ids, 1)
        for job in ids:
            effector.undo(job, {"qos": QOS_LOW})
        assert effector.held() == {}
        # squeue -j of one component lists the whole heterogeneous job.
        shown = c.run("squeue", "-h", "-j", f"{het}+1", "-o", "%i %q").stdout.split("\n")
        assert f"{het}+1 {QOS_LOW}" in shown
    finally:
        c.run("scancel", array, het)
