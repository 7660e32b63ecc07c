"""Prometheus collector benchmark: 512 GPUs x 7 days at 1-minute resolution, side by side.

    python benchmarks/bench_prometheus.py [--gpus 512] [--days 7] [--workdir DIR] [--keep]

Backfills a real Prometheus (Debian package, promtool) with dcgm-exporter
history written by analytics/openmetrics.py, then runs, each in its own
process so that peak RSS is its own:
  (a) floor:     the collector's own requests (series lookup, page queries) as raw
                 HTTP, one after another, body read and discarded
  (b) collector: preemptlens' Prometheus collector end to end into DuckDB
  (c) naive:     prometheus-api-client custom_query_range + MetricRangeDataFrame,
                 the pandas frames loaded into DuckDB
Targets: (b) >= 5x faster than (c), (b) <= 2x (a), (b) peak RSS < 1 GiB.
"""

from __future__ import annotations

import argparse
import json
import resource
import shutil
import subprocess
import sys
import tempfile
import time
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import numpy as np
import polars as pl

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from analytics.openmetrics import ExporterStyle, write_openmetrics  # noqa: E402
from collectors.prometheus import SETTINGS, PrometheusCollector, PrometheusSource, options_from, plan_pages  # noqa: E402
from tests.prometheus.conftest import PrometheusServer, backfill  # noqa: E402

GPUS_PER_HOST = 8
CLUSTER = "bench"


