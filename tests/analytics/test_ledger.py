"""The preemption ledger against hand-computed ground truth.

Pool a100 (16 GPUs): V1 (8 GPUs, checkpoints) is preempted at 3600 s by P1
(8 GPUs) while O1 (8 GPUs) runs until 5400 s. Pool b (4 GPUs): V2 is
preempted twice, once by an unknown preemptor and once by P2 (named only in
preemption_links), and never restarts. Pool c (no capacity row): V3 declares
a checkpoint interval but records no checkpoint.
"""

from __future__ import annotations

import polars as pl
import pytest
from analytics_scenario import Scenario, analysed, at

WARMUP = 120.0
RESTART = 3600 + 600
V1_RUN2_END = RESTART + WARMUP + 4800
DATA_END = V1_RUN2_END


def build(sc: Scenario) -> None:
    sc.pool("a100", 16)
    sc.pool("b", 4)
    sc.job("V1", "low", 8, "a100", -60, team="vision")
    sc.run("V1", 1, 8, "a100", 0, 3600, "preempted", preemptor_job_id="P1", reason="PreemptedByP1")
    sc.checkpoint("V1", 1, 1200, 100)
    sc.checkpoint("V1", 1, 2400, 200)
    sc.checkpoint("V1", None, 100, 0, kind="progress")
    sc.run("V1", 2, 8, "a100", RESTART, V1_RUN2_END, "completed")
    # progress resumes at step 200 (the last checkpoint) WARMUP s after the restart, 1 step per 12 s
    sc.checkpoint("V1", 2, RESTART + 180, 205, kind="progress")
    sc.checkpoint("V1", 2, RESTART + 240, 210, kind="progress")
    sc.checkpoint("V1", 2, RESTART + 1320, 300)

    sc.job("P1", "critical", 8, "a100", 3500, team="infer")
    sc.run("P1", 1, 8, "a100", 3600, 7200, "completed")
    sc.job("O1", "normal", 8, "a100", -120, team="nlp")
    sc.run("O1", 1, 8, "a100", 0, 5400, "completed")

    sc.job("V2", "low", 4, "b", -60, team="vision")
    sc.run("V2", 1, 4, "b", 0, 1000, "preempted")
    sc.run("V2", 2, 4, "b", 1500, 2000, "preempted")
    sc.link("V2", 2000.5, "P2", "prioritization in the ClusterQueue")
    sc.job("P2", "high", 4, "b", 1990, team="infer")
    sc.run("P2", 1, 4, "b", 2001, 3000, "completed")

    sc.job("V3", "normal", 2, "c", -60, team="rl", checkpoint_interval_s=600.0, work_s=5000.0)
    sc.run("V3", 1, 2, "c", 0, 1000, "preempted", preemptor_job_id="P3")
    sc.job("P3", "normal", 2, "c", 900, team="rl")
    sc.run("P3", 1, 2, "c", 1010, 2000, "completed")


@pytest.fixture(scope="module")
def ledger(tmp_path_factory: pytest.TempPathFactory) -> pl.DataFrame:
    with analysed(tmp_path_factory.mktemp("ledger"), build) as sc:
        return sc.view("preemption_ledger", "victim_job_id, victim_run")


def row(ledger: pl.DataFrame, job: str, run: int) -> dict[str, object]:
    rows = ledger.filter((pl.col("victim_job_id") == job) & (pl.col("victim_run") == run)).to_dicts()
    assert len(rows) == 1
    return rows[0]


def test_one_row_per_preemption(ledger: pl.DataFrame) -> None:
    assert ledger.select("victim_job_id", "victim_run").rows() == [("V1", 1), ("V2", 1), ("V2", 2), ("V3", 1)]


def test_lost_progress_measured_from_last_checkpoint(ledger: pl.DataFrame) -> None:
    v1 = row(ledger, "V1", 1)
    assert v1["basis"] == "checkpoint"
    assert v1["last_checkpoint_time"] == at(2400)
    assert v1["lost_gpu_s"] == 8 * (3600 - 2400)


