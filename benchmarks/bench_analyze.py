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
use --gpus/--days for a smaller run, and --warehouse FILE to keep the
generated cluster for the next run (generating 4,096 x 30 takes minutes).
Wall times swing with whatever else runs on the machine, so CPU seconds are
printed beside them. The pandas baseline must agree with analyze on the
totals, or the script fails. Run: python benchmarks/bench_analyze.py
"""

from __future__ import annotations

import argparse
import os
import resource
import tempfile
import time
import uuid
from datetime import UTC, datetime
from pathlib import Path

import pandas as pd

from preemptlens.analytics.params import AnalyticsSettings
from preemptlens.analytics.refresh import AnalyzeReport, analyze
from preemptlens.warehouse import Warehouse

T0 = datetime(2026, 11, 2, tzinfo=UTC)


def _sql(wh: Warehouse, sql: str, params: dict[str, object]) -> None:
    """DuckDB refuses unused parameters: bind only those the statement names."""
    wh.con.execute(sql, {k: v for k, v in params.items() if f"${k}" in sql})


def _load_id(wh: Warehouse, source: str = "bench") -> str:
    load_id = uuid.uuid4().hex
    wh.con.execute(
        "INSERT INTO _loads VALUES ($id, $s, $t, $t, 0, 0, 0)", {"id": load_id, "s": source, "t": datetime.now(UTC)}
    )
    return load_id


def generate(wh: Warehouse, gpus: int, days: int) -> None:
    load = _load_id(wh)
    wh.con.execute(
        "INSERT INTO pools VALUES ('bench', 'main', $t0 - INTERVAL 1 DAY, $gpus, 8, 'bench', $load)",
        {"t0": T0, "gpus": gpus, "load": load},
    )
    add_data(wh, gpus, 0, days * 1440, load)


def add_data(wh: Warehouse, gpus: int, first_minute: int, last_minute: int, load: str) -> None:
    """The jobs that start in [first_minute, last_minute) and the samples of those minutes."""
    p = {"nodes": gpus // 8, "m0": first_minute, "m1": last_minute, "t0": T0, "load": load}
    # slots: job k on node n runs minutes [k*L, (k+1)*L), L = 180 + 60*(n % 5)
    _sql(
        wh,
        """
        CREATE OR REPLACE TEMP TABLE slots AS
        SELECT n, k, 180 + 60 * (n % 5) AS len
        FROM range($nodes) r(n), range(0, $m1 // 180 + 1) s(k)
        WHERE k * (180 + 60 * (n % 5)) >= $m0 AND k * (180 + 60 * (n % 5)) < $m1
        """,
        p,
    )
    _sql(
        wh,
        """
        INSERT INTO jobs (cluster, job_id, name, team, user_name, priority_class, priority_value, tier, preemptible,
            pool, gpus, submit_time, checkpoint_interval_s, work_s, source, _load_id)
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
        INSERT INTO checkpoints (cluster, job_id, run, time, kind, step, source, _load_id, save_s)
        SELECT 'bench', 'J-' || n || '-' || k, 1, $t0 + to_minutes(k * len + c * 45), 'checkpoint', c, 'bench', $load,
            20.0
        FROM slots, range(1, 8) ck(c)
        WHERE c * 45 < len
        """,
        p,
    )
    add_samples(wh, gpus, first_minute, last_minute, load)


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
    """The notebook version: read the columns it needs into pandas, then filter, sort and group there.

    Read through Arrow, as pandas 3 reads Parquet: strings stay Arrow-backed
    (`str` dtype) rather than one Python object per value, which would need
    about four times the memory.
    """
    started = time.perf_counter()
    samples = wh.con.sql("SELECT host, gpu_uuid, job_id, time, busy FROM gpu_samples").to_arrow_table().to_pandas()
    idle = samples[(samples["busy"] < 0.05) & samples["job_id"].notna()].sort_values(
        ["host", "gpu_uuid", "job_id", "time"]
    )
    gap = idle.groupby(["host", "gpu_uuid", "job_id"])["time"].diff().dt.total_seconds()
    idle = idle.assign(stretch=(gap.isna() | (gap > 90)).cumsum())
    stretches = idle.groupby("stretch").agg(start=("time", "min"), end=("time", "max"), job_id=("job_id", "first"))
    length = (stretches["end"] - stretches["start"]).dt.total_seconds() + 60
    hoarded = float(length[length >= 1800].sum())
    runs = wh.con.sql("SELECT * FROM job_runs WHERE state = 'preempted'").to_arrow_table().to_pandas()
    ckpts = (
        wh.con.sql("SELECT job_id, run, time FROM checkpoints WHERE kind = 'checkpoint'").to_arrow_table().to_pandas()
    )
    merged = pd.merge_asof(
        runs.sort_values("end_time"), ckpts.sort_values("time"), left_on="end_time", right_on="time",
        by=["job_id", "run"], direction="backward",
    )
    since = merged["time"].where(merged["time"] >= merged["start_time"], merged["start_time"])
    lost = float(((merged["end_time"] - since).dt.total_seconds() * merged["gpus"]).sum())
    del samples, idle
    return time.perf_counter() - started, len(merged), hoarded, lost


def open_bench(path: Path, gpus: int, days: int) -> Warehouse:
    """A warehouse holding the synthetic cluster, generated once and reused while kept.

    A kept warehouse is put back to its generated state: the extra day that
    the incremental step appended (its own load) is removed.
    """
    wh = Warehouse(path)
    scale = f"{gpus}x{days}"
    row = wh.con.execute("SELECT value FROM analytics_state WHERE name = 'bench.scale'").fetchone()
    if row and row[0] == scale:
        extra = "SELECT load_id FROM _loads WHERE source = 'bench-day'"
        for table in ("gpu_samples", "checkpoints", "job_runs", "jobs"):
            wh.con.execute(f"DELETE FROM {table} WHERE _load_id IN ({extra})")
        wh.con.execute("DELETE FROM analytics_loads_seen WHERE load_id IN (SELECT load_id FROM _loads "
                       "WHERE source = 'bench-day')")
        wh.con.execute("DELETE FROM _loads WHERE source = 'bench-day'")
        print(f"reusing the generated warehouse {path} ({scale})")
        return wh
    if row:
        wh.close()
        raise SystemExit(f"{path} holds another scale ({row[0]}); remove it or pick another --warehouse")
    started = time.perf_counter()
    generate(wh, gpus, days)
    wh.con.execute(
        "INSERT INTO analytics_state VALUES ('bench.scale', $v, $t)", {"v": scale, "t": datetime.now(UTC)}
    )
    wh.con.execute("CHECKPOINT")
    print(f"generated in {time.perf_counter() - started:.1f} s")
    return wh


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--gpus", type=int, default=4096)
    parser.add_argument("--days", type=int, default=30)
    parser.add_argument("--no-pandas", action="store_true", help="skip the pandas baseline")
    parser.add_argument("--snapshot", action="store_true", help="also time publishing the reader snapshot")
    parser.add_argument(
        "--warehouse", type=Path, help="keep the generated warehouse in this file and reuse it on the next run"
    )
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        path = args.warehouse or Path(tmp) / "bench.duckdb"
        wh = open_bench(path, args.gpus, args.days)
        try:
            run(wh, args)
        finally:
            # Nobody reads the bench's warehouse: skip publishing the reader
            # snapshot on close (a whole-database copy, minutes at full scale).
            wh.con.close()


def run(wh: Warehouse, args: argparse.Namespace) -> None:
    params = AnalyticsSettings()
    rows = wh.con.execute("SELECT count(*) FROM gpu_samples").fetchone()
    print(f"{rows[0] if rows else 0:,} samples")

    started, cpu = time.perf_counter(), time.process_time()
    report = analyze(wh, params, full=True)
    ledger = wh.query("SELECT count(*) AS n, sum(lost_gpu_s) AS lost FROM preemption_ledger")
    hoarded = wh.query("SELECT sum(idle_gpu_hours) AS h FROM idle_hoarding_runs")["h"].item() or 0.0
    wh.query("SELECT * FROM readiness_scorecard")
    full_s, full_cpu = time.perf_counter() - started, time.process_time() - cpu
    print(
        f"preemptlens analyze (full, incl. reading ledger, hoarding and scorecard): {full_s:.1f} s "
        f"(CPU {full_cpu:.1f} s), peak RSS {peak_rss_mib():,.0f} MiB; {ledger['n'].item():,} preemptions, "
        f"{hoarded:,.0f} hoarded GPU-hours; {load_average()}"
    )
    print_steps(report)

    if args.snapshot:
        started = time.perf_counter()
        wh.publish()
        print(f"publish reader snapshot (whole-database copy): {time.perf_counter() - started:.1f} s")

    if not args.no_pandas:
        cpu = time.process_time()
        pandas_s, preemptions, pandas_hoarded, pandas_lost = pandas_baseline(wh)
        pandas_cpu = time.process_time() - cpu
        lost = ledger["lost"].item() or 0.0
        print(
            f"pandas baseline (ledger lost GPU-s + hoarding only): {pandas_s:.1f} s (CPU {pandas_cpu:.1f} s), "
            f"peak RSS {peak_rss_mib():,.0f} MiB; {preemptions:,} preemptions, "
            f"{pandas_hoarded / 3600:,.0f} hoarded GPU-hours, {pandas_lost:,.0f} lost GPU-s "
            f"(analyze: {lost:,.0f}); speed-up {pandas_s / full_s:.1f}x wall, {pandas_cpu / full_cpu:.1f}x CPU"
        )
        # Both must compute the same figures, or the comparison means nothing.
        if (preemptions, round(pandas_hoarded / 3600, 6), round(pandas_lost, 3)) != (
            ledger["n"].item(), round(hoarded, 6), round(lost, 3)
        ):
            raise SystemExit("pandas and analyze disagree on the totals above")

    load = _load_id(wh, "bench-day")
    minutes = args.days * 1440
    add_data(wh, args.gpus, minutes, minutes + 1440, load)
    started, cpu = time.perf_counter(), time.process_time()
    report = analyze(wh, params)
    wh.query("SELECT count(*) FROM preemption_ledger")
    wh.query("SELECT * FROM readiness_scorecard")
    print(
        f"incremental analyze after one more day: {time.perf_counter() - started:.1f} s "
        f"(CPU {time.process_time() - cpu:.1f} s; {report.stretches.mode}, from {report.stretches.recomputed_from}); "
        f"{load_average()}"
    )
    print_steps(report)


def load_average() -> str:
    """Other work on the machine stretches the wall times: say how much there was."""
    return "load average {:.1f} {:.1f} {:.1f}".format(*os.getloadavg())


def print_steps(report: AnalyzeReport) -> None:
    print("  " + ", ".join(f"{k} {v:.2f} s" for k, v in report.seconds.items()))
    slow = sorted(report.view_seconds.items(), key=lambda kv: -kv[1])
    print("  views: " + ", ".join(f"{k} {v:.2f}" for k, v in slow))


if __name__ == "__main__":
    main()
