"""The replay reads only the warehouse and reproduces the simulated past under the actual policy."""

from __future__ import annotations

import re
from datetime import UTC, datetime, timedelta
from pathlib import Path

import pytest
from sim_cluster import CHURN, Clusters, default_settings, sim_config

from preemptlens.analytics.params import AnalyticsSettings
from preemptlens.analytics.refresh import analyze
from preemptlens.analytics.simulator import simulate_into
from preemptlens.analytics.whatif.replay import Window, load_workload, observed_figures, validate
from preemptlens.cli import main
from preemptlens.errors import SchemaError
from preemptlens.warehouse import Warehouse


@pytest.mark.parametrize("seed", [1, 2, 3, 4])
def test_replay_reproduces_the_simulated_past_within_ten_percent(clusters: Clusters, seed: int) -> None:
    wh, window = clusters.get(f"validation{seed}", samples=True, gpus=256, days=3.0, seed=seed, hoarding_share=0.06)
    workload = load_workload(wh, window, default_settings())
    validation, _ = validate(wh, workload, 0.10)
    truth = wh.query("select count(*) as n, sum(lost_gpu_s) / 3600 as lost from sim_truth_preemptions").row(0)
    # The observed side is the ledger, which matches the simulator's truth exactly on this data.
    assert validation.observed.preemptions == truth[0]
    assert validation.observed.lost_gpu_h == pytest.approx(truth[1])
    assert validation.observed.preemptions > 100
    # Against the simulator's truth directly, not only against the ledger.
    replayed = validation.replayed
    assert abs(replayed.preemptions - truth[0]) <= 0.10 * truth[0], validation.describe()
    assert abs(replayed.lost_gpu_h - truth[1]) <= 0.10 * truth[1], validation.describe()
    assert validation.ok, validation.describe()
    # Jobs that hoard GPUs and checkpoint are in the replayed workload, with their measured habits.
    assert any(j.hoards for j in workload.jobs) and any(j.final_checkpoint for j in workload.jobs)


@pytest.mark.parametrize(("seed", "backfill"), [(3, "reserve"), (4, "reserve"), (4, "greedy")])
def test_replay_of_the_simulators_own_policy_reproduces_it_exactly(tmp_path: Path, seed: int, backfill: str) -> None:
    # As `preemptlens demo`: the simulator's policy is loaded (no inference error), hoarders and failing jobs are
    # many. A reservation looks ahead at planned ends, so an input the replay cannot know (the idle stretches of a
    # hoarder still pending or running at the window's end, a crash ahead of a run preempted first) must not
    # enter them: seed 4 diverged on the first, seed 3 on the second.
    sim = sim_config(gpus=32, days=3.0, seed=seed, hoarding_share=0.15, fail_share=0.05, policy={"backfill": backfill})
    with Warehouse(tmp_path / "w.duckdb") as wh:
        simulate_into(wh, sim)
        analyze(wh, AnalyticsSettings())
        window = Window("sim", sim.start, sim.start + timedelta(seconds=sim.horizon_s))
        workload = load_workload(wh, window, default_settings())
        assert workload.actual.policy.backfill == backfill
        assert any(j.hoards for j in workload.jobs)
        assert wh.query("select count(*) from job_runs where state = 'failed'").item() > 0
        validation, _ = validate(wh, workload, 0.0)
    observed, replayed = validation.observed, validation.replayed
    assert observed.preemptions > 5, validation.describe()
    assert (replayed.preemptions, replayed.victim_jobs) == (observed.preemptions, observed.victim_jobs), \
        validation.describe()
    assert replayed.lost_gpu_h == pytest.approx(observed.lost_gpu_h, rel=1e-9), validation.describe()
    assert replayed.high_wait_median_s == observed.high_wait_median_s, validation.describe()


def test_policy_in_force_is_inferred_from_the_ledger(clusters: Clusters) -> None:
    wh, window = clusters.get("inferred", **CHURN, policy={"min_run_s": 900, "grace_s": 60, "requeue_hold_s": 300})
    policy = load_workload(wh, window, default_settings()).actual.policy
    assert (policy.min_run_s, policy.grace_s, policy.requeue_hold_s) == (900, 60, 300)
    assert set(policy.may_preempt["high"]) == {"normal", "low"}
    assert policy.may_preempt["low"] == ()


