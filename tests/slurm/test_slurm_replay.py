"""The replay against the real Slurm, short form of benchmarks/bench_replay_real.py (issues 26 and 31).

A seeded handful of training jobs that checkpoint and restart from their checkpoints, and serving jobs that
preempt them, submitted without time limits (the partitions' MaxTime=UNLIMITED: Slurm's backfill places no
reservation), played three times on the suite's Slurm: under PreemptExemptTime 0, then 20 s, then with
PreemptType=preempt/none. Collected as a user would (`collect slurm`, `import` of the checkpoint and progress
rows, `analyze`), the first play is replayed: under the policy it read from Slurm it must reproduce that play on
each figure (preemptions, victims, lost GPU-hours, each tier's p50 and p90 first-start wait), under the changed
policy move the figures the way the second play did (the benchmark measures by how much), and without
preemption (the counterfactual's `none`) match the third play per tier (waits, queue GPU-hours, completions).
It runs after test_slurm_real (by name), which reads every job of the last hour. Tolerances are wider than the
benchmark's: with a handful of preemptions one more or less is 10-20%, and two
plays of one workload differ by that much already.
"""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import replace
from datetime import timedelta
from pathlib import Path

import pytest
from replay_scenario import Named, Played, collect, plan, play, read_policy, real_figures, replay_figures
from slurm_harness import CLUSTER, SlurmCluster

from preemptlens.analytics.simulator.model import PolicyConfig
from preemptlens.analytics.whatif.replay import (
    Variant,
    Window,
    Workload,
    _replay,
    interval,
    load_workload,
    observed_figures,
    replay_outcome,
)
from preemptlens.analytics.whatif.settings import TuningSettings
from preemptlens.warehouse import Warehouse

pytestmark = pytest.mark.slow

EXEMPT_S = 20
JOBS = plan(7, low=5, high=3, span_s=20.0, steps=(20, 35))


@pytest.fixture(scope="module")
def plays(slurm_cluster: SlurmCluster, tmp_path_factory: pytest.TempPathFactory
          ) -> Iterator[tuple[Warehouse, Played, Played]]:
    wh = Warehouse(tmp_path_factory.mktemp("replay-real") / "w.duckdb")
    try:
        read_policy(slurm_cluster, wh)
        first = play(slurm_cluster, JOBS, "suite-a", timeout_s=600)
        collect(slurm_cluster, wh, first.started, [first.dir])
        slurm_cluster.set_policy(exempt_s=EXEMPT_S)
        read_policy(slurm_cluster, wh)
        second = play(slurm_cluster, JOBS, "suite-b", timeout_s=600)
        collect(slurm_cluster, wh, second.started, [second.dir])
        yield wh, first, second
    finally:
        slurm_cluster.set_policy()
        wh.close()


@pytest.fixture(scope="module")
def off_play(plays: tuple[Warehouse, Played, Played], slurm_cluster: SlurmCluster) -> Iterator[Played]:
    """The same plan with PreemptType=preempt/none (slurmctld and slurmd restarted in that mode, and back)."""
    wh, _, _ = plays
    try:
        slurm_cluster.use("none")
        read_policy(slurm_cluster, wh)
        third = play(slurm_cluster, JOBS, "suite-c", timeout_s=600)
        collect(slurm_cluster, wh, third.started, [third.dir])
        yield third
    finally:
        slurm_cluster.use("partition_prio")


def _window(p: Played) -> Window:
    return Window(CLUSTER, p.started, p.ended)


def _pairs(wh: Warehouse, window: Window) -> set[tuple[str, str]]:
    return set(wh.query(
        "SELECT l.victim_job_id, l.preemptor_job_id FROM preemption_ledger AS l JOIN jobs AS j "
        "ON j.cluster = l.cluster AND j.job_id = l.victim_job_id "
        "WHERE l.cluster = $c AND j.submit_time >= $t0 AND j.submit_time < $t1",
        {"c": window.cluster, "t0": window.start, "t1": window.end}).rows())


