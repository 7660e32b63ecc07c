"""Benchmark `preemptlens analyze` against a plain pandas notebook version.

Builds a synthetic cluster straight into a DuckDB warehouse (GPUS GPUs in
8-GPU nodes, DAYS days of 1-minute GPU samples, back-to-back jobs per node,
every sixth job preempted two thirds of the way through, every seventh idle
for its first hour), then reports:
  - full `analyze` wall time and peak memory (RSS high-water mark),
  - the same ledger (lost GPU-seconds from the last checkpoint) and hoarding
    (idle stretches >= 30 min, gaps break them) computed with pandas,
  - an incremental `analyze` after one more day of samples.

Default scale is the issue's target, 4,096 GPUs x 30 days (177 M samples);
use --gpus/--days for a smaller run. Run: python benchmarks/bench_analyze.py
"""

from __future__ import annotations

import argparse
import resource
import tempfile
import time
import uuid
from datetime import UTC, datetime
from pathlib import Path

import pandas as pd

from analytics.params import SETTINGS, params_from
from analytics.refresh import analyze
from preemptlens.config import Config
from preemptlens.warehouse import Warehouse

T0 = datetime(2026, 11, 2, tzinfo=UTC)


def _sql(wh: Warehouse, sql: str, params: dict[str, object]) -> None:
    """DuckDB refuses unused parameters: bind only those the statement names."""
    wh.con.execute(sql, {k: v for k, v in params.items() if f"${k}" in sql})


def _load_id(wh: Warehouse) -> str:
    load_id = uuid.uuid4().hex
    wh.con.execute(
        "INSERT INTO _loads VALUES ($id, 'bench', $t, $t, 0, 0, 0)", {"id": load_id, "t": datetime.now(UTC)}
    )
    return load_id


def generate(wh: Warehouse, gpus: int, days: int) -> None:
    nodes = gpus // 8
    minutes = days * 1440
    load = _load_id(wh)
    p = {"nodes": nodes, "minutes": minutes, "t0": T0, "load": load, "gpus": gpus}
    _sql(wh, "INSERT INTO pools VALUES ('bench', 'main', $t0 - INTERVAL 1 DAY, $gpus, 8, 'bench', $load)", p)
    # slots: job k on node n runs minutes [k*L, (k+1)*L), L = 180 + 60*(n % 5)
    _sql(
        wh,
        """
        CREATE TEMP TABLE slots AS
        SELECT n, k, 180 + 60 * (n % 5) AS len
        FROM range($nodes) r(n), range(0, $minutes // 180 + 1) s(k)
        WHERE k * (180 + 60 * (n % 5)) < $minutes
        """,
        p,
    )
    _sql(
        wh,
        """
        INSERT INTO jobs
        SELECT 'bench', 'J-' || n || '-' || k, NULL, 'team' || (n % 16), 'user' || (n % 64), NULL, NULL,
            CASE WHEN k % 6 = 3 THEN 'low' ELSE 'normal' END, true, 'main', 8,
            $t0 + to_minutes(k * len - 5), NULL, NULL, 'bench', $load
        FROM slots
        UNION ALL
        SELECT 'bench', 'P-' || n || '-' || k, NULL, 'prod', 'ops', NULL, NULL, 'high', false, 'main', 8,
            $t0 + to_minutes(k * len + 2 * len // 3 - 5), NULL, NULL, 'bench', $load
        FROM slots WHERE k % 6 = 3
        """,
        p,
    )
    _sql(
        wh,
        """
        INSERT INTO job_runs
        SELECT 'bench', 'J-' || n || '-' || k, 1, 'main', 'node' || n, 8, NULL, NULL,
            $t0 + to_minutes(k * len),
            $t0 + to_minutes(CASE WHEN k % 6 = 3 THEN k * len + 2 * len // 3 ELSE (k + 1) * len END),
            CASE WHEN k % 6 = 3 THEN 'preempted' ELSE 'completed' END,
            CASE WHEN k % 6 = 3 THEN 'P-' || n || '-' || k END, NULL, 'bench', $load
        FROM slots
        UNION ALL
        SELECT 'bench', 'P-' || n || '-' || k, 1, 'main', 'node' || n, 8, NULL, NULL,
            $t0 + to_minutes(k * len + 2 * len // 3), $t0 + to_minutes((k + 1) * len), 'completed',
            NULL, NULL, 'bench', $load
        FROM slots WHERE k % 6 = 3
        """,
        p,
    )
    _sql(
        wh,
        """
        INSERT INTO checkpoints
        SELECT 'bench', 'J-' || n || '-' || k, 1, $t0 + to_minutes(k * len + c * 45), 'checkpoint', c, 'bench', $load
        FROM slots, range(1, 8) ck(c)
        WHERE c * 45 < len
        """,
        p,
    )
    add_samples(wh, gpus, 0, minutes, load)


