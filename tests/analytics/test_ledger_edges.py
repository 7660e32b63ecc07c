"""Two ledger edges a real Slurm 22.05 showed (issue 26).

- sacct truncates a run's end to the second, while the slurmctld log's link
  keeps the millisecond of the kill: a checkpoint written between the two
  saved the run. Job S: checkpoints every 10 s of work, preempted at 1000.6 s
  (sacct says 1000), its last checkpoint at 1000.3 s; the restart reloads for
  5 s and resumes from that checkpoint's step.
- A restart preempted before its first checkpoint: job W's second run reloads
  for 30 s, works 40 s and is preempted. Its row loses the whole 70 s run (the
  rule of every run without a checkpoint), so the first row does not count the
  30 s warm-up again.
"""

from __future__ import annotations

import polars as pl
import pytest
from analytics_scenario import Scenario, analysed, at

S_KILL = 1000.6
S_LAST_CHECKPOINT = 1000.3
S_RESTART = 1020.0
S_WARMUP = 5.0

W_RESTART = 970.0
W_WARMUP = 30.0
W_SECOND_END = 1040.0


def build(sc: Scenario) -> None:
    sc.pool("gpu", 8)
    sc.job("S", "low", 2, "gpu", -5)
    sc.run("S", 1, 2, "gpu", 0, 1000, "preempted")
    for k in range(1, 100):
        sc.checkpoint("S", 1, 0.3 + 10 * k, 10 * k)
    sc.checkpoint("S", 1, S_LAST_CHECKPOINT, 1000)
    sc.link("S", S_KILL, "H", "requeued")
    sc.run("S", 2, 2, "gpu", S_RESTART, 1200, "completed")
    resumed = S_RESTART + S_WARMUP
    for k in range(1, 20):
        sc.checkpoint("S", 2, resumed + k, 1000 + k, kind="progress")
    sc.job("H", "high", 8, "gpu", 999)
    sc.run("H", 1, 8, "gpu", 1001, 1010, "completed")

    sc.job("W", "low", 4, "gpu", -5)
    sc.run("W", 1, 4, "gpu", 0, 950, "preempted", preemptor_job_id="G")
    for k in range(1, 10):
        sc.checkpoint("W", 1, 100 * k, 100 * k)
    resumed_w = W_RESTART + W_WARMUP
    sc.run("W", 2, 4, "gpu", W_RESTART, W_SECOND_END, "preempted", preemptor_job_id="G2")
    sc.checkpoint("W", 2, resumed_w + 10, 910, kind="progress")
    sc.checkpoint("W", 2, resumed_w + 20, 920, kind="progress")
    sc.run("W", 3, 4, "gpu", 1060, 1300, "completed")
    sc.job("G", "high", 4, "gpu", 940)
    sc.run("G", 1, 4, "gpu", 950, 960, "completed")
    sc.job("G2", "high", 4, "gpu", 1035)
    sc.run("G2", 1, 4, "gpu", W_SECOND_END, 1050, "completed")


@pytest.fixture(scope="module")
def ledger(tmp_path_factory: pytest.TempPathFactory) -> pl.DataFrame:
    with analysed(tmp_path_factory.mktemp("edges"), build) as sc:
        return sc.view("preemption_ledger", "victim_job_id, victim_run")


def _row(ledger: pl.DataFrame, job: str, run: int) -> dict[str, object]:
    rows = ledger.filter((pl.col("victim_job_id") == job) & (pl.col("victim_run") == run)).to_dicts()
    assert len(rows) == 1, rows
    return rows[0]


def test_a_checkpoint_between_the_whole_second_end_and_the_kill_counts(ledger: pl.DataFrame) -> None:
    s = _row(ledger, "S", 1)
    assert s["time"] == at(S_KILL)
    assert s["last_checkpoint_time"] == at(S_LAST_CHECKPOINT)
    assert s["lost_s"] == pytest.approx(S_KILL - S_LAST_CHECKPOINT)
    # The restart resumed from that checkpoint's step: its warm-up is measured, not zeroed.
    assert s["warmup_s"] == pytest.approx(S_WARMUP)
    assert s["requeue_delay_s"] == pytest.approx(S_RESTART - S_KILL)


def test_a_link_outside_the_second_leaves_the_end_alone(ledger: pl.DataFrame) -> None:
    # W's runs name their preemptors themselves and have no link: the end stays sacct's.
    assert _row(ledger, "W", 1)["time"] == at(950)


def test_a_restart_preempted_before_its_first_checkpoint_counts_its_warm_up_once(ledger: pl.DataFrame) -> None:
    first, second = _row(ledger, "W", 1), _row(ledger, "W", 2)
    assert first["lost_s"] == pytest.approx(50)
    assert second["lost_s"] == pytest.approx(W_SECOND_END - W_RESTART)
    assert first["warmup_s"] == 0
    # The second run's GPU time is thrown away once.
    assert float(first["warmup_gpu_s"]) + float(second["lost_gpu_s"]) == pytest.approx(
        4 * (W_SECOND_END - W_RESTART))
    assert float(first["wasted_gpu_s"]) == pytest.approx(4 * 50)
