"""A small hand-made cluster with known preemptions, hoarding and scope creep.

Loaded through the real load API and analysed by the real `analyze`, so the
dashboard and the report show figures the tests can check by hand:

- three weeks, 2026-W46 .. 2026-W48 (T0 is Monday 2026-11-09), pools a100
  (16 GPUs) and h100 (8 GPUs), teams vision, nlp, infer and rl;
- background work every day; team infer runs more and more of its work at
  tier high (a third, two thirds, all of it): scope creep;
- each week vision's `train-wN` (low, 8 GPUs) is preempted on a100 by infer's
  `serve-wN` (critical) half an hour after its last checkpoint: 4 GPU-hours lost,
  requeued one hour later;
- in W48 also nlp's `finetune-48` (normal, 4 GPUs, no checkpoints) is preempted
  on h100 after 5 h by `batch-48`, named only in preemption_links: 20 GPU-hours
  lost, restarted after 3 h; and `notebook-48` (nlp, high, 8 GPUs) holds its
  GPUs idle for 4 h (32 GPU-hours) on the day `train-w2` and `train-48b` are
  preempted on a100 although 8 idle GPUs sat there: two avoidable preemptions.
"""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import polars as pl

from preemptlens.analytics.params import AnalyticsSettings
from preemptlens.analytics.refresh import analyze
from preemptlens.warehouse import Warehouse

T0 = datetime(2026, 11, 9, tzinfo=UTC)
CLUSTER = "c1"
WEEK = "2026-W48"
HOUR = 3600.0
DAY = 86400.0

# Ground truth the tests check the pages and the report against.
PREEMPTIONS_TOTAL = 5
PREEMPTIONS_W48 = 3
LOST_GPU_HOURS_TOTAL = 4 + 4 + 4 + 20 + 8
# victim GPUs x requeue delay: train-wN 8 x 1 h each, finetune-48 4 x 3 h, train-48b 8 x 1 h
WAITING_GPU_HOURS_TOTAL = 8 + 8 + 8 + 12 + 8
WORST_W48 = "finetune-48"
WORST_W48_PREEMPTOR = "batch-48"
WORST_W48_LOST_GPU_HOURS = 20.0
WORST_W48_REQUEUE_S = 3 * HOUR
HOARDER_JOB = "notebook-48"
HOARDER_TEAM = "nlp"
HOARDED_GPU_HOURS = 32.0
AVOIDABLE_VICTIM = "train-48b"
# Its live cost half an hour before its preemption (hand-made: the Preemptions page shows it).
AVOIDABLE_LIVE_COST_GPU_HOURS = 10.0
AVOIDABLE_W48 = 2
SCOPE_TEAM = "infer"


def at(seconds: float) -> datetime:
    return T0 + timedelta(seconds=seconds)


class _Rows:
    def __init__(self) -> None:
        self.tables: dict[str, list[dict[str, Any]]] = {}

    def add(self, table: str, **row: Any) -> None:
        self.tables.setdefault(table, []).append({"cluster": CLUSTER, **row})

    def job(self, job_id: str, team: str, tier: str, gpus: int, pool: str, submit: float, **extra: Any) -> None:
        self.add(
            "jobs",
            job_id=job_id,
            name=job_id,
            team=team,
            user_name=f"{team}-user",
            priority_class=tier,
            tier=tier,
            preemptible=tier in ("low", "normal"),
            pool=pool,
            gpus=gpus,
            submit_time=at(submit),
            **extra,
        )

    def run(
        self, job_id: str, run: int, gpus: int, pool: str, start: float, end: float, state: str, **extra: Any
    ) -> None:
        self.add(
            "job_runs",
            job_id=job_id,
            run=run,
            pool=pool,
            hosts=f"{pool}-01",
            gpus=gpus,
            submit_time=at(extra.pop("submit", start)),
            start_time=at(start),
            end_time=at(end),
            state=state,
            **extra,
        )

    def checkpoint(self, job_id: str, run: int, t: float, step: float) -> None:
        self.add("checkpoints", job_id=job_id, run=run, time=at(t), kind="checkpoint", step=step)

    def idle_then_busy(self, job_id: str, pool: str, gpus: int, start: float, idle_until: float, end: float) -> None:
        t = start
        while t < end:
            for g in range(gpus):
                self.add(
                    "gpu_samples",
                    host=f"{pool}-01",
                    gpu_uuid=f"GPU-{pool}-01-{g}",
                    gpu_index=g,
                    time=at(t),
                    busy=0.0 if t < idle_until else 0.9,
                    mem_used_mib=30_000.0,
                    job_id=job_id,
                )
            t += 300


def _background(rows: _Rows) -> None:
    plan = (("vision", "normal", "a100"), ("nlp", "normal", "a100"), ("infer", None, "h100"), ("rl", "normal", "h100"))
    for day in range(21):
        week = day // 7
        for team, tier, pool in plan:
            for k in range(3):
                job_id = f"{team}-d{day:02d}-{k}"
                # infer's share of high-tier work grows each week: scope creep
                job_tier = tier or ("high" if k < week + 1 else "normal")
                submit = day * DAY + 8 * k * HOUR + 600
                rows.job(job_id, team, job_tier, 2, pool, submit)
                rows.run(job_id, 1, 2, pool, submit + 300, submit + 4 * HOUR, "completed", submit=submit)


