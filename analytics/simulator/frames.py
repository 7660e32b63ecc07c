"""Turn a simulation `Outcome` into frames of the raw contract.

Job-level tables come out whole; GPU samples come out one day at a time so that
memory stays bounded at thousands of GPUs. A sample at time t is the state of
the GPU at that instant (runs hold their GPUs over [start, end)):
- unallocated (or reserved for a preemptor not yet started): busy 0, no memory,
  idle power, job_id NULL;
- warm-up after a restart, and saving a final checkpoint after the signal:
  busy 0.1-0.3;
- doing useful work: the job's level with noise, within 0.40-0.98;
- idle stretch of a hoarding job: busy below 0.05 while memory stays held.
Noise is drawn per day from (seed, day), so a day's samples do not depend on
which other days are produced. Optional exporter gaps drop whole host-hours.
"""

from __future__ import annotations

import uuid
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from datetime import datetime, timedelta

import numpy as np
import polars as pl

from preemptlens.analytics.simulator.engine import Outcome, Run
from preemptlens.analytics.simulator.model import SimConfig
from preemptlens.contract import TIERS
from preemptlens.warehouse import RECORD_COLUMN

PROGRESS_EVERY_S = 600.0
_DAY_S = 86400
_UNALLOCATED, _WARMUP, _ACTIVE, _IDLE, _SAVING = 0, 1, 2, 3, 4
IDLE_POWER_W = 60.0
MAX_POWER_W = 400.0


@dataclass(frozen=True)
class _Clock:
    start: datetime

    def us(self, seconds: float) -> int:
        return round(self.start.timestamp() * 1_000_000) + round(seconds * 1_000_000)

    def col(self, seconds: Sequence[float | None] | np.ndarray, name: str) -> pl.Series:
        values = [None if s is None else self.us(float(s)) for s in seconds]
        return pl.Series(name, values, dtype=pl.Int64).cast(pl.Datetime("us")).dt.replace_time_zone("UTC")


def _gpu_uuid(cluster: str, host: str, index: int) -> str:
    return "GPU-" + str(uuid.uuid5(uuid.NAMESPACE_URL, f"preemptlens-sim/{cluster}/{host}/{index}"))


def pools_frame(sim: SimConfig) -> pl.DataFrame:
    return pl.DataFrame(
        {
            "cluster": [sim.cluster] * len(sim.pools),
            "pool": [p.name for p in sim.pools],
            "valid_from": [sim.start] * len(sim.pools),
            "gpus": [p.gpus for p in sim.pools],
            "gpus_per_node": [p.gpus_per_node for p in sim.pools],
        }
    )


def policy_frame(sim: SimConfig) -> pl.DataFrame:
    """The policy the simulated scheduler ran, as scheduler_policy rows (read back by analytics.whatif.policy_in_force):
    the replay of a simulated cluster then runs its rules instead of inferring them."""
    policy = sim.policy
    rows = [
        ("cluster", "", name, ("true" if value else "false") if isinstance(value, bool)
         else (f"{value:g}" if isinstance(value, float) else str(value)))
        for name in ("scheduler", "enabled", "min_run_s", "grace_s", "requeue_hold_s", "latency_s",
                     "submit_latency_s", "pass_interval_s", "queue_order", "backfill",
                     "victim_order", "youngest_first", "reorder_count", "strict_order", "kill_at_grace_end")
        for value in (getattr(policy, name),)
    ]
    rows += [("tier", tier, "preempts", ",".join(policy.may_preempt.get(tier, ()))) for tier in TIERS]
    return pl.DataFrame(
        {"cluster": [sim.cluster] * len(rows), "valid_from": [sim.start] * len(rows),
         "scheduler": ["simulator"] * len(rows), "scope": [r[0] for r in rows], "subject": [r[1] for r in rows],
         "setting": [r[2] for r in rows], "value": [r[3] for r in rows]},
        schema={"cluster": pl.String, "valid_from": pl.Datetime("us", "UTC"), "scheduler": pl.String,
                "scope": pl.String, "subject": pl.String, "setting": pl.String, "value": pl.String},
    )


