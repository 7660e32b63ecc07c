"""The simulator: determinism, and ground truth that agrees with its own raw rows."""

from __future__ import annotations

import dataclasses
import itertools
from collections import defaultdict
from datetime import timedelta

import polars as pl
import pytest
from polars.testing import assert_frame_equal

from preemptlens.analytics.simulator import PolicyConfig, PoolSpec, SimConfig, SimSummary, Simulation, simulate
from preemptlens.analytics.simulator.engine import simulate_jobs
from preemptlens.analytics.simulator.model import JobSpec
from preemptlens.analytics.simulator.workload import generate_jobs
from preemptlens.contract import TIER_RANK
from preemptlens.errors import ConfigError
from preemptlens.warehouse import RECORD_COLUMN, Warehouse

# -- determinism --------------------------------------------------------------


def test_same_seed_gives_identical_output(simulation: Simulation, config: SimConfig) -> None:
    again = simulate(config)
    for table, frame in simulation.frames.items():
        assert_frame_equal(frame, again.frames[table], check_exact=True)
    first, second = next(simulation.gpu_samples()), next(again.gpu_samples())
    assert_frame_equal(first, second, check_exact=True)


def test_another_seed_gives_another_workload(simulation: Simulation, config: SimConfig) -> None:
    other = simulate(dataclasses.replace(config, workload=dataclasses.replace(config.workload, seed=12)))
    assert not simulation.frames["jobs"].equals(other.frames["jobs"])


def test_loading_twice_changes_nothing(loaded: tuple[Warehouse, SimSummary], config: SimConfig) -> None:
    wh, first = loaded
    before = wh.query("SELECT count(*) AS n FROM gpu_samples")["n"][0]
    from preemptlens.analytics.simulator import simulate_into

    second = simulate_into(wh, config)
    assert first.loaded > 0 and first.quarantined == 0
    assert second.loaded == 0
    assert second.unchanged == first.loaded
    assert wh.query("SELECT count(*) AS n FROM gpu_samples")["n"][0] == before


# -- the model does what it claims ---------------------------------------------


def test_enough_happens_to_test(loaded: tuple[Warehouse, SimSummary], config: SimConfig) -> None:
    _, summary = loaded
    assert summary.preemptions >= 20
    assert summary.hoarding_stretches >= 20
    assert summary.samples == 7 * 1440 * config.gpus


def test_lost_gpu_seconds_recomputed_from_raw_rows(wh: Warehouse) -> None:
    recomputed = wh.query(
        """
        WITH preempted AS (
            SELECT job_id, run, gpus, start_time, end_time
            FROM job_runs WHERE cluster = 'simtest' AND state = 'preempted'
        ),
        last_checkpoint AS (
            SELECT p.job_id, p.run, max(c.time) AS last_time
            FROM preempted p JOIN checkpoints c
              ON c.job_id = p.job_id AND c.run = p.run AND c.kind = 'checkpoint' AND c.time <= p.end_time
            GROUP BY ALL
        )
        SELECT p.job_id, p.run, p.end_time, l.last_time,
               p.gpus * epoch(p.end_time - coalesce(l.last_time, p.start_time)) AS lost
        FROM preempted p LEFT JOIN last_checkpoint l USING (job_id, run)
        """
    )
    truth = wh.query(
        "SELECT victim_job_id AS job_id, victim_run AS run, time, last_checkpoint_time, lost_gpu_s "
        "FROM sim_truth_preemptions WHERE cluster = 'simtest'"
    )
    both = recomputed.join(truth, on=["job_id", "run"], how="full", coalesce=True)
    assert both.height == truth.height == recomputed.height > 0
    assert (both["end_time"] == both["time"]).all()
    assert both.filter(pl.col("last_time").ne_missing(pl.col("last_checkpoint_time"))).is_empty()
    assert ((both["lost"] - both["lost_gpu_s"]).abs() < 1e-6).all()