def _replayed(workload: Workload, policy: PolicyConfig, draws: int = 8) -> tuple[Named, Named, Named]:
    """Each figure's median, least and greatest over replays with the inputs jittered within their measurement
    error (whole-second times, the scheduler's latencies), as bench_replay_real reads them."""
    found = [replay_figures(workload, replay_outcome(workload, Variant(f"jitter {k}", policy, jitter=k)))
             for k in range(1, draws + 1)]
    medians: Named = {}
    lows: Named = {}
    highs: Named = {}
    for name in found[0]:
        values = sorted(v for f in found if (v := f[name]) is not None)
        medians[name] = values[len(values) // 2] if values else None
        lows[name] = values[0] if values else None
        highs[name] = values[-1] if values else None
    return medians, lows, highs


def _misses(real: Named, replayed: tuple[Named, Named, Named], names: tuple[str, ...], slack: float,
            floor_s: float = 3.0) -> list[str]:
    """Each figure checked on its own: the real one within the range of the jittered replays (in an 8-job
    play a p90 is one job, and a second more or less in a start moves it), or near their median: counts
    within max(2, slack), lost and queue GPU-hours within 1.6x, waits and completion times within
    max(floor_s, slack) (one play differs from another of the same workload by that much, see
    bench_replay_real). The old plan from the work left missed by factors (6 preemptions for 16)."""
    medians, lows, highs = replayed
    misses = []
    for name in names:
        r, p, low, high = real[name], medians[name], lows[name], highs[name]
        if r is None or p is None or low is None or high is None:
            if (r is None) != (p is None):
                misses.append(f"{name}: real {r}, replayed {p}")
            continue
        if low <= r <= high:
            continue
        if "GPU-h" in name:
            ok = p == r == 0 or (r > 0 and r / 1.6 <= p <= r * 1.6)
        elif "wait" in name or "completion" in name:
            ok = abs(p - r) <= max(floor_s, slack * abs(r))
        else:
            ok = abs(p - r) <= max(2.0, slack * abs(r))
        if not ok:
            misses.append(f"{name}: real {r:g}, replayed {p:g} ({low:g} to {high:g})")
    return misses


def test_the_replay_reads_the_policy_slurm_states(plays: tuple[Warehouse, Played, Played]) -> None:
    wh, first, second = plays
    actual = load_workload(wh, _window(first), TuningSettings(processes=1)).actual
    assert actual.policy.scheduler == "slurm" and actual.kind("scheduler") == "slurm"
    assert actual.policy.min_run_s == 0 and actual.kind("min_run_s") == "slurm"
    assert actual.policy.requeue_hold_s == 11  # cred_expire=10, + 1 s
    assert actual.policy.queue_order == "submit" and actual.policy.kill_at_grace_end
    assert actual.policy.may_preempt["high"] == ("low",)
    # No time limit: every run planned to go on for ever, so no reservation behind it (bf_window, 1 day). A job
    # the backfill started is recorded with a year (backfill.c of slurm-22-05-11-1 sets a job without a limit
    # to YEAR_MINUTES when it starts it), one the main scheduler started as UNLIMITED.
    limits = {j.time_limit_s for j in load_workload(wh, _window(first), TuningSettings(processes=1)).jobs}
    assert limits and all(limit is not None and limit >= 365 * 86400.0 for limit in limits), limits
    assert actual.policy.backfill_window_s == 86400.0
    later = load_workload(wh, _window(second), TuningSettings(processes=1)).actual
    # PreemptExemptTime is a minimum run time, and no grace time.
    assert later.policy.min_run_s == EXEMPT_S and later.policy.grace_of("low") == 0
    assert f"min_run_s {EXEMPT_S} s (slurm: PreemptExemptTime=00:00:{EXEMPT_S})" in later.describe()


def test_the_replay_reproduces_the_play_and_predicts_the_change(plays: tuple[Warehouse, Played, Played]) -> None:
    wh, first, second = plays
    workload = load_workload(wh, _window(first), TuningSettings(processes=1))
    real_a, real_b = observed_figures(wh, _window(first)), observed_figures(wh, _window(second))
    assert real_a.preemptions >= 3, real_a
    actual = Variant("A", workload.actual.policy)
    changed = Variant("B", replace(workload.actual.policy, min_run_s=float(EXEMPT_S)))
    # The replay's estimate: the median over replays with the inputs jittered within their measurement error
    # (whole-second times, the scheduler's latencies), as bench_replay_real reads it.
    spread_a, spread_b = interval(workload, actual, 8, processes=1), interval(workload, changed, 8, processes=1)
    assert spread_a is not None and spread_b is not None and spread_a.draws == 8
    replayed_a, replayed_b = spread_a.median, spread_b.median
    assert replayed_a is not None and replayed_b is not None
    # Every figure on its own, each tier's waits included: the jobs have no time limit, so Slurm's backfill
    # placed no reservation and the replay must place none either.
    real, rep = real_figures(wh, _window(first)), _replayed(workload, actual.policy)
    misses = _misses(real, rep, ("preemptions", "victims", "lost GPU-h", "high wait p50", "high wait p90",
                                 "low wait p50", "low wait p90"), 0.25)
    assert not misses, (misses, workload.notes)
    # The second play's figures are not compared one by one here: with 7 jobs, the handful of preemptions a
    # 20 s exempt time leaves moves by half between two plays of one workload. bench_replay_real measures the
    # prediction on 84 jobs; here it must only go the same way as the play (below).
    # Slurm's own victims: most of the play's victim/preemptor pairs are the replay's too (evicting the
    # youngest runs first, as the replay did before it modelled Slurm, found a quarter of them).
    out = _replay(workload, actual)
    replayed_pairs = {(out.jobs[p.victim].job_id, out.jobs[p.preemptor].job_id) for p in out.preemptions()}
    real_pairs = _pairs(wh, _window(first))
    assert len(real_pairs & replayed_pairs) >= 0.6 * len(real_pairs), (real_pairs, replayed_pairs)
    # The minimum run time holds preemptions off, in the play and in its prediction alike.
    assert real_b.preemptions <= real_a.preemptions and replayed_b.preemptions <= replayed_a.preemptions


def test_the_counterfactual_without_preemption_matches_the_play_with_preemption_off(
    plays: tuple[Warehouse, Played, Played], off_play: Played,
) -> None:
    wh, first, _ = plays
    workload = load_workload(wh, _window(first), TuningSettings(processes=1))
    none = _replayed(workload, replace(workload.actual.policy, enabled=False))
    real = real_figures(wh, _window(off_play))
    assert real["preemptions"] == 0 and none[0]["preemptions"] == 0
    names = tuple(f"{t} {f}" for t in ("high", "low") for f in ("wait p50", "wait p90", "queue GPU-h",
                                                                 "completed", "completion p50"))
    # Waits within 8 s: the counterfactual, replayed from the preemptive play, has started the middle high job
    # about 6 s earlier than the play with preemption off did (here a median of 11-12 s for 17-18 s, twice;
    # bench_replay_real: 49 s for 55 s), while that play replayed under its own policy is within 2 s: what
    # differs between the two histories is not yet explained.
    misses = _misses(real, none, names, 0.25, floor_s=8.0)
    assert not misses, misses
    # The play with preemption off is read as such, its tiers still from PriorityTier (high and low, not normal).
    off = load_workload(wh, _window(off_play), TuningSettings(processes=1))
    assert not off.actual.policy.enabled and {j.tier for j in off.jobs} == {"high", "low"}
    assert off.actual.policy.may_preempt["high"] == ("low",)


def test_the_checkpoint_cadence_and_start_up_are_measured(plays: tuple[Warehouse, Played, Played]) -> None:
    wh, first, _ = plays
    workload = load_workload(wh, _window(first), TuningSettings(processes=1))
    training = [j for j in workload.jobs if j.tier == "low"]
    # The jobs checkpoint every 10 one-second steps after a 3 s start-up: neither biases the other.
    intervals = sorted(j.checkpoint_interval_s for j in training if j.checkpoint_interval_s)
    assert intervals and 9.5 <= intervals[len(intervals) // 2] <= 11.5, intervals
    startups = sorted(j.startup_s for j in training)
    assert 2.0 <= startups[len(startups) // 2] <= 5.0, startups
    # The work each needs is its planned steps at its measured pace, whatever its preemptions: a first run
    # preempted before its first checkpoint lost its start-up with the rest of the run, which must not be taken
    # off the work a second time (it was: 3-4 s short, enough to move a run across PreemptExemptTime).
    steps = {job.name: job.steps for job in JOBS}
    off = {j.name: round(j.work_s - steps[j.name] * j.checkpoint_interval_s / 10, 2)
           for j in training if j.checkpoint_interval_s}
    assert off and all(abs(v) <= 2.5 for v in off.values()), off
    assert timedelta(seconds=workload.window.seconds) < timedelta(minutes=10)


def test_ledger_of_the_play_counts_checkpoints_up_to_the_kill(plays: tuple[Warehouse, Played, Played]) -> None:
    wh, first, _ = plays
    rows = wh.query("SELECT l.time, l.last_checkpoint_time, r.end_time FROM preemption_ledger AS l "
                    "JOIN job_runs AS r ON r.cluster = l.cluster AND r.job_id = l.victim_job_id "
                    "AND r.run = l.victim_run WHERE l.cluster = $c AND r.start_time >= $t0",
                    {"c": CLUSTER, "t0": first.started}).rows()
    assert rows
    for time, last, end in rows:
        # The preemption is at the log's millisecond, within the run's recorded (truncated) second.
        assert end <= time < end + timedelta(seconds=1)
        assert last is None or last <= time


def test_case_files_name_their_source() -> None:
    cases = Path(__file__).resolve().parent.parent / "cases" / "policy"
    listed = (cases / "SOURCES.md").read_text()
    assert all(f.name in listed for f in cases.iterdir() if f.name != "SOURCES.md")