def test_no_checkpoint_data_assumes_everything_since_run_start(ledger: pl.DataFrame) -> None:
    assert row(ledger, "V2", 1)["basis"] == "assumed"
    assert row(ledger, "V2", 1)["lost_gpu_s"] == 4 * 1000
    # V2's second run ends at 2000 s by its whole-second record; its link, 2000.5 s, is the kill
    assert row(ledger, "V2", 2)["lost_gpu_s"] == 4 * 500.5


def test_declared_interval_gives_expected_loss(ledger: pl.DataFrame) -> None:
    v3 = row(ledger, "V3", 1)
    assert v3["basis"] == "declared"
    assert v3["lost_gpu_s"] == 2 * 600 / 2


def test_requeue_delay_warmup_and_recovery(ledger: pl.DataFrame) -> None:
    v1 = row(ledger, "V1", 1)
    assert v1["restart_time"] == at(RESTART)
    assert v1["requeue_delay_s"] == 600
    assert v1["requeue_censored"] is False
    assert v1["warmup_s"] == pytest.approx(WARMUP)
    assert v1["recovery_s"] == pytest.approx(600 + WARMUP + 1200)


def test_no_later_restart_is_censored_at_data_end(ledger: pl.DataFrame) -> None:
    v2 = row(ledger, "V2", 2)
    assert v2["restart_time"] is None
    assert v2["requeue_censored"] is True
    assert v2["requeue_delay_s"] == DATA_END - 2000.5
    # the first preemption of V2 restarted with run 2
    assert row(ledger, "V2", 1)["requeue_delay_s"] == 500


def test_preemptor_from_run_from_links_or_unknown(ledger: pl.DataFrame) -> None:
    assert row(ledger, "V1", 1)["preemptor_job_id"] == "P1"
    v2 = row(ledger, "V2", 2)
    assert (v2["preemptor_job_id"], v2["reason"]) == ("P2", "prioritization in the ClusterQueue")
    assert v2["preemptor_tier"] == "high"
    unknown = row(ledger, "V2", 1)
    assert unknown["preemptor_known"] is False
    assert unknown["gain_gpu_s"] is None


def test_repeat_and_early_victims(ledger: pl.DataFrame) -> None:
    assert row(ledger, "V2", 1)["prior_job_preemptions"] == 0
    assert row(ledger, "V2", 2)["prior_job_preemptions"] == 1
    assert row(ledger, "V2", 2)["repeat_victim"] is True
    # team vision: V2 at 1000 s, V2 at 2000 s, then V1 at 3600 s
    assert row(ledger, "V1", 1)["prior_team_preemptions"] == 2
    assert row(ledger, "V2", 2)["early_victim"] is True
    assert row(ledger, "V1", 1)["early_victim"] is False


def test_work_done_share(ledger: pl.DataFrame) -> None:
    v1 = row(ledger, "V1", 1)
    # completed job: needed = run time 3600 + 4920 - lost 1200 - warm-up 120
    assert v1["work_needed_s"] == pytest.approx(7200)
    assert v1["work_done_share"] == pytest.approx(0.5)
    v3 = row(ledger, "V3", 1)
    assert v3["work_done_share"] == pytest.approx(1000 / 5000)
    # V2 declared no work and never completed: how much of it was done is unknown, not all of it
    v2 = row(ledger, "V2", 1)
    assert v2["work_needed_s"] is None and v2["work_done_share"] is None


def test_gain_waits_for_natural_ends(ledger: pl.DataFrame) -> None:
    # pool a100 was full; O1's own end at 5400 s would have freed 8 GPUs
    # before V1 finished its remaining 3600 s of work (at 7200 s).
    v1 = row(ledger, "V1", 1)
    assert v1["counterfactual_start"] == at(5400)
    assert v1["gain_gpu_s"] == 8 * (5400 - 3600)
    assert v1["gain_censored"] is False
    # V3 alone held pool c; its remaining 4000 s of work set the release
    assert row(ledger, "V3", 1)["gain_gpu_s"] == pytest.approx(2 * (1000 + 4000 - 1010))
    # V2's remaining work is unknown: the gain is censored at the data's end
    v2 = row(ledger, "V2", 2)
    assert v2["gain_censored"] is True
    assert v2["gain_gpu_s"] == 4 * (DATA_END - 2001)
