"""Idle hoarding, gaps, overlapping runs, avoidable preemptions and the incremental refresh.

Pool h (8 GPUs, node n1): H holds GPUs 0-3 for two hours with busy 0, except
that GPU 0 has no samples for minutes 67-76 (a gap, not idle time). V4 holds
GPUs 4-7 busy and is preempted at 3600 s by P4 (4 GPUs): H's idle GPUs could
have served P4, so the preemption is avoidable. H2 (pool g) has two runs that
overlap in bad data while its one GPU idles throughout.
"""

from __future__ import annotations

import polars as pl
import pytest
from analytics_scenario import Scenario, at, default_params

from preemptlens.analytics.refresh import analyze
from preemptlens.commands.analyze import _steps


def build(sc: Scenario) -> None:
    sc.pool("h", 8)
    sc.job("H", "normal", 4, "h", -60, team="vision", user_name="ann")
    sc.run("H", 1, 4, "h", 0, 7200, "completed")
    for gpu in range(4):
        if gpu == 0:
            sc.samples("H", "n1", gpu, 0, 67 * 60, 0.0)
            sc.samples("H", "n1", gpu, 77 * 60, 7200, 0.0)
        else:
            sc.samples("H", "n1", gpu, 0, 7200, 0.01)
    sc.job("V4", "low", 4, "h", -60, team="nlp")
    sc.run("V4", 1, 4, "h", 0, 3600, "preempted", preemptor_job_id="P4", reason="prio")
    sc.job("P4", "high", 4, "h", 3500, team="infer")
    sc.run("P4", 1, 4, "h", 3600, 7200, "completed")
    for gpu in range(4, 8):
        sc.samples("V4", "n1", gpu, 0, 3600, 0.9)
        sc.samples("P4", "n1", gpu, 3600, 7200, 0.8)

    sc.pool("g", 1)
    sc.job("H2", "low", 1, "g", -60, team="rl")
    sc.run("H2", 1, 1, "g", 0, 3600, "failed")
    sc.run("H2", 2, 1, "g", 1800, 5400, "completed")
    sc.samples("H2", "n2", 0, 0, 5400, 0.0)


@pytest.fixture
def built(sc: Scenario) -> Scenario:
    build(sc)
    sc.analyze()
    return sc


def test_idle_gpu_hours_per_run_skip_gaps(built: Scenario) -> None:
    runs = built.view("idle_hoarding_runs", "job_id, run")
    h = runs.row(by_predicate=pl.col("job_id") == "H", named=True)
    # GPUs 1-3 idle all 7200 s; GPU 0 idle 67 + 43 minutes around its 10-minute gap
    assert h["idle_gpu_hours"] * 3600 == pytest.approx(3 * 7200 + (67 + 43) * 60)
    assert h["longest_stretch_s"] == 7200
    assert h["stretches"] == 5
    assert h["idle_share"] == pytest.approx((3 * 7200 + 110 * 60) / (4 * 7200))
    assert "V4" not in runs["job_id"].to_list()


def test_overlapping_runs_are_flagged_and_not_double_counted(built: Scenario) -> None:
    runs = built.view("idle_hoarding_runs", "job_id, run").filter(pl.col("job_id") == "H2")
    # the GPU idled 5400 s; run 2 counts only from run 1's end (3600 s)
    assert runs["idle_gpu_hours"].sum() * 3600 == pytest.approx(5400)
    assert runs.select("run", "idle_gpu_hours").rows() == [(1, 1.0), (2, 0.5)]
    issues = built.view("data_issues", "job_id, run")
    assert issues.select("job_id", "run").rows() == [("H2", 2)]


