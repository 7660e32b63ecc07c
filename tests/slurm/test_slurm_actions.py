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

from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import pytest
from slurm_harness import CLUSTER, QOS_HIGH, QOS_LOW, QOS_PROTECTED, SlurmCluster, wait_until

from preemptlens.analytics import actions
from preemptlens.analytics.actions import SlurmProtectSettings
from preemptlens.collectors.slurm import Options, SlurmCollector
from preemptlens.collectors.slurm.actions import QosEffectorOptions, SlurmQosEffector, settings_from
from preemptlens.collectors.slurm.policy import Policy
from preemptlens.config import Config
from preemptlens.errors import ConfigError, SourceError
from preemptlens.warehouse import Warehouse

pytestmark = pytest.mark.slow


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
    return SlurmQosEffector(QosEffectorOptions(protected_qos=QOS_PROTECTED, bin_dir="",
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
    wait_until("both low jobs running", lambda: p.state(first) == p.state(second) == "RUNNING")
    h1 = submit("h1", QOS_HIGH)
    wait_until("H1 running", lambda: p.state(h1) == "RUNNING")
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
    wait_until("the protected victim restarts", lambda: p.state(p.victim) == "RUNNING")
    p.seen["held"] = p.effector.held()

    h2 = submit("h2", QOS_HIGH)
    wait_until("H2 running", lambda: p.state(h2) == "RUNNING")
    p.seen["after_h2"] = {j: (p.state(j), p.show(j)["Restarts"], p.qos(j)) for j in (p.victim, p.other)}

    with pytest.raises(SourceError) as running:
        p.effector.undo(p.victim, p.seen["detail"])
    p.seen["undo_running"] = running.value
    c.run("scontrol", "requeue", p.victim)
    wait_until("the victim requeued", lambda: p.state(p.victim) == "PENDING")
    p.effector.undo(p.victim, p.seen["detail"])
    p.seen["victim_qos_undone"] = p.qos(p.victim)
    p.seen["held_after_undo"] = p.effector.held()

    c.run("scancel", p.other)
    wait_until("O ended", lambda: p.state(p.other) not in ("PENDING", "RUNNING", "COMPLETING"))
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
    effector = SlurmQosEffector(QosEffectorOptions(QOS_PROTECTED, str(tmp_path), "", 5.0, QOS_LOW))
    with pytest.raises(SourceError, match="not a Slurm job id"):
        effector.apply("12; rm -rf /", 1)
    with pytest.raises(ConfigError, match="one level"):
        effector.apply("12", 2)
    with pytest.raises(SourceError, match="not a Slurm job id"):
        effector.undo("12 QOS=high", {})
    # Other scripts' digits are digits to Python, not to Slurm.
    for hostile in ("١٢٣", "12_٣", "٣+1", "12\n13"):
        with pytest.raises(SourceError, match="not a Slurm job id"):
            effector.apply(hostile, 1)
    with pytest.raises(SourceError, match="squeue not found"):
        effector.held()


def test_a_qos_slurm_does_not_know_is_an_error_not_a_silent_success(slurm_qos_cluster: SlurmCluster) -> None:
    c = slurm_qos_cluster
    job = c.sbatch("--hold", f"--qos={QOS_LOW}", "--gres=gpu:1", "-A", "vision",
                   f"--output={c.root / 'jobs'}/%j.out", script="true")
    try:
        effector = SlurmQosEffector(QosEffectorOptions(protected_qos="nosuchqos", bin_dir="",
                                                        slurm_conf=str(c.conf), timeout_s=30, fallback_qos=QOS_LOW))
        with pytest.raises(SourceError, match=f"job {job}") as info:
            effector.apply(job, 1)
        assert "nosuchqos" in info.value.message
    finally:
        c.run("scancel", job)


def test_settings_come_from_slurm_actions_and_the_collectors_slurm_section() -> None:
    config = Config({"slurm_actions": {"protected_qos": "keep"},
                     "slurm": {"bin_dir": "/opt/slurm/bin", "slurm_conf": "/etc/x.conf", "timeout_s": 5.0}})
    assert settings_from(config) == QosEffectorOptions("keep", "/opt/slurm/bin", "/etc/x.conf", 5.0, "normal")
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


def test_the_engine_protects_a_costly_requeued_victim_collected_from_the_real_slurm(
        slurm_qos_cluster: SlurmCluster, tmp_path: Path) -> None:
    """The whole loop on what the real Slurm reports: the collector's runs, a live cost the test sets (the figure
    itself is tests/analytics/test_live_cost.py's), and the engine in enforce mode with the real effector."""
    c = slurm_qos_cluster
    p = Played(c, _effector(c))
    out = c.root / "jobs"
    began = datetime.now(UTC).replace(microsecond=0) - timedelta(seconds=1)

    def submit(name: str, qos: str) -> str:
        return c.sbatch("-J", name, f"--qos={qos}", "--gres=gpu:4", "-A", "vision", "-c", "1",
                        f"--output={out}/%j.out", script="sleep 600")

    def collect(wh: Warehouse) -> None:
        collector = SlurmCollector(Options(
            cluster="", slurm_conf=str(c.conf), since=began, lag=timedelta(0), window=timedelta(hours=1),
            timeout_s=60, policy=Policy()))
        for batch in collector.batches(wh.watermarks(collector.name)):
            wh.load_batch(batch)

    enforce = {"slurm_protect": SlurmProtectSettings(enabled=True, mode="enforce", max_pool_share=1.0)}
    bound = {"slurm_protect": (CLUSTER, p.effector)}
    first, second = submit("a", QOS_LOW), submit("b", QOS_LOW)
    jobs = [first, second]
    try:
        wait_until("both low jobs running", lambda: p.state(first) == p.state(second) == "RUNNING")
        with Warehouse(tmp_path / "w.duckdb") as wh:
            collect(wh)
            # The last live cost computed while both ran: each would throw 2.5 GPU-hours away.
            costed = datetime.now(UTC)
            for job in jobs:
                wh.con.execute("INSERT INTO live_costs (cluster, job_id, run, pool, gpus, computed_at, cost_gpu_s) "
                               "VALUES ($c, $j, 1, 'gpu', 4, $t, 36000.0)", {"c": CLUSTER, "j": job, "t": costed})
            wh.con.execute("INSERT INTO live_cost_computations VALUES ($t, 2)", {"t": costed})
            h1 = submit("h1", QOS_HIGH)
            jobs.append(h1)
            wait_until("H1 running", lambda: p.state(h1) == "RUNNING")
            victim = next(j for j in (first, second) if p.state(j) == "PENDING")
            other = second if victim == first else first

            def accounted(job: str) -> bool:
                shown = c.run("sacct", "-n", "-X", "-D", "-j", job, "-o", "state%20").stdout
                return "PREEMPTED" in shown or "REQUEUED" in shown

            # slurmdbd records the preempted run a moment after slurmctld requeues the job
            wait_until("V's preempted run in the accounting", lambda: accounted(victim))
            collect(wh)
            # Slurm's accounting shows the preempted run, and the attempt that waits once slurmdbd has its record
            # (pending, not started): both orders happen.
            runs = wh.query("SELECT state, start_time, end_time FROM job_runs WHERE job_id = $j ORDER BY run",
                            {"j": victim}).rows()
            ended = [r for r in runs if r[0] != "pending"]
            assert ended[-1][0] in ("preempted", "requeued") and ended[-1][2] is not None
            assert runs[:len(ended)] == ended and all(r[0] == "pending" and r[1] is None for r in runs[len(ended):])

            report = actions.run(wh, enforce, bound, datetime.now(UTC))[0]
            # The waiting victim is protected; the running job, as costly, is not (Slurm could not move it).
            assert report.applied == [victim] and not report.failed
            assert p.qos(victim) == QOS_PROTECTED and p.qos(other) == QOS_LOW
            c.run("scancel", h1)
            wait_until("the protected victim restarts", lambda: p.state(victim) == "RUNNING")
            h2 = submit("h2", QOS_HIGH)
            jobs.append(h2)
            wait_until("H2 running", lambda: p.state(h2) == "RUNNING")
            assert (p.state(victim), p.state(other)) == ("RUNNING", "PENDING")

            wait_until("O's preempted run in the accounting", lambda: accounted(other))

            # Running, it stays held (undo would be refused); once it has ended, the next cycle closes the hold.
            # O, requeued by H2 and as costly when it last ran, now waits: it is protected in turn.
            collect(wh)
            report = actions.run(wh, enforce, bound, datetime.now(UTC))[0]
            assert report.applied == [other] and p.qos(other) == QOS_PROTECTED
            assert not report.released and not report.failed
            c.run("scancel", victim)
            wait_until("V ended", lambda: p.state(victim) not in ("PENDING", "RUNNING", "COMPLETING"))
            collect(wh)
            report = actions.run(wh, enforce, bound, datetime.now(UTC))[0]
            # V, gone from Slurm's queue, has its row closed by the reconcile that opens every enforce cycle.
            assert report.reconciled + report.released == [victim] and not report.failed
            audit = wh.query("SELECT job_id, mode, undone_at, detail FROM actions ORDER BY id").rows()
            assert [(job, mode, closed is not None, detail) for job, mode, closed, detail in audit] == [
                (victim, "enforce", True, f'{{"qos": "{QOS_LOW}"}}'),
                (other, "enforce", False, f'{{"qos": "{QOS_LOW}"}}'),
            ]
    finally:
        c.run("scancel", *jobs)