def test_requeue_truth_matches_next_run(wh: Warehouse, config: SimConfig) -> None:
    rows = wh.query(
        """
        SELECT t.time, t.restart_time, t.requeue_delay_s, n.submit_time, n.eligible_time, n.start_time, n.state
        FROM sim_truth_preemptions t
        JOIN job_runs n ON n.job_id = t.victim_job_id AND n.run = t.victim_run + 1
        WHERE t.cluster = 'simtest'
        """
    )
    total = wh.query("SELECT count(*) AS n FROM sim_truth_preemptions")["n"][0]
    # Every victim is requeued as a new run, queued at the preemption and held for requeue_hold_s.
    assert rows.height == total
    assert (rows["submit_time"] == rows["time"]).all()
    hold = timedelta(seconds=config.policy.requeue_hold_s)
    assert (rows["eligible_time"] == rows["time"] + hold).all()
    started = rows.filter(pl.col("start_time").is_not_null())
    assert started.height >= 0.8 * rows.height
    assert started.filter(pl.col("restart_time").ne_missing(pl.col("start_time"))).is_empty()
    delays = (started["start_time"] - started["time"]).dt.total_microseconds() / 1e6
    assert ((delays - started["requeue_delay_s"]).abs() < 1e-6).all()
    assert (started["start_time"] >= started["eligible_time"]).all()
    assert rows.filter(pl.col("start_time").is_null())["restart_time"].is_null().all()


def test_victims_are_lower_tier_preemptible_and_ran_min_run_time(simulation: Simulation, config: SimConfig) -> None:
    out = simulation.outcome
    policy = config.policy
    checked = 0
    for run in out.runs:
        if run.state != "preempted":
            continue
        assert run.preemptor is not None and run.signal_s is not None and run.start_s is not None
        victim, preemptor = out.jobs[run.job], out.jobs[run.preemptor]
        assert victim.preemptible
        assert TIER_RANK[victim.tier] < TIER_RANK[preemptor.tier]
        assert victim.tier in policy.may_preempt[preemptor.tier]
        assert run.signal_s - run.start_s >= policy.min_run_s
        assert run.end_s is not None and run.end_s - run.signal_s <= policy.grace_s
        # The preemptor starts once its victims have let go, not before, not long after.
        preemptor_runs = [out.runs[r] for r in out.job_runs[run.preemptor]]
        taker = min(
            (r for r in preemptor_runs if r.start_s is not None and r.start_s >= run.signal_s),
            key=lambda r: r.start_s or 0.0,
        )
        assert taker.start_s is not None and run.end_s <= taker.start_s <= run.signal_s + policy.grace_s
        # Only as many victims as needed: each one gives the preemptor GPUs.
        assert set(run.gpu_ids) & set(taker.gpu_ids)
        checked += 1
    assert checked > 0


def test_no_gpu_is_ever_double_allocated(simulation: Simulation) -> None:
    out = simulation.outcome
    held: dict[int, list[tuple[float, float]]] = defaultdict(list)
    for run in out.runs:
        if run.start_s is None:
            continue
        assert len(run.gpu_ids) == out.jobs[run.job].gpus
        end = out.horizon_s if run.end_s is None else run.end_s
        for g in run.gpu_ids:
            held[g].append((run.start_s, end))
    for spans in held.values():
        spans.sort()
        for (_, end), (start, _) in itertools.pairwise(spans):
            assert start >= end


def test_node_capacity_never_exceeded_in_raw_runs(wh: Warehouse, config: SimConfig) -> None:
    """From job_runs alone: GPUs held per host never exceed the node's 8 GPUs."""
    events = wh.query(
        """
        WITH runs AS (
            SELECT unnest(string_split(hosts, ',')) AS host, gpus / len(string_split(hosts, ',')) AS g,
                   start_time, coalesce(end_time, TIMESTAMPTZ '2100-01-01') AS end_time
            FROM job_runs WHERE cluster = 'simtest' AND start_time IS NOT NULL
        ),
        deltas AS (
            SELECT host, start_time AS t, g AS d FROM runs
            UNION ALL SELECT host, end_time, -g FROM runs
        )
        SELECT host, max(held) AS peak FROM (
            SELECT host, sum(d) OVER (PARTITION BY host ORDER BY t, d ROWS UNBOUNDED PRECEDING) AS held
            FROM deltas
        ) GROUP BY host
        """
    )
    assert events.height == config.gpus // 8
    assert events["peak"].max() == 8