def test_rollups_by_job_user_team(built: Scenario) -> None:
    users = built.view("idle_hoarding WHERE level = 'user'", "team, user_name")
    ann = users.row(by_predicate=pl.col("user_name") == "ann", named=True)
    assert ann["idle_gpu_hours"] == pytest.approx((3 * 7200 + 110 * 60) / 3600)
    assert ann["allocated_gpu_hours"] == pytest.approx(8)
    teams = built.view("idle_hoarding WHERE level = 'team'", "team")
    assert teams["team"].to_list() == ["rl", "vision"]
    assert teams["user_name"].null_count() == teams.height
    jobs = built.view("idle_hoarding WHERE level = 'job'", "job_id")
    assert jobs["job_id"].to_list() == ["H", "H2"]
    # Every level sums the same idle GPU-hours.
    assert users["idle_gpu_hours"].sum() == pytest.approx(teams["idle_gpu_hours"].sum())
    assert jobs["idle_gpu_hours"].sum() == pytest.approx(teams["idle_gpu_hours"].sum())


def test_avoidable_when_idle_hoarded_gpus_cover_the_need(built: Scenario) -> None:
    ledger = built.view("preemption_ledger", "victim_job_id")
    v4 = ledger.row(by_predicate=pl.col("victim_job_id") == "V4", named=True)
    # at 3600 s GPUs 1-3 have idled since 0 s; GPU 0 too (its gap starts at 4020 s)
    assert v4["idle_gpus_in_pool"] == 4
    assert v4["avoidable"] is True


def test_not_avoidable_with_a_longer_window(sc: Scenario) -> None:
    build(sc)
    sc.analyze(hoarding_window_s=4000.0)
    v4 = sc.view("preemption_ledger", "victim_job_id").row(0, named=True)
    assert (v4["idle_gpus_in_pool"], v4["avoidable"]) == (0, False)


def test_zero_rule_ignores_low_but_nonzero_use(sc: Scenario) -> None:
    build(sc)
    sc.analyze(idle_rule="zero")
    h = sc.view("idle_hoarding_runs", "job_id").filter(pl.col("job_id") == "H")
    # only GPU 0 (busy exactly 0) counts
    assert h["idle_gpu_hours"].item() * 3600 == pytest.approx(110 * 60)


def test_unallocated_is_reported_apart_from_hoarded(built: Scenario) -> None:
    day = built.view("unallocated_idle", "pool").filter(pl.col("pool") == "h").row(0, named=True)
    # data span 0..7200 s: 8 GPUs x 2 h of capacity, all allocated (H 4 x 2 h, V4 then P4 4 x 2 h)
    assert day["capacity_gpu_hours"] == pytest.approx(16)
    assert day["allocated_gpu_hours"] == pytest.approx(16)
    assert day["unallocated_gpu_hours"] == pytest.approx(0)
    assert day["hoarded_gpu_hours"] == pytest.approx((3 * 7200 + 110 * 60) / 3600)


def test_hoarding_without_gpu_samples_is_unknown_not_zero(sc: Scenario) -> None:
    build(sc)
    del sc.rows["gpu_samples"]
    sc.analyze()
    days = sc.view("unallocated_idle", "pool")
    # capacity and allocation come from the scheduler and stay known; idle GPUs were never measured
    assert days["allocated_gpu_hours"].null_count() == 0
    assert days["hoarded_gpu_hours"].null_count() == days.height > 0
    assert days["hoarded_share_of_allocated"].null_count() == days.height
    # allocated minus an unmeasured hoarding is no busy hour: scarcity's figure is unknown too, and a candidate is
    # scarce as Q1 answers (here no: every queue measure fails, whatever the busy hours)
    candidates = sc.view("pilot_candidates", "pool")
    assert candidates.height > 0 and candidates["busy_hours_share"].null_count() == candidates.height
    q1 = sc.view("readiness_scorecard", "question_no").row(0, named=True)
    assert candidates["scarce"].to_list() == [q1["answer"]] * candidates.height


def test_incremental_refresh_equals_full_rebuild(sc: Scenario) -> None:
    build(sc)
    # hold back the second hour of every sample, analyse, then load it
    later = [r for r in sc.rows["gpu_samples"] if r["time"] >= at(3600)]
    sc.rows["gpu_samples"] = [r for r in sc.rows["gpu_samples"] if r["time"] < at(3600)]
    first = sc.analyze()
    assert first.stretches.mode == "full"
    sc.rows["gpu_samples"] = later
    second = sc.analyze()
    assert second.stretches.mode == "incremental"
    order = "host, gpu_uuid, job_id, start_time"
    incremental = sc.view("gpu_idle_stretches", order)
    again = sc.analyze()
    assert again.stretches.mode == "unchanged"
    analyze(sc.wh, default_params(), full=True)
    assert sc.view("gpu_idle_stretches", order).equals(incremental)
    assert incremental.height == 6