def jobs_frame(sim: SimConfig, out: Outcome) -> pl.DataFrame:
    clock = _Clock(sim.start)
    jobs = [j for j in out.jobs if j.submit_s < out.horizon_s]
    return pl.DataFrame(
        {
            "cluster": [sim.cluster] * len(jobs),
            "job_id": [j.job_id for j in jobs],
            "name": [j.name for j in jobs],
            "team": [j.team for j in jobs],
            "user_name": [j.user for j in jobs],
            "priority_class": [j.priority_class for j in jobs],
            "priority_value": pl.Series([j.priority_value for j in jobs], dtype=pl.Float64),
            "tier": [j.tier for j in jobs],
            "preemptible": [j.preemptible for j in jobs],
            "pool": [j.pool for j in jobs],
            "gpus": pl.Series([j.gpus for j in jobs], dtype=pl.Int32),
            "submit_time": clock.col([j.submit_s for j in jobs], "submit_time"),
            "checkpoint_interval_s": pl.Series([j.checkpoint_interval_s for j in jobs], dtype=pl.Float64),
            "work_s": pl.Series([j.work_s for j in jobs], dtype=pl.Float64),
        }
    )


def _reason(sim: SimConfig, out: Outcome, run: Run) -> str | None:
    if run.state == "preempted" and not sim.records_preemptor:
        return None
    if run.state == "preempted" and run.preemptor is not None:
        preemptor = out.jobs[run.preemptor]
        return f"preempted by job {preemptor.job_id} ({preemptor.tier})"
    if run.state == "failed":
        return "NonZeroExitCode"
    if run.state == "pending":
        return "Resources"
    return None


def job_runs_frame(sim: SimConfig, out: Outcome) -> pl.DataFrame:
    clock = _Clock(sim.start)
    lay = out.layout
    rows = out.runs
    hosts = []
    for run in rows:
        nodes = sorted({lay.gpu_node[g] for g in run.gpu_ids})
        hosts.append(",".join(lay.node_names[n] for n in nodes) if nodes else None)
    return pl.DataFrame(
        {
            "cluster": [sim.cluster] * len(rows),
            "job_id": [out.jobs[r.job].job_id for r in rows],
            "run": pl.Series([r.run for r in rows], dtype=pl.Int32),
            "pool": [out.jobs[r.job].pool for r in rows],
            "hosts": pl.Series(hosts, dtype=pl.String),
            "gpus": pl.Series([out.jobs[r.job].gpus for r in rows], dtype=pl.Int32),
            "submit_time": clock.col([r.submit_s for r in rows], "submit_time"),
            "eligible_time": clock.col([r.eligible_s for r in rows], "eligible_time"),
            "start_time": clock.col([r.start_s for r in rows], "start_time"),
            "end_time": clock.col([r.end_s for r in rows], "end_time"),
            "state": [r.state for r in rows],
            "preemptor_job_id": pl.Series(
                [
                    out.jobs[r.preemptor].job_id if r.preemptor is not None and sim.records_preemptor else None
                    for r in rows
                ],
                dtype=pl.String,
            ),
            "reason": pl.Series([_reason(sim, out, r) for r in rows], dtype=pl.String),
        }
    )


def checkpoints_frame(sim: SimConfig, out: Outcome) -> pl.DataFrame:
    """Checkpoint rows, plus a progress row every 10 minutes of each run and at completion.

    A periodic checkpoint's `save_s` is its job's save time, as a collector times a save that ends at the
    checkpoint; the engine's work clock runs on through it, so these seconds are the simulated cluster's
    checkpoint-save badput by definition. A final save at the signal is stamped when the state is captured
    and the time it takes is the run's lost time after it (engine.py): its `save_s` is 0."""
    job_ids: list[str] = []
    runs: list[int] = []
    times: list[float] = []
    kinds: list[str] = []
    steps: list[float] = []
    saves: list[float | None] = []
    for run in out.runs:
        if run.start_s is None:
            continue
        job_id = out.jobs[run.job].job_id
        stop = out.horizon_s if run.end_s is None else run.end_s
        job = out.jobs[run.job]
        for when, step in run.checkpoints:
            if when < stop:
                job_ids.append(job_id)
                runs.append(run.run)
                times.append(when)
                kinds.append("checkpoint")
                steps.append(step)
                saves.append(0.0 if run.final_checkpoint and when == run.signal_s else job.save_s)
        ticks = np.arange(run.start_s, stop, PROGRESS_EVERY_S)
        for when in ticks.tolist():
            job_ids.append(job_id)
            runs.append(run.run)
            times.append(when)
            kinds.append("progress")
            steps.append(run.step_at(when))
            saves.append(None)
        if run.state == "completed" and (ticks.size == 0 or ticks[-1] != stop):
            job_ids.append(job_id)
            runs.append(run.run)
            times.append(stop)
            kinds.append("progress")
            steps.append(run.step_at(stop))
            saves.append(None)
    return pl.DataFrame(
        {
            "cluster": [sim.cluster] * len(times),
            "job_id": job_ids,
            "run": pl.Series(runs, dtype=pl.Int32),
            "time": _Clock(sim.start).col(times, "time"),
            "kind": kinds,
            "step": pl.Series(steps, dtype=pl.Float64),
            "save_s": pl.Series(saves, dtype=pl.Float64),
        }
    )