def add_samples(wh: Warehouse, gpus: int, first_minute: int, last_minute: int, load: str) -> None:
    wh.con.execute(
        """
        INSERT INTO gpu_samples
        WITH grid AS (
            SELECT g, g // 8 AS n, 180 + 60 * ((g // 8) % 5) AS len, m
            FROM range($gpus) a(g), range($m0, $m1) b(m)
        )
        SELECT 'bench', 'node' || n, 'GPU-' || g, '', g % 8, $t0 + to_minutes(m),
            CASE WHEN (m // len) % 7 = 0 AND m % len < 60 THEN 0.0 ELSE 0.7 END, 1000.0, 300.0,
            CASE WHEN (m // len) % 6 = 3 AND m % len >= 2 * len // 3 THEN 'P-' ELSE 'J-' END
                || n || '-' || (m // len),
            'bench', $load
        FROM grid
        WHERE m % 997 <> 0  -- a missing sample now and then
        """,
        {"gpus": gpus, "m0": first_minute, "m1": last_minute, "t0": T0, "load": load},
    )


def peak_rss_mib() -> float:
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024


def pandas_baseline(wh: Warehouse) -> tuple[float, int, float, float]:
    """The notebook version: read the tables into pandas and loop in groupby."""
    started = time.perf_counter()
    samples = wh.con.execute(
        "SELECT host, gpu_uuid, job_id, time, busy FROM gpu_samples"
    ).fetchdf()
    idle = samples[(samples["busy"] < 0.05) & samples["job_id"].notna()].sort_values(
        ["host", "gpu_uuid", "job_id", "time"]
    )
    gap = idle.groupby(["host", "gpu_uuid", "job_id"])["time"].diff().dt.total_seconds()
    idle = idle.assign(stretch=(gap.isna() | (gap > 90)).cumsum())
    stretches = idle.groupby("stretch").agg(start=("time", "min"), end=("time", "max"), job_id=("job_id", "first"))
    length = (stretches["end"] - stretches["start"]).dt.total_seconds() + 60
    hoarded = float(length[length >= 1800].sum())
    runs = wh.con.execute("SELECT * FROM job_runs WHERE state = 'preempted'").fetchdf()
    ckpts = wh.con.execute("SELECT job_id, run, time FROM checkpoints WHERE kind = 'checkpoint'").fetchdf()
    merged = pd.merge_asof(
        runs.sort_values("end_time"), ckpts.sort_values("time"), left_on="end_time", right_on="time",
        by=["job_id", "run"], direction="backward",
    )
    since = merged["time"].where(merged["time"] >= merged["start_time"], merged["start_time"])
    lost = float(((merged["end_time"] - since).dt.total_seconds() * merged["gpus"]).sum())
    del samples, idle
    return time.perf_counter() - started, len(merged), hoarded, lost


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--gpus", type=int, default=4096)
    parser.add_argument("--days", type=int, default=30)
    parser.add_argument("--no-pandas", action="store_true", help="skip the pandas baseline")
    args = parser.parse_args()
    params = params_from(Config(values={"analytics": {s.key: s.default for s in SETTINGS.settings}}))
    with tempfile.TemporaryDirectory() as tmp, Warehouse(Path(tmp) / "bench.duckdb") as wh:
        started = time.perf_counter()
        generate(wh, args.gpus, args.days)
        rows = wh.con.execute("SELECT count(*) FROM gpu_samples").fetchone()
        print(f"generated {rows[0] if rows else 0:,} samples in {time.perf_counter() - started:.1f} s")

        started = time.perf_counter()
        report = analyze(wh, params, full=True)
        ledger = wh.query("SELECT count(*) AS n, sum(lost_gpu_s) AS lost FROM preemption_ledger")
        hoarded = wh.query("SELECT sum(idle_gpu_hours) AS h FROM idle_hoarding_runs")["h"].item()
        wh.query("SELECT * FROM readiness_scorecard")
        full_s = time.perf_counter() - started
        print(
            f"preemptlens analyze (full, incl. reading ledger, hoarding and scorecard): {full_s:.1f} s, "
            f"peak RSS {peak_rss_mib():,.0f} MiB; {ledger['n'].item():,} preemptions, "
            f"{hoarded or 0:,.0f} hoarded GPU-hours; steps {report.seconds}"
        )

        if not args.no_pandas:
            pandas_s, preemptions, pandas_hoarded, pandas_lost = pandas_baseline(wh)
            print(
                f"pandas baseline (ledger lost GPU-s + hoarding only): {pandas_s:.1f} s, "
                f"peak RSS {peak_rss_mib():,.0f} MiB; {preemptions:,} preemptions, "
                f"{pandas_hoarded / 3600:,.0f} hoarded GPU-hours, {pandas_lost:,.0f} lost GPU-s "
                f"(analyze: {ledger['lost'].item() or 0:,.0f}); speed-up {pandas_s / full_s:.1f}x"
            )

        load = _load_id(wh)
        minutes = args.days * 1440
        add_samples(wh, args.gpus, minutes, minutes + 1440, load)
        started = time.perf_counter()
        report = analyze(wh, params)
        wh.query("SELECT count(*) FROM preemption_ledger")
        wh.query("SELECT * FROM readiness_scorecard")
        print(
            f"incremental analyze after one more day: {time.perf_counter() - started:.1f} s "
            f"({report.stretches.mode}, from {report.stretches.recomputed_from})"
        )


if __name__ == "__main__":
    main()