def _weekly_preemption(rows: _Rows, week: int) -> None:
    base = (7 * week + 2) * DAY
    victim, preemptor = f"train-w{week}", f"serve-w{week}"
    rows.job(victim, "vision", "low", 8, "a100", base + 5 * HOUR, checkpoint_interval_s=3600.0)
    rows.run(
        victim,
        1,
        8,
        "a100",
        base + 6 * HOUR,
        base + 10 * HOUR,
        "preempted",
        preemptor_job_id=preemptor,
        reason="Preempted by a critical job",
    )
    for i, t in enumerate((7.0, 8.0, 9.5)):
        rows.checkpoint(victim, 1, base + t * HOUR, 100.0 * (i + 1))
    rows.run(victim, 2, 8, "a100", base + 11 * HOUR, base + 15 * HOUR, "completed", submit=base + 10 * HOUR)
    rows.job(preemptor, "infer", "critical", 8, "a100", base + 9.9 * HOUR)
    rows.run(preemptor, 1, 8, "a100", base + 10 * HOUR, base + 12 * HOUR, "completed", submit=base + 9.9 * HOUR)


def _week48_extras(rows: _Rows) -> None:
    base = 16 * DAY  # Wednesday of W48
    rows.job(WORST_W48, "nlp", "normal", 4, "h100", base + 8.9 * HOUR)
    rows.run(WORST_W48, 1, 4, "h100", base + 9 * HOUR, base + 14 * HOUR, "preempted", submit=base + 8.9 * HOUR)
    rows.add(
        "preemption_links",
        victim_job_id=WORST_W48,
        time=at(base + 14 * HOUR),
        preemptor_job_id=WORST_W48_PREEMPTOR,
        reason="PreemptedByPriority",
    )
    rows.run(WORST_W48, 2, 4, "h100", base + 17 * HOUR, base + 20 * HOUR, "completed", submit=base + 14 * HOUR)
    rows.job(WORST_W48_PREEMPTOR, "infer", "high", 4, "h100", base + 13.9 * HOUR)
    rows.run(WORST_W48_PREEMPTOR, 1, 4, "h100", base + 14 * HOUR, base + 16 * HOUR, "completed")

    rows.job(HOARDER_JOB, HOARDER_TEAM, "high", 8, "a100", base + 7.9 * HOUR)
    rows.run(HOARDER_JOB, 1, 8, "a100", base + 8 * HOUR, base + 16 * HOUR, "completed")
    rows.idle_then_busy(HOARDER_JOB, "a100", 8, base + 8 * HOUR, base + 12 * HOUR, base + 16 * HOUR)

    rows.job(AVOIDABLE_VICTIM, "vision", "low", 8, "a100", base + 8.9 * HOUR)
    rows.run(
        AVOIDABLE_VICTIM,
        1,
        8,
        "a100",
        base + 9 * HOUR,
        base + 11 * HOUR,
        "preempted",
        preemptor_job_id="serve-48b",
        reason="Preempted by a critical job",
    )
    rows.checkpoint(AVOIDABLE_VICTIM, 1, base + 10 * HOUR, 50.0)
    rows.run(AVOIDABLE_VICTIM, 2, 8, "a100", base + 12 * HOUR, base + 14 * HOUR, "completed", submit=base + 11 * HOUR)
    rows.job("serve-48b", "infer", "critical", 8, "a100", base + 10.9 * HOUR)
    rows.run("serve-48b", 1, 8, "a100", base + 11 * HOUR, base + 13 * HOUR, "completed")


def build(path: Path) -> Path:
    """Write the cluster into a new warehouse at `path` and analyse it."""
    rows = _Rows()
    for pool, gpus in (("a100", 16), ("h100", 8)):
        rows.add("pools", pool=pool, valid_from=at(-DAY), gpus=gpus, gpus_per_node=8)
    _background(rows)
    for week in range(3):
        _weekly_preemption(rows, week)
    _week48_extras(rows)
    with Warehouse(path) as wh:
        for table in ("pools", "jobs", "job_runs", "preemption_links", "checkpoints", "gpu_samples"):
            wh.load(table, pl.DataFrame(rows.tables[table], infer_schema_length=None), "fixture")
        wh.con.execute(
            "INSERT INTO live_costs (cluster, job_id, run, pool, tier, team, preemptible, gpus, computed_at, "
            "at_risk_gpu_s, warmup_gpu_s, requeue_gpu_s, cost_gpu_s, basis) "
            "VALUES ($c, $j, 1, 'a100', 'low', 'vision', true, 8, $t, $r, 0.0, $q, $cost, 'checkpoint')",
            {"c": CLUSTER, "j": AVOIDABLE_VICTIM, "t": at(16 * DAY + 10.5 * HOUR), "r": 8 * 0.5 * HOUR,
             "q": AVOIDABLE_LIVE_COST_GPU_HOURS * HOUR - 8 * 0.5 * HOUR, "cost": AVOIDABLE_LIVE_COST_GPU_HOURS * HOUR},
        )
        analyze(wh, AnalyticsSettings())
    return path