def test_reloading_the_same_samples_changes_nothing(sc: Scenario) -> None:
    build(sc)
    samples = list(sc.rows["gpu_samples"])
    sc.analyze()
    before = sc.view("idle_hoarding_runs", "job_id, run")
    sc.rows["gpu_samples"] = samples
    sc.analyze()
    assert sc.view("idle_hoarding_runs", "job_id, run").equals(before)


def build_two_steps(sc: Scenario) -> None:
    """Cluster c1 scraped every 15 s, c2 every 60 s, one idle 1-GPU run each for two hours. c1's GPU misses
    two samples at 3,600 s: a 45-s gap, three of its steps (not idle time), though under a minute."""
    for cluster, step in (("c1", 15.0), ("c2", 60.0)):
        job = f"J{cluster}"
        sc.add("pools", cluster=cluster, pool="p", gpus=1, valid_from=at(-86400))
        sc.add("jobs", cluster=cluster, job_id=job, tier="low", gpus=1, pool="p", submit_time=at(-60),
               preemptible=True, team="t", user_name="u")
        sc.add("job_runs", cluster=cluster, job_id=job, run=1, gpus=1, pool="p", start_time=at(0),
               end_time=at(7200), state="completed")
        t = 0.0
        while t < 7200:
            if not (cluster == "c1" and t in (3600.0, 3615.0)):
                sc.add("gpu_samples", cluster=cluster, host=f"{cluster}-n1", gpu_uuid=f"GPU-{cluster}", gpu_index=0,
                       time=at(t), busy=0.0, job_id=job)
            t += step


def test_each_cluster_is_read_at_its_own_sampling_step(sc: Scenario) -> None:
    build_two_steps(sc)
    # hold back the second hour, so that the incremental refresh is checked at both steps too
    later = [r for r in sc.rows["gpu_samples"] if r["time"] >= at(3600)]
    sc.rows["gpu_samples"] = [r for r in sc.rows["gpu_samples"] if r["time"] < at(3600)]
    sc.analyze()
    sc.rows["gpu_samples"] = later
    report = sc.analyze()
    assert report.stretches.mode == "incremental"
    assert report.sample_steps == {"c1": 15.0, "c2": 60.0}
    assert _steps(report.sample_steps) == "sampling steps c1 15 s, c2 60 s"
    assert sc.wh.query("SELECT sample_step_s FROM analytics_params")["sample_step_s"].to_list() == [None]
    order = "cluster, start_time"
    stretches = sc.view("gpu_idle_stretches", order)
    # c1: split at the gap, each piece ending one 15-s step after its last sample; c2: one stretch, 60 s after
    assert stretches.select("cluster", "start_time", "end_time").rows() == [
        ("c1", at(0), at(3585 + 15)), ("c1", at(3630), at(7185 + 15)), ("c2", at(0), at(7140 + 60))]
    runs = sc.view("idle_hoarding_runs", "cluster, job_id")
    assert dict(zip(runs["cluster"], runs["idle_gpu_hours"] * 3600, strict=True)) == {
        "c1": pytest.approx(7200 - 30), "c2": pytest.approx(7200)}
    analyze(sc.wh, default_params(), full=True)
    assert sc.view("gpu_idle_stretches", order).equals(stretches)
    # a configured step serves every cluster, as before
    configured = analyze(sc.wh, default_params(sample_step_s=60.0))
    assert configured.sample_steps == {"c1": 60.0, "c2": 60.0} and _steps(configured.sample_steps) == (
        "sampling step 60 s")
    # ... which is what the one inferred step of before did to the faster cluster: its gap read as idle time
    assert sc.view("gpu_idle_stretches", order)["cluster"].to_list() == ["c1", "c2"]