def test_samples_show_one_row_per_gpu_and_minute_and_the_right_job(wh: Warehouse) -> None:
    dupes = wh.query(
        "SELECT count(*) AS n FROM (SELECT host, gpu_uuid, time FROM gpu_samples "
        "WHERE cluster = 'simtest' GROUP BY ALL HAVING count(*) > 1)"
    )
    assert dupes["n"][0] == 0
    uuids = wh.query("SELECT host, count(DISTINCT gpu_uuid) AS n, count(DISTINCT gpu_index) AS i "
                     "FROM gpu_samples GROUP BY host")
    assert (uuids["n"] == 8).all() and (uuids["i"] == 8).all()
    # At every sample time inside a run, exactly the run's GPUs carry its job id.
    mismatched = wh.query(
        """
        WITH per_time AS (
            SELECT job_id, time, count(*) AS n FROM gpu_samples
            WHERE cluster = 'simtest' AND job_id IS NOT NULL GROUP BY ALL
        )
        SELECT r.job_id, r.run, p.time, p.n, r.gpus FROM job_runs r JOIN per_time p
          ON p.job_id = r.job_id AND p.time >= r.start_time AND p.time < coalesce(r.end_time, TIMESTAMPTZ '2100-01-01')
        WHERE p.n <> r.gpus
        """
    )
    assert mismatched.is_empty()


def test_busy_levels_by_state(wh: Warehouse) -> None:
    unallocated = wh.query("SELECT max(busy) AS b, max(mem_used_mib) AS m FROM gpu_samples WHERE job_id IS NULL")
    assert unallocated["b"][0] == 0.0 and unallocated["m"][0] == 0.0
    # Jobs that never hoard, outside warm-up and final-checkpoint saving, work well above 0.05.
    working = wh.query(
        """
        SELECT min(s.busy) AS low, avg(s.busy) AS mean FROM gpu_samples s
        JOIN job_runs r ON r.job_id = s.job_id AND s.time >= r.start_time
             AND s.time < coalesce(r.end_time, TIMESTAMPTZ '2100-01-01')
        WHERE r.run = 1 AND s.job_id NOT IN (SELECT job_id FROM sim_truth_hoarding)
          AND (r.state <> 'preempted' OR s.time < r.end_time - INTERVAL 60 SECOND)
        """
    )
    assert working["low"][0] >= 0.4 and 0.6 < working["mean"][0] < 0.95


def test_hoarding_samples_are_idle_and_add_up_to_the_truth(wh: Warehouse, config: SimConfig) -> None:
    stretches = wh.query(
        """
        SELECT h.job_id, h.run, h.idle_start, h.idle_end, h.gpus, h.idle_gpu_s,
               count(s.time) AS samples, max(s.busy) AS peak, min(s.mem_used_mib) AS mem
        FROM sim_truth_hoarding h LEFT JOIN gpu_samples s
          ON s.job_id = h.job_id AND s.time >= h.idle_start AND s.time < h.idle_end
        WHERE h.cluster = 'simtest'
        GROUP BY ALL
        """
    )
    assert stretches.height > 0
    assert (stretches["peak"] < 0.05).all()
    assert (stretches["mem"] > 0).all()  # idle, yet holding memory: hoarding, not unallocated
    step = config.sample_step_s
    estimate = stretches["samples"] * step
    # Stretches start on the sample grid; one cut short by a preemption or the
    # horizon may end between samples, so the estimate is exact up to one step per GPU.
    assert ((estimate - stretches["idle_gpu_s"]).abs() < stretches["gpus"] * step).all()
    whole = stretches.filter(
        (pl.col("idle_end") - pl.col("idle_start")).dt.total_seconds() % step == 0
    )
    assert whole.height > 0
    assert (whole["samples"] * step == whole["idle_gpu_s"]).all()