def test_configured_policy_wins_over_inference(clusters: Clusters) -> None:
    wh, window = clusters.get("inferred", **CHURN, policy={"min_run_s": 900, "grace_s": 60, "requeue_hold_s": 300})
    settings = default_settings(min_run_s=120.0, grace_s=30.0, may_preempt={"critical": ["low"]})
    actual = load_workload(wh, window, settings).actual
    assert (actual.policy.min_run_s, actual.policy.grace_s) == (120, 30)
    assert actual.policy.may_preempt["critical"] == ("low",)
    assert actual.kind("min_run_s") == "configured" and actual.kind("requeue_hold_s") == "inferred"
    # Every inferred value is printed with its evidence.
    assert "requeue_hold_s 300 s (inferred: " in actual.describe()


def test_observed_figures_count_only_jobs_of_the_window(clusters: Clusters) -> None:
    wh, window = clusters.get("inferred", **CHURN, policy={"min_run_s": 900, "grace_s": 60, "requeue_hold_s": 300})
    later = type(window)(window.cluster, window.start + (window.end - window.start) / 2, window.end)
    assert observed_figures(wh, later).preemptions < observed_figures(wh, window).preemptions


def test_a_pool_that_holds_no_gpus_leaves_its_jobs_out(clusters: Clusters) -> None:
    wh, window = clusters.get("emptied", **CHURN)
    before = load_workload(wh, window, default_settings())
    pool = before.pools[0].name
    in_pool = sum(1 for j in before.jobs if j.pool == pool)
    wh.con.execute("insert into pools values (?, ?, ?, 0, null, 'test', 'test')",
                   [window.cluster, pool, window.end - timedelta(seconds=1)])
    after = load_workload(wh, window, default_settings())
    assert pool not in {p.name for p in after.pools}
    assert after.skipped["pool without GPUs"] == in_pool > 0
    assert len(after.jobs) == len(before.jobs) - in_pool


def test_replay_without_analyze_names_what_is_missing(tmp_path: Path) -> None:
    with Warehouse(tmp_path / "empty.duckdb") as wh:
        window = Window("c1", datetime(2026, 1, 1, tzinfo=UTC), datetime(2026, 1, 2, tzinfo=UTC))
        with pytest.raises(SchemaError, match="preemptlens analyze"):
            load_workload(wh, window, default_settings())


def test_suggest_command_prints_the_error_and_stores_idempotently(
    clusters: Clusters, capsys: pytest.CaptureFixture[str]
) -> None:
    # Tuned under greedy backfill (tests/tuning/test_suggestions.py, NO_MIN_RUN): with reservations this seed
    # gives no exemption worth suggesting.
    wh, window = clusters.get("cli", **CHURN, checkpoint_share=0.0, warmup_s_range=(1200.0, 1800.0),
                              policy={"min_run_s": 0, "backfill": "greedy"})
    path = wh.path
    wh.close()
    clusters.built.pop("cli")
    config = Path(path).with_suffix(".toml")
    config.write_text('[tuning]\nbackfill = "greedy"\n')
    args = ["--config", str(config), "--warehouse", path, "suggest", "--cluster", "sim", "--start",
            window.start.isoformat(), "--end", window.end.isoformat(), "--scheduler", "slurm"]
    assert main(args) == 0
    out = capsys.readouterr().out
    # the replay's error first, once, as a small table; then only the asked scheduler's configuration
    assert out.startswith("replay under the policy in force ")
    assert out.count("replay under the policy in force") == 1 and "   preemptions " in out
    assert "PreemptExemptTime=" in out and "--- kueue" not in out and "--- slurm" in out
    # no raw dicts (quoted keys), no 16-digit floats
    assert not re.search(r"\{['\"]", out) and not re.search(r"\d\.\d{7,}", out)
    with Warehouse(path) as reopened:
        first = reopened.query("select kind, subject, rank, title from suggestions order by rank")
        validation = reopened.query("select * from replay_validation")
    assert main(args) == 0
    with Warehouse(path) as reopened:
        second = reopened.query("select kind, subject, rank, title from suggestions order by rank")
        assert reopened.query("select count(*) as n from replay_validation")["n"][0] == 1
    assert first.height > 0 and first.equals(second)
    assert validation["observed_preemptions"][0] > 0 and validation["preemptions_error"][0] is not None
