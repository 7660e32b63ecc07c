"""`preemptlens cost`: compute and store the live preemption cost of every running job once; print the top N.

The figure is docs/figures.md section 7; `serve` runs the same computation every live_cost.interval_s.
"""

from __future__ import annotations

import argparse
import json
from datetime import UTC, datetime

import polars as pl

from preemptlens.analytics.livecost import Instant, LiveCostSettings, compute, default_instant, records, top
from preemptlens.config import Config, WarehouseSettings, number_argument
from preemptlens.reading.words import UNKNOWN, number, pct
from preemptlens.times import TIME_HELP, parse_when
from preemptlens.warehouse import Warehouse


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--at", help=f"the instant to compute at ({TIME_HELP}); default now, or the data's end "
                        "when every scheduler source's data ended more than live_cost.max_data_age_s before now")
    parser.add_argument("--top", type=number_argument(int, 0, 100_000),
                        help="jobs to print, costliest first (default live_cost.top_jobs)")
    parser.add_argument("--cluster", help="print only this cluster's jobs")
    parser.add_argument("--pool", help="print only this pool's jobs")
    parser.add_argument("--json", action="store_true", help="print the jobs as JSON")


def _hours(value: float | None, at_least: bool | None = False) -> str:
    """GPU-hours; ">=" before a lower bound (an expected requeue wait longer than any seen: docs/figures.md)."""
    return UNKNOWN if value is None else (">=" if at_least else "") + number(value / 3600)


def render(frame: pl.DataFrame) -> str:
    header = ("cluster", "job", "pool", "tier", "team", "GPUs", "cost GPU-h", "at risk", "warm-up", "requeue",
              "basis", "done", "recent job/team", "unknown")
    lines = [header]
    for r in frame.iter_rows(named=True):
        share = r["near_completion_share"]
        lines.append((
            r["cluster"], r["job_id"], str(r["pool"]), str(r["tier"]), r["team"], str(r["gpus"]),
            _hours(r["cost_gpu_s"], r["requeue_at_least"]), _hours(r["at_risk_gpu_s"]), _hours(r["warmup_gpu_s"]),
            _hours(r["requeue_gpu_s"], r["requeue_at_least"]), r["basis"],
            pct(share),
            f"{r['job_preemptions_recent']}/{r['team_preemptions_recent']}", r["unknown"] or "",
        ))
    widths = [max(len(str(line[i])) for line in lines) for i in range(len(header))]
    return "\n".join("  ".join(str(v).ljust(w) for v, w in zip(line, widths, strict=True)).rstrip() for line in lines)


def run(args: argparse.Namespace, config: Config) -> int:
    settings = config.of(LiveCostSettings)
    now = datetime.now(UTC)
    limit = args.top if args.top is not None else settings.top_jobs
    with Warehouse(config.of(WarehouseSettings).path) as wh:
        instant = Instant(parse_when(args.at, "--at", now)) if args.at else default_instant(wh, now, settings)
        at = instant.at
        done = compute(wh, at, settings)
        frame = top(wh.con, max(limit, 0), cluster=args.cluster, pool=args.pool, at=at)
    if args.json:
        answer: dict[str, object] = {"computed_at": at.isoformat(), "jobs": records(frame)}
        if instant.note:
            answer["note"] = instant.note
        print(json.dumps(answer, indent=1))
        return 0
    if instant.note:
        print(instant.note)
    print(
        f"live cost at {at:%Y-%m-%d %H:%M:%S} UTC: {done.jobs} running job(s), {done.unknown} of unknown cost; "
        f"{done.deleted} history row(s) past live_cost.keep_days deleted"
    )
    if not frame.is_empty():
        print(render(frame))
    return 0