def truth_preemptions_frame(sim: SimConfig, out: Outcome) -> pl.DataFrame:
    clock = _Clock(sim.start)
    rows = out.preemptions()
    return pl.DataFrame(
        {
            "cluster": [sim.cluster] * len(rows),
            "victim_job_id": [out.jobs[p.victim].job_id for p in rows],
            "victim_run": pl.Series([p.victim_run for p in rows], dtype=pl.Int32),
            "time": clock.col([p.time_s for p in rows], "time"),
            "preemptor_job_id": [out.jobs[p.preemptor].job_id for p in rows],
            "pool": [p.pool for p in rows],
            "gpus": pl.Series([p.gpus for p in rows], dtype=pl.Int32),
            "run_start": clock.col([p.run_start_s for p in rows], "run_start"),
            "last_checkpoint_time": clock.col([p.last_checkpoint_s for p in rows], "last_checkpoint_time"),
            "lost_gpu_s": pl.Series([p.lost_gpu_s for p in rows], dtype=pl.Float64),
            "restart_time": clock.col([p.restart_s for p in rows], "restart_time"),
            "requeue_delay_s": pl.Series([p.requeue_delay_s for p in rows], dtype=pl.Float64),
            "warmup_s": pl.Series([p.warmup_s for p in rows], dtype=pl.Float64),
        }
    )


def truth_hoarding_frame(sim: SimConfig, out: Outcome) -> pl.DataFrame:
    clock = _Clock(sim.start)
    rows = out.hoarding()
    return pl.DataFrame(
        {
            "cluster": [sim.cluster] * len(rows),
            "job_id": [out.jobs[h.job].job_id for h in rows],
            "run": pl.Series([h.run for h in rows], dtype=pl.Int32),
            "idle_start": clock.col([h.idle_start_s for h in rows], "idle_start"),
            "idle_end": clock.col([h.idle_end_s for h in rows], "idle_end"),
            "gpus": pl.Series([h.gpus for h in rows], dtype=pl.Int32),
            "idle_gpu_s": pl.Series([h.idle_gpu_s for h in rows], dtype=pl.Float64),
        }
    )


@dataclass(frozen=True)
class _Segments:
    """Every stretch of one GPU in one phase, sorted by (gpu, start); they never overlap."""

    gpu: np.ndarray
    start: np.ndarray
    end: np.ndarray
    job: np.ndarray
    phase: np.ndarray

    @classmethod
    def of(cls, out: Outcome) -> _Segments:
        gpu: list[int] = []
        start: list[float] = []
        end: list[float] = []
        job: list[int] = []
        phase: list[int] = []

        def add(run: Run, a: float, b: float, kind: int) -> None:
            if b <= a:
                return
            for g in run.gpu_ids:
                gpu.append(g)
                start.append(a)
                end.append(b)
                job.append(run.job)
                phase.append(kind)

        for run in out.runs:
            if run.start_s is None:
                continue
            stop = out.horizon_s if run.end_s is None else run.end_s
            add(run, run.start_s, min(run.warmup_end_s, stop), _WARMUP)
            pieces = [(a, b, _ACTIVE) for a, b, _ in run.work] + [(a, b, _IDLE) for a, b in run.idle]
            for a, b, kind in sorted(pieces):
                add(run, a, min(b, stop), kind)
            if run.final_checkpoint and run.signal_s is not None:
                add(run, run.signal_s, stop, _SAVING)
        order = np.lexsort((np.asarray(start), np.asarray(gpu)))
        return cls(
            gpu=np.asarray(gpu, dtype=np.int64)[order],
            start=np.asarray(start, dtype=np.float64)[order],
            end=np.asarray(end, dtype=np.float64)[order],
            job=np.asarray(job, dtype=np.int64)[order],
            phase=np.asarray(phase, dtype=np.int8)[order],
        )