def test_progress_is_flat_during_warmup_and_resumes_from_last_checkpoint(
    simulation: Simulation, wh: Warehouse
) -> None:
    rows = wh.query(
        """
        SELECT t.victim_job_id AS job_id, t.victim_run + 1 AS run, t.restart_time, t.warmup_s,
               (SELECT max(c.step) FROM checkpoints c WHERE c.job_id = t.victim_job_id
                  AND c.kind = 'checkpoint' AND c.time <= t.time) AS saved
        FROM sim_truth_preemptions t WHERE t.restart_time IS NOT NULL
        """
    )
    progress = wh.query("SELECT job_id, run, time, step FROM checkpoints WHERE kind = 'progress'")
    # The job's own warm-up: the truth's warmup_s is the one a preemption is charged (0 when the restart lost it).
    warmups = {j.job_id: j.warmup_s for j in simulation.jobs}
    checked = 0
    for job_id, run, restart, _, saved in rows.iter_rows():
        mine = progress.filter((pl.col("job_id") == job_id) & (pl.col("run") == run)).sort("time")
        warm_end = restart + timedelta(seconds=warmups[job_id])
        during = mine.filter(pl.col("time") < warm_end)["step"]
        after = mine.filter(pl.col("time") > warm_end)["step"]
        assert during.len() >= 1  # a progress row at the restart itself
        assert (during == (saved or 0.0)).all()
        if after.len():
            assert after[0] > (saved or 0.0)
            checked += 1
    assert checked > 0


def test_final_checkpoint_limits_the_loss_to_the_save_time(simulation: Simulation, config: SimConfig) -> None:
    out = simulation.outcome
    finals = [r for r in out.runs if r.state == "preempted" and r.final_checkpoint]
    kills = [r for r in out.runs if r.state == "preempted" and not r.final_checkpoint]
    assert finals and kills
    for run in finals:
        job = out.jobs[run.job]
        assert run.checkpoints[-1][0] == run.signal_s
        assert run.end_s == run.signal_s + job.save_s
    for run in kills:
        assert run.end_s == run.signal_s + config.policy.grace_s
    lost = {(p.victim, p.victim_run): p.lost_gpu_s for p in out.preemptions()}
    for run in finals:
        assert lost[(run.job, run.run)] == out.jobs[run.job].gpus * out.jobs[run.job].save_s