def generate(workdir: Path, gpus: int, days: int, end: datetime) -> None:
    """Write the history in host chunks (one promtool run each) to bound memory."""
    minutes = days * 1440
    start = end - timedelta(minutes=minutes - 1)
    times = pl.datetime_range(start, end, "1m", eager=True, time_zone="UTC")
    rng = np.random.default_rng(1)
    hosts = gpus // GPUS_PER_HOST
    chunk = 8
    style = ExporterStyle(job_labels="hpc_job")
    for first_host in range(0, hosts, chunk):
        frames = []
        for h in range(first_host, min(first_host + chunk, hosts)):
            for g in range(GPUS_PER_HOST):
                # A new job (a new hpc_job series) every 6 hours: realistic series churn.
                jobs = np.repeat(rng.integers(1_000_000, 9_999_999, minutes // 360 + 1).astype(str), 360)[
                    :minutes
                ]
                frames.append(
                    pl.DataFrame(
                        {
                            "host": f"node{h:04d}",
                            "gpu_uuid": f"GPU-{h:04d}-{g}",
                            "gpu_instance": "",
                            "gpu_index": g,
                            "time": times,
                            "busy": rng.integers(0, 101, minutes) / 100,
                            "mem_used_mib": rng.integers(0, 80_000, minutes).astype(float),
                            "power_w": np.round(rng.uniform(60, 700, minutes), 3),
                            "job_id": jobs,
                        }
                    )
                )
        path = workdir / f"chunk{first_host:04d}.om.txt"
        write_openmetrics(pl.concat(frames), path, default=style)
        backfill(path, workdir / "data", max_block="168h")
        path.unlink()
        print(f"  backfilled hosts {first_host}-{min(first_host + chunk, hosts) - 1}", file=sys.stderr)


def options(url: str) -> Any:
    values = {s.key: s.default for s in SETTINGS.settings} | {"url": url}
    return options_from(values, CLUSTER)


def run_floor(url: str, since: int, until: int) -> dict[str, Any]:
    import requests

    opts = options(url)
    session = requests.Session()
    queries = [*opts.queries.values(), opts.weight_query]
    received = 0
    # Exactly the collector's requests: its one series lookup before the first page, then per page
    # the metric queries and the weight query (the collector fetches one page ahead; the floor
    # sends the same requests one after another).
    matches = [f"{m}{{{opts.selector}}}" for m in opts.known_metrics]
    if matches:
        lookup = [("match[]", m) for m in matches]
        lookup += [("start", str((since - opts.step_ms) / 1000)), ("end", str(until / 1000))]
        response = session.post(f"{url}/api/v1/series", data=lookup, timeout=300)
        response.raise_for_status()
        received += len(response.content)
    for first, last in plan_pages(since, until, opts.step_ms, opts.page_points):
        for q in queries:
            data = {"query": q, "start": first / 1000, "end": last / 1000, "step": opts.step_ms / 1000}
            response = session.post(f"{url}/api/v1/query_range", data=data, timeout=300)
            response.raise_for_status()
            received += len(response.content)
    return {"bytes": received}


def run_collector(url: str, since: int, until: int, warehouse: str) -> dict[str, Any]:
    from preemptlens.warehouse import Warehouse

    rows = 0
    with Warehouse(warehouse) as wh:
        for batch in PrometheusCollector(options(url), since, until, progress=False).batches({}):
            rows += wh.load_batch(batch).loaded
        stored = int(wh.query("SELECT count(*) AS n FROM gpu_samples")["n"][0])
    return {"rows": rows, "stored": stored}


def run_naive(url: str, since: int, until: int, warehouse: str) -> dict[str, Any]:
    import duckdb
    from prometheus_api_client import MetricRangeDataFrame, PrometheusConnect

    prom = PrometheusConnect(url=url)
    con = duckdb.connect(warehouse)
    opts = options(url)
    rows = 0
    for name, query in opts.queries.items():
        result = prom.custom_query_range(
            query,
            start_time=datetime.fromtimestamp(since / 1000, UTC),
            end_time=datetime.fromtimestamp(until / 1000, UTC),
            step="60",
        )
        frame = MetricRangeDataFrame(result).reset_index()
        con.register("frame", frame)
        con.execute(f"CREATE TABLE {name} AS SELECT * FROM frame")
        con.unregister("frame")
        rows += len(frame)
        del frame, result
    con.close()
    return {"rows": rows}


def child(args: argparse.Namespace) -> None:
    began = time.perf_counter()
    if args.part == "floor":
        out = run_floor(args.url, args.since, args.until)
    elif args.part == "collector":
        out = run_collector(args.url, args.since, args.until, args.warehouse)
    else:
        out = run_naive(args.url, args.since, args.until, args.warehouse)
    out["seconds"] = time.perf_counter() - began
    out["peak_rss_mib"] = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
    print(json.dumps(out))


def measure(part: str, url: str, since: int, until: int, workdir: Path) -> dict[str, Any]:
    warehouse = workdir / f"{part}.duckdb"
    warehouse.unlink(missing_ok=True)
    cmd = [
        sys.executable,
        __file__,
        "--part",
        part,
        "--url",
        url,
        "--since",
        str(since),
        "--until",
        str(until),
    ]
    cmd += ["--warehouse", str(warehouse)]
    done = subprocess.run(cmd, capture_output=True, text=True, check=False)
    if done.returncode != 0:
        raise SystemExit(f"{part} failed:\n{done.stderr}")
    result: dict[str, Any] = json.loads(done.stdout.strip().splitlines()[-1])
    return result


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--gpus", type=int, default=512)
    parser.add_argument("--days", type=int, default=7)
    parser.add_argument("--workdir", type=Path, help="keep the backfilled data here (reused when present)")
    parser.add_argument("--part", choices=("floor", "collector", "naive"), help=argparse.SUPPRESS)
    parser.add_argument("--url", help=argparse.SUPPRESS)
    parser.add_argument("--since", type=int, help=argparse.SUPPRESS)
    parser.add_argument("--until", type=int, help=argparse.SUPPRESS)
    parser.add_argument("--warehouse", help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.part:
        child(args)
        return

    workdir = args.workdir or Path(tempfile.mkdtemp(prefix="bench-prom-"))
    workdir.mkdir(parents=True, exist_ok=True)
    marker = workdir / "dataset.json"
    if marker.exists() and json.loads(marker.read_text())[:2] == [args.gpus, args.days]:
        end = datetime.fromisoformat(json.loads(marker.read_text())[2])
        print(f"reusing the backfilled data in {workdir}", file=sys.stderr)
    else:
        shutil.rmtree(workdir / "data", ignore_errors=True)
        end = datetime.now(UTC).replace(minute=0, second=0, microsecond=0) - timedelta(hours=2)
        began = time.perf_counter()
        generate(workdir, args.gpus, args.days, end)
        print(f"  generated and backfilled in {time.perf_counter() - began:.0f} s", file=sys.stderr)
        marker.write_text(json.dumps([args.gpus, args.days, end.isoformat()]))
    since = int((end - timedelta(days=args.days) + timedelta(minutes=1)).timestamp() * 1000)
    until = int(end.timestamp() * 1000)

    server = PrometheusServer(workdir / "data")
    server.start()
    try:
        # Warm the page cache and the server once, so that no part pays for the cold start.
        PrometheusSource(options(server.url)).series_count(["DCGM_FI_DEV_FB_USED"], since, until)
        measure("floor", server.url, since, until, workdir)
        results = {
            part: measure(part, server.url, since, until, workdir) for part in ("floor", "collector", "naive")
        }
    finally:
        server.stop()

    values = args.gpus * args.days * 1440 * 3
    print(
        f"\n{args.gpus} GPUs x {args.days} days at 1 min = {values:,} metric values (busy, memory, power)\n"
    )
    print(f"{'':34}{'seconds':>10}{'values/s':>14}{'peak RSS MiB':>15}")
    labels = {
        "floor": "(a) Prometheus floor (raw HTTP)",
        "collector": "(b) preemptlens collector",
        "naive": "(c) api-client + DataFrame",
    }
    for part, label in labels.items():
        r = results[part]
        print(f"{label:34}{r['seconds']:>10.1f}{values / r['seconds']:>14,.0f}{r['peak_rss_mib']:>15,.0f}")
    a, b, c = (results[p]["seconds"] for p in ("floor", "collector", "naive"))
    print(f"\n(c)/(b) = {c / b:.1f}x faster (target >= 5x);  (b)/(a) = {b / a:.2f}x the floor (target <= 2x)")
    print(
        f"collector rows stored: {results['collector']['stored']:,} (expected {args.gpus * args.days * 1440:,})"
    )
    if not args.workdir:
        shutil.rmtree(workdir, ignore_errors=True)


if __name__ == "__main__":
    main()