def gpu_sample_chunks(sim: SimConfig, out: Outcome) -> Iterator[pl.DataFrame]:
    """gpu_samples frames in contract shape, one per simulated day, ordered by time then GPU.

    Each frame also carries the load API's optional `_record` locator column
    (`simulated <date> <host> <uuid>`); drop it when not loading.
    """
    lay = out.layout
    segs = _Segments.of(out)
    n_gpus = lay.gpus
    span = float(out.horizon_s) + 1.0
    seg_keys = segs.gpu * span + segs.start
    hosts = pl.Series("host", [lay.node_names[lay.gpu_node[g]] for g in range(n_gpus)], dtype=pl.Categorical)
    uuids = pl.Series(
        "gpu_uuid",
        [_gpu_uuid(sim.cluster, lay.node_names[lay.gpu_node[g]], lay.gpu_index(g)) for g in range(n_gpus)],
        dtype=pl.Categorical,
    )
    gpu_index = np.array([lay.gpu_index(g) for g in range(n_gpus)], dtype=np.int32)
    # The last entry is NULL, gathered for unallocated GPUs.
    job_ids = pl.Series("job_id", [*(j.job_id for j in out.jobs), None], dtype=pl.String)
    busy_level = np.array([j.busy_level for j in out.jobs])
    mem_level = np.array([j.mem_mib for j in out.jobs])
    step = sim.sample_step_s
    for day in range(int(np.ceil(out.horizon_s / _DAY_S))):
        times = np.arange(day * _DAY_S, min((day + 1) * _DAY_S, out.horizon_s), step, dtype=np.float64)
        if times.size == 0:
            break
        rng = np.random.default_rng([sim.workload.seed, 2, day])
        t = np.repeat(times, n_gpus)
        g = np.tile(np.arange(n_gpus, dtype=np.int64), times.size)
        idx = np.searchsorted(seg_keys, g * span + t, side="right") - 1
        safe = np.maximum(idx, 0)
        hit = (idx >= 0) & (segs.gpu[safe] == g) & (t < segs.end[safe])
        phase = np.where(hit, segs.phase[safe], _UNALLOCATED)
        job = np.where(hit, segs.job[safe], -1)
        level = busy_level[np.maximum(job, 0)]
        mem = mem_level[np.maximum(job, 0)]
        n = t.size
        busy = np.select(
            [phase == _ACTIVE, phase == _IDLE, (phase == _WARMUP) | (phase == _SAVING)],
            [
                np.clip(level + rng.normal(0.0, 0.04, n), 0.40, 0.98),
                rng.uniform(0.0, 0.04, n),
                rng.uniform(0.10, 0.30, n),
            ],
            0.0,
        )
        mem_used = np.select(
            [(phase == _ACTIVE) | (phase == _IDLE) | (phase == _SAVING), phase == _WARMUP],
            [mem * rng.uniform(0.97, 1.0, n), mem * rng.uniform(0.2, 0.8, n)],
            0.0,
        )
        power = np.maximum(IDLE_POWER_W + (MAX_POWER_W - IDLE_POWER_W) * busy + rng.normal(0.0, 3.0, n), 0.0)
        keep = np.ones(n, dtype=bool)
        if sim.sample_gap_share > 0:
            node = np.asarray(lay.gpu_node, dtype=np.int64)[g]
            hours = int(np.ceil(times.size * step / 3600))
            down = rng.uniform(size=(len(lay.node_names), hours)) < sim.sample_gap_share
            keep = ~down[node, ((t - day * _DAY_S) // 3600).astype(np.int64)]
        gi = pl.Series(g[keep])
        # Quarantine locator per GPU and day: far cheaper for the load API than one built per row.
        date = (sim.start.date() + timedelta(days=day)).isoformat()
        records = pl.Series([f"simulated {date} {h} {u}" for h, u in zip(hosts, uuids, strict=True)],
                            dtype=pl.Categorical)
        start_us = round(sim.start.timestamp() * 1_000_000)
        frame = pl.DataFrame(
            {
                "cluster": pl.repeat(sim.cluster, int(keep.sum()), eager=True, dtype=pl.String),
                "host": hosts.gather(gi).cast(pl.String),
                "gpu_uuid": uuids.gather(gi).cast(pl.String),
                "gpu_instance": pl.repeat("", int(keep.sum()), eager=True, dtype=pl.String),
                "gpu_index": gpu_index[g[keep]],
                "time": pl.Series(start_us + (t[keep] * 1_000_000).astype(np.int64))
                .cast(pl.Datetime("us"))
                .dt.replace_time_zone("UTC"),
                "busy": busy[keep],
                "mem_used_mib": np.round(mem_used[keep], 1),
                "power_w": np.round(power[keep], 1),
                RECORD_COLUMN: records.gather(gi).cast(pl.String),
                "job_id": job_ids.gather(pl.Series(np.where(job[keep] >= 0, job[keep], len(out.jobs)))),
            }
        )
        yield frame