def test_scope_creep_raises_high_share_week_by_week() -> None:
    sim = SimConfig(days=35.0, pools=(PoolSpec("a100", nodes=32),))
    jobs = pl.DataFrame(
        {
            "week": [int(j.submit_s // (7 * 86400)) for j in generate_jobs(sim)],
            "team": [j.team for j in generate_jobs(sim)],
            "high": [j.tier == "high" for j in generate_jobs(sim)],
        }
    )
    creeping = {t.name for t in sim.workload.teams if t.high_share_growth > 0}
    weekly = jobs.group_by("week", pl.col("team").is_in(list(creeping)).alias("creeping")).agg(
        pl.col("high").mean().alias("share")
    ).sort("week")
    grows = weekly.filter(pl.col("creeping"))["share"]
    steady = weekly.filter(~pl.col("creeping"))["share"]
    assert all(b > a for a, b in itertools.pairwise(grows))
    assert grows[-1] - grows[0] > 0.2
    assert abs(steady[-1] - steady[0]) < 0.05


def test_arrivals_follow_a_daily_rhythm() -> None:
    sim = SimConfig(days=14.0, pools=(PoolSpec("a100", nodes=32),))
    hours = pl.Series([int(j.submit_s // 3600) % 24 for j in generate_jobs(sim)])
    peak = int(hours.is_between(12, 16).sum())
    night = int(hours.is_between(0, 4).sum())
    assert peak > 2 * night


def test_sizes_are_heavy_tailed_and_whole_nodes_above_eight() -> None:
    jobs = generate_jobs(SimConfig(days=14.0, pools=(PoolSpec("a100", nodes=16),)))
    sizes = pl.Series([j.gpus for j in jobs])
    assert sizes.min() == 1 and sizes.max() == 64
    assert (sizes <= 8).mean() > 0.8
    assert ((sizes > 8) & (sizes % 8 != 0)).sum() == 0


def test_preemption_off_means_no_preemptions(config: SimConfig) -> None:
    off = dataclasses.replace(config, policy=PolicyConfig(enabled=False))
    sim = simulate(off)
    assert sim.frames["sim_truth_preemptions"].is_empty()
    assert sim.frames["job_runs"].filter(pl.col("state") == "preempted").is_empty()


def test_policy_rejects_preempting_an_equal_or_higher_tier() -> None:
    with pytest.raises(ConfigError, match="normal is not a lower tier"):
        PolicyConfig(may_preempt={"normal": ("normal",)})
    with pytest.raises(ConfigError, match="grace_s"):
        PolicyConfig(grace_s=-1)


def test_core_rejects_a_job_that_cannot_be_placed() -> None:
    job = JobSpec(job_id="x", tier="high", preemptible=False, pool="a100", gpus=12, submit_s=0, work_s=60)
    with pytest.raises(ValueError, match="x: gpus=12 spans nodes"):
        simulate_jobs([job], (PoolSpec("a100", nodes=2),), PolicyConfig(), 3600)


def test_hand_built_preemption_in_the_core() -> None:
    """A replay-sized case worked out by hand: one node, a low job evicted by a high one."""
    low = JobSpec(job_id="low", tier="low", preemptible=True, pool="p", gpus=8, submit_s=0, work_s=7200,
                  checkpoint_interval_s=1000, warmup_s=300)
    high = JobSpec(job_id="high", tier="high", preemptible=False, pool="p", gpus=4, submit_s=2500, work_s=600)
    policy = PolicyConfig(min_run_s=600, grace_s=30, requeue_hold_s=120)
    out = simulate_jobs([low, high], (PoolSpec("p", nodes=1),), policy, 86400)
    first, second = (out.runs[r] for r in out.job_runs[0])
    assert (first.state, first.start_s, first.end_s, first.preemptor) == ("preempted", 0, 2530, 1)
    assert first.checkpoints == [(1000, 1000), (2000, 2000)]
    (truth,) = out.preemptions()
    assert truth.lost_gpu_s == 8 * (2530 - 2000)
    # Held 120 s, then it waits for the high job (2530 + 600 = 3130) to free its 4 GPUs.
    assert (second.eligible_s, second.start_s) == (2650, 3130)
    assert truth.restart_s == 3130 and truth.requeue_delay_s == 600
    # Restart: 300 s warm-up, then the 5,200 s of work left after the 2,000 saved.
    assert second.end_s == 3130 + 300 + 5200 and second.state == "completed"
    assert second.checkpoints[0] == (3130 + 300 + 1000, 3000)


def test_sample_chunks_are_days_in_contract_shape(simulation: Simulation, wh: Warehouse, config: SimConfig) -> None:
    contract = set(wh.input_columns("gpu_samples"))
    chunks = list(simulation.gpu_samples())
    assert len(chunks) == 7
    for day, chunk in enumerate(chunks):
        assert set(chunk.columns) == contract | {RECORD_COLUMN}
        assert chunk["time"].min() == config.start + timedelta(days=day)
        assert chunk["time"].max() == config.start + timedelta(days=day + 1, minutes=-1)
        assert chunk.height == 1440 * config.gpus


def test_exporter_gaps_drop_whole_host_hours(config: SimConfig) -> None:
    gappy = dataclasses.replace(config, days=1.0, sample_gap_share=0.2)
    (chunk,) = simulate(gappy).gpu_samples()
    assert 0.6 * 1440 * config.gpus < chunk.height < 0.95 * 1440 * config.gpus
    per_hour = chunk.group_by("host", pl.col("time").dt.hour()).len()
    assert (per_hour["len"] == 60 * 8).all()
