"""Prometheus collector benchmark: 512 GPUs x 7 days at 1-minute resolution, side by side.

    python benchmarks/bench_prometheus.py [--gpus 512] [--days 7] [--workdir DIR] [--prepare]

Backfills a real Prometheus (Debian package, promtool) with dcgm-exporter
history written by tests/prometheus/openmetrics.py (one OpenMetrics file, host chunk
by host chunk, one promtool run; --workdir keeps and reuses it, --prepare only
builds it), then runs, each in its own process so that peak RSS is its own:
  (a) floor:     exactly the requests of a collector run (recorded by the warm-up
                 run: which follow-up queries a page needs depends on its answers),
                 same method, parameters and headers, through the collector's own
                 HTTP code, one after another, body read and discarded
  (b) collector: preemptlens' Prometheus collector end to end into DuckDB
                 (default settings: 1440-point pages, 4 requests in flight,
                 uncompressed answers)
  (b') the same, asking for gzipped answers (headers Accept-Encoding = gzip), as
                 it did before
  (c) naive:     prometheus-api-client custom_query_range per query over the whole
                 window at the same step, MetricRangeDataFrame, the pandas frames
                 inserted into DuckDB; the PromQL is what the collector used to send
                 (busy with its `or` fallback), frozen in NAIVE_QUERIES
Targets: (b) >= 5x faster than (c), (b) <= 2x (a), (b) peak RSS < 1 GiB.
--base DIR also runs another checkout's (b) right after this one's, on the same server, and --repeat N
takes the medians of N rounds of the parts in turn: before and after side by side on a shared machine.
Besides wall-clock seconds it prints the CPU seconds of each part's process
and of Prometheus serving it, since the machine may be shared.

--memory MB runs only (d): one query_range answer of about MB megabytes, in the shape Prometheus writes, served
by a local HTTP server and read by the collector's HTTP code and answer reader in a process of its own; it
prints the peak resident memory over the memory before the request, beside the answer's size (the size cap,
prometheus.max_response_bytes, bounds memory only as far as that ratio is small).

Last measured (2026-12-07, 2 cores shared with six other sessions' test runs), against the commit before the
Prometheus package (42c1d00):

  --memory 300: one answer of 286 MiB (14,968,800 points): peak 631 MiB over the baseline = 2.21x the answer;
  before 1,125 MiB = 3.93x (the chunks joined into a second copy, the values text copied three times, and the
  points concatenated again).
  --parts floor,collector --base 42c1d00 --repeat 3, load 14-26: (a) 32.0 s (0.8 CPU s); (b) 59.0 s (10.1 CPU
  s, 718 MiB): 1.85x (a); before 47.8 s (10.7 CPU s, 746 MiB): 1.50x. The rounds scattered more than the
  change (b: 59.0, 36.0, 85.5 s; before: 47.8, 40.1, 88.9 s; (a): 54.9, 16.4, 32.0 s): at this load the CPU
  seconds say more. An earlier round at load 4-9, before the change: (a) 23.9 s, (b) 41.5 s (10.4 CPU s):
  1.73x. Replaying the recorded answers without a server or warehouse: the collector's own reading and page
  building 4.7 -> 4.0-4.3 CPU s (reading the 28 answers 3.0 -> 2.5, counting duplicate GPU-steps 0.85 ->
  0.14); with the warehouse load 10.1 CPU s, of which the load (preemptlens/warehouse.py, DuckDB) is about 5.5.

Earlier, --parts floor,collector --base <parent commit> --repeat 3, medians:

  load 2.3-2.4: (a) floor 9.3 s (1.2 CPU s); (b) 15.4 s (12.1 CPU s, 791 MiB); the parent's (b) 20.6 s
  (20.8 CPU s, 965 MiB): (b)/(a) 1.65x, the parent's 2.21x. At load 3-6: (a) 15.9 s, (b) 38.0 s, the
  parent's 43.2 s: 2.39x against 2.72x; at load 8-14 2.33x against 3.04x. The collector builds
  the next page on a thread while the caller loads this one, puts a page whose streams answered the same
  series at the same steps together without joins, and the load API skips the dedupe of a batch whose
  keys only increase and the key join where nothing is stored in the batch's time range; the snapshot is
  a file copy. Replaying the recorded answers without a server: 9.1 CPU s against 17.7, the same rows.

Before (512 GPUs x 7 d = 15.5 M values) on a quiet machine (load 0.6
before, 1.2 after), after the load API's direct insert of new keys:

  load average 0.6-1.2       seconds  CPU s  server CPU s  peak RSS MiB
  (a) floor                     15.3    1.5          15.4           124
  (b) collector                 26.1   25.7          14.8           939
  (b') collector, gzip          45.1   30.5          54.0           880
  (c) naive                    190.2  112.0          99.4         5,922

(c)/(b) = 7.3x, (c)/(b') = 4.2x, (b)/(a) = 1.70x: the three targets are met.
Earlier, twice, on 2 cores shared with other jobs (the seconds include
waiting for a core; before the direct insert). The collector asks for
busy in stages (the busy metric alone; the fallback's `unless` part only for
pages with series that lack busy values, here every page: jobs change every
6 h; raw sample counts only where series share a GPU-step, here never) and for
uncompressed answers:

  load average 11.2-14.5     seconds  CPU s  server CPU s  peak RSS MiB
  (a) floor                     49.5    1.8          17.3           124
  (b) collector                129.6   33.4          15.8           907
  (b') collector, gzip         202.2   38.4          56.4           865
  (c) naive                    531.9  114.9         117.5         5,840
  load average 7.6-11.5
  (a) floor                     25.2    1.2          12.9           124
  (b) collector                 62.8   23.0          12.3           924
  (b') collector, gzip         104.6   31.5          46.0           870
  (c) naive                    244.9  114.3         114.1         5,837

(c)/(b) = 3.9-4.1x, (c)/(b') = 2.3-2.6x, (b)/(a) = 2.5-2.6x. Before (same data
set, load 5-15): (c)/(b) 1.7-2.7x, Prometheus spent 80-104 CPU s serving the
collector; now 46-56 with gzip and 12-16 without: gzip was three quarters of its
CPU (it compresses at ~8 MB/s), the `or` queries most of the rest. At 128 GPUs x 7 d,
back to back (load 14 then 9): client CPU s 15.7 -> 11.9, server CPU s 21.7 ->
14.0 with gzip, 3.6 without. The floor is now cheap (no gzip), so (b) is mostly
the collector's own CPU: reading answers and building frames (~45%) and the
warehouse load and snapshot publish (~55%), on 2 shared cores. Writing the
data set took 145 s (5.2 GiB of text) and one promtool run 688 s at load ~12.
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterator, Sequence
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import numpy as np
import polars as pl

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from preemptlens.collectors.prometheus import (  # noqa: E402
    PrometheusCollector,
    PrometheusSettings,
    PrometheusSource,
    options_from,
)
from tests.prometheus.conftest import PrometheusServer, backfill  # noqa: E402
from tests.prometheus.openmetrics import ExporterStyle, write_openmetrics_chunks  # noqa: E402

GPUS_PER_HOST = 8
HOSTS_PER_CHUNK = 8
CLUSTER = "bench"


def history_chunk(first_host: int, end_host: int, minutes: int, start: datetime) -> pl.DataFrame:
    """Hosts [first_host, end_host) of the history, one row per GPU and minute, built in whole
    arrays; seeded by its first host, so that calling it again gives the same chunk."""
    rng = np.random.default_rng([1, first_host])
    n_gpus = (end_host - first_host) * GPUS_PER_HOST
    rows = n_gpus * minutes
    gpu = np.repeat(np.arange(n_gpus), minutes)
    minute = np.tile(np.arange(minutes), n_gpus)
    # A new job (a new hpc_job series) every 6 hours: realistic series churn.
    jobs = rng.integers(1_000_000, 9_999_999, (n_gpus, minutes // 360 + 1))[gpu, minute // 360]
    start_ms = int(start.timestamp() * 1000)
    frame = pl.DataFrame(
        {
            "host_n": first_host + gpu // GPUS_PER_HOST,
            "gpu_index": gpu % GPUS_PER_HOST,
            "t": start_ms + minute.astype(np.int64) * 60_000,
            "busy": rng.integers(0, 101, rows) / 100,
            "mem_used_mib": rng.integers(0, 80_000, rows).astype(np.float64),
            "power_w": np.round(rng.uniform(60, 700, rows), 3),
            "job_id": jobs,
        }
    )
    number = pl.col("host_n").cast(pl.String).str.zfill(4)
    return frame.select(
        pl.concat_str([pl.lit("node"), number]).alias("host"),
        pl.concat_str([pl.lit("GPU-"), number, pl.lit("-"), pl.col("gpu_index").cast(pl.String)]).alias("gpu_uuid"),
        pl.lit("").alias("gpu_instance"),
        "gpu_index",
        pl.from_epoch("t", time_unit="ms").dt.replace_time_zone("UTC").alias("time"),
        "busy",
        "mem_used_mib",
        "power_w",
        pl.col("job_id").cast(pl.String),
    )


def generate(workdir: Path, gpus: int, days: int, end: datetime) -> None:
    """Write the whole history as one OpenMetrics file, host chunk by host chunk, and backfill
    it with one promtool run. promtool reads the whole file once per block it writes, so one
    block as long as it allows (4374 h: its block sizes grow 2 h x 3^k) covers the week."""
    minutes = days * 1440
    start = end - timedelta(minutes=minutes - 1)
    hosts = -(-gpus // GPUS_PER_HOST)

    def chunks() -> Iterator[pl.DataFrame]:
        for first in range(0, hosts, HOSTS_PER_CHUNK):
            yield history_chunk(first, min(first + HOSTS_PER_CHUNK, hosts), minutes, start)

    path = workdir / "history.om.txt"
    began = time.perf_counter()
    samples = write_openmetrics_chunks(chunks, path, default=ExporterStyle(job_labels="hpc_job"))
    size = path.stat().st_size
    print(
        f"  wrote {samples:,} samples ({size / 2**30:.1f} GiB of OpenMetrics) in {time.perf_counter() - began:.0f} s",
        file=sys.stderr,
    )
    began = time.perf_counter()
    backfill(path, workdir / "data", max_block="4374h")
    print(f"  promtool backfilled them in {time.perf_counter() - began:.0f} s", file=sys.stderr)
    path.unlink()


# What a user writes today: the PromQL the collector sent before it asked for busy in stages,
# frozen so that (c) does not pick up the collector's cheaper requests.
NAIVE_QUERIES = {
    "busy": "avg_over_time(DCGM_FI_PROF_GR_ENGINE_ACTIVE{}[59999ms]) "
    "or (avg_over_time(DCGM_FI_DEV_GPU_UTIL{}[59999ms]) * 0.01)",
    "mem_used_mib": "max_over_time(DCGM_FI_DEV_FB_USED{}[59999ms])",
    "power_w": "avg_over_time(DCGM_FI_DEV_POWER_USAGE{}[59999ms])",
}


# (b'): the collector with its `headers` setting asking for gzipped answers, as it did before.
GZIP = {"Accept-Encoding": "gzip"}


def options(url: str, **settings: Any) -> Any:
    return options_from(PrometheusSettings(**{"url": url, **settings}), CLUSTER)


def record_requests(log: list[tuple[str, list[tuple[str, str]]]]) -> None:
    """Have every request the collector sends (path, parameters) appended to `log`. Which
    requests a page needs depends on the answers, so the floor replays a recorded run."""
    send = PrometheusSource._send

    def recorded(self: PrometheusSource, path: str, data: Sequence[tuple[str, str]], what: str) -> bytes:
        log.append((path, list(data)))
        return send(self, path, data, what)

    PrometheusSource._send = recorded  # type: ignore[method-assign]


def run_floor(url: str, requests_file: Path) -> dict[str, Any]:
    """Exactly the requests of a recorded collector run, sent by its own HTTP code with the
    same method, parameters and headers, one after another; each body is read and discarded."""
    source = PrometheusSource(options(url))
    received = 0
    for path, data in json.loads(requests_file.read_text()):
        received += len(source._send(path, [tuple(p) for p in data], path))
    source.close()
    return {"bytes": received}


def run_collector(url: str, since: int, until: int, warehouse: str, **settings: Any) -> dict[str, Any]:
    from preemptlens.warehouse import Warehouse

    rows = 0
    with Warehouse(warehouse) as wh:
        for batch in PrometheusCollector(options(url, **settings), since, until, progress=False).batches({}):
            rows += wh.load_batch(batch).loaded
        stored = int(wh.query("SELECT count(*) AS n FROM gpu_samples")["n"][0])
    return {"rows": rows, "stored": stored}


def run_naive(url: str, since: int, until: int, warehouse: str) -> dict[str, Any]:
    import duckdb
    from prometheus_api_client import MetricRangeDataFrame, PrometheusConnect

    prom = PrometheusConnect(url=url)
    con = duckdb.connect(warehouse)
    rows = 0
    for name, query in NAIVE_QUERIES.items():
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


def cpu_seconds() -> float:
    usage = resource.getrusage(resource.RUSAGE_SELF)
    return usage.ru_utime + usage.ru_stime


def peak_rss_mib() -> float:
    """This process's peak resident memory (VmHWM). Not ru_maxrss: after fork and exec it starts from the
    parent's resident memory at the fork, which (d)'s parent, holding the answer it serves, would dominate."""
    status = dict(line.split(":", 1) for line in Path("/proc/self/status").read_text().splitlines())
    return int(status["VmHWM"].split()[0]) / 1024


def server_cpu_seconds(pid: int) -> float:
    """CPU seconds the Prometheus process has used (user + system), from /proc."""
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def answer_of_size(megabytes: int) -> bytes:
    """A query_range answer of about `megabytes` MB in the shape Prometheus writes (compact JSON; dcgm-exporter
    labels, 1440 points a series at one minute, values as Go prints them)."""
    rng = np.random.default_rng(7)
    t0 = 1_796_018_460
    values = ",".join(f'[{t0 + 60 * i},"{v:g}"]' for i, v in enumerate(rng.integers(0, 101, 1440) / 100))
    parts, size, n = [], 0, 0
    while size < megabytes * 10**6:
        labels = json.dumps({"DCGM_FI_DRIVER_VERSION": "580.95.05", "Hostname": f"node{n // 8:05d}",
                             "UUID": f"GPU-{n // 8:05d}-{n % 8}", "device": f"nvidia{n % 8}", "gpu": str(n % 8),
                             "hpc_job": str(1_000_000 + n), "instance": f"node{n // 8:05d}:9400",
                             "job": "dcgm-exporter", "modelName": "NVIDIA A100-SXM4-80GB"}, separators=(",", ":"))
        parts.append(f'{{"metric":{labels},"values":[{values}]}}')
        size += len(parts[-1]) + 1
        n += 1
    return ('{"status":"success","data":{"resultType":"matrix","result":[' + ",".join(parts) + "]}}").encode()


def serve_answer(body: bytes) -> tuple[str, Any]:
    """A local HTTP server on 127.0.0.1 answering every request with `body`, in 1 MiB writes."""
    import threading
    from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

    class Answer(BaseHTTPRequestHandler):
        def do_GET(self) -> None:
            self.send_response(200)
            self.send_header("Content-Type", "application/json")
            self.send_header("Content-Length", str(len(body)))
            self.end_headers()
            view = memoryview(body)
            for at in range(0, len(body), 1 << 20):
                self.wfile.write(view[at : at + (1 << 20)])

        do_POST = do_GET

        def log_message(self, *args: object) -> None:
            pass

    server = ThreadingHTTPServer(("127.0.0.1", 0), Answer)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    return f"http://127.0.0.1:{server.server_address[1]}", server


def run_memory(url: str) -> dict[str, Any]:
    """One query_range answer read as the collector reads it (its HTTP code and answer reader); the resident
    memory before the request is the baseline (interpreter, polars, the HTTP stack)."""
    source = PrometheusSource(options(url))
    before = int(Path("/proc/self/statm").read_text().split()[1]) * os.sysconf("SC_PAGE_SIZE") / 2**20
    if hasattr(source, "read_range"):
        answer = source.read_range("busy", "DCGM_FI_PROF_GR_ENGINE_ACTIVE", 1_796_018_460_000, 1_796_104_800_000)
    else:  # a checkout from before the answer was read in the worker (--base)
        from preemptlens.collectors.prometheus import range_result

        answer = range_result(source.query_range("busy", "DCGM_FI_PROF_GR_ENGINE_ACTIVE", 1_796_018_460_000,
                                                 1_796_104_800_000))
    source.close()
    return {"points": answer.samples.height, "baseline_mib": before}


def child(args: argparse.Namespace) -> None:
    recorded: list[tuple[str, list[tuple[str, str]]]] = []
    if args.record:
        record_requests(recorded)
    began = time.perf_counter()
    if args.part == "floor":
        out = run_floor(args.url, args.requests)
    elif args.part == "collector":
        out = run_collector(args.url, args.since, args.until, args.warehouse)
    elif args.part == "gzip":
        out = run_collector(args.url, args.since, args.until, args.warehouse, headers=GZIP)
    elif args.part == "memory":
        out = run_memory(args.url)
    else:
        out = run_naive(args.url, args.since, args.until, args.warehouse)
    out["seconds"] = time.perf_counter() - began
    out["cpu_s"] = cpu_seconds()
    out["peak_rss_mib"] = peak_rss_mib()
    if args.record:
        args.requests.write_text(json.dumps(recorded))
    print(json.dumps(out))


def measure(
    server: PrometheusServer, part: str, since: int, until: int, workdir: Path, record: bool = False,
    base: Path | None = None,
) -> dict[str, Any]:
    """Run one part in its own process (from the checkout `base`, when given); add the CPU seconds Prometheus
    spent serving it."""
    assert server.proc is not None
    url = server.url
    served = server_cpu_seconds(server.proc.pid)
    warehouse = workdir / f"{part}{'-base' if base else ''}.duckdb"
    warehouse.unlink(missing_ok=True)
    Path(f"{warehouse}.snapshot").unlink(missing_ok=True)
    root = base or ROOT
    cmd = [
        sys.executable,
        str(root / "benchmarks" / "bench_prometheus.py"),
        "--part",
        part,
        "--url",
        url,
        "--since",
        str(since),
        "--until",
        str(until),
    ]
    cmd += ["--warehouse", str(warehouse), "--requests", str(workdir / "requests.json")]
    if record:
        cmd.append("--record")
    env = {**os.environ, "PYTHONPATH": str(root)}
    done = subprocess.run(cmd, capture_output=True, text=True, check=False, env=env)
    if done.returncode != 0:
        raise SystemExit(f"{part} failed:\n{done.stderr}")
    result: dict[str, Any] = json.loads(done.stdout.strip().splitlines()[-1])
    result["server_cpu_s"] = server_cpu_seconds(server.proc.pid) - served
    return result


def measure_memory(megabytes: int) -> None:
    """(d): the peak resident memory of reading one answer of `megabytes` MB, beside the answer's size: the
    answer size cap (prometheus.max_response_bytes) bounds memory only if reading costs a small multiple of it."""
    body = answer_of_size(megabytes)
    url, server = serve_answer(body)
    print(f"load average {' '.join(Path('/proc/loadavg').read_text().split()[:3])}", file=sys.stderr)
    try:
        cmd = [sys.executable, str(ROOT / "benchmarks" / "bench_prometheus.py"), "--part", "memory", "--url", url]
        done = subprocess.run(cmd, capture_output=True, text=True, check=False,
                              env={**os.environ, "PYTHONPATH": str(ROOT)})
        if done.returncode != 0:
            raise SystemExit(f"memory failed:\n{done.stderr}")
        r = json.loads(done.stdout.strip().splitlines()[-1])
        grown = r["peak_rss_mib"] - r["baseline_mib"]
        print(f"(d) one answer of {len(body) / 2**20:,.0f} MiB ({r['points']:,} points) read in {r['seconds']:.1f} s "
              f"({r['cpu_s']:.1f} CPU s): peak RSS {r['peak_rss_mib']:,.0f} MiB, {grown:,.0f} MiB over the "
              f"{r['baseline_mib']:,.0f} MiB before the request = {grown / (len(body) / 2**20):.2f}x the answer")
    finally:
        server.shutdown()


def _median(results: list[dict[str, Any]]) -> dict[str, Any]:
    """Each figure's median over the rounds (a part's rows are the same every round)."""
    return {k: statistics.median(r[k] for r in results) if isinstance(results[0][k], float) else results[0][k]
            for k in results[0]}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--gpus", type=int, default=512)
    parser.add_argument("--days", type=int, default=7)
    parser.add_argument("--workdir", type=Path, help="keep the backfilled data here (reused when present)")
    parser.add_argument("--prepare", action="store_true", help="only write and backfill the data set")
    parser.add_argument("--parts", default="floor,collector,gzip,naive",
                        help="the parts to run, in this order (default: all)")
    parser.add_argument("--base", type=Path, help="another checkout whose collector runs too, right after this one's "
                        "(b), on the same server: before and after side by side")
    parser.add_argument("--repeat", type=int, default=1, help="rounds of the parts; medians are shown")
    parser.add_argument("--memory", type=int, metavar="MB", help="only measure the peak memory of reading one "
                        "query_range answer of about MB megabytes from a local HTTP server (no Prometheus needed)")
    parser.add_argument("--part", choices=("floor", "collector", "gzip", "naive", "memory"), help=argparse.SUPPRESS)
    parser.add_argument("--url", help=argparse.SUPPRESS)
    parser.add_argument("--since", type=int, help=argparse.SUPPRESS)
    parser.add_argument("--until", type=int, help=argparse.SUPPRESS)
    parser.add_argument("--warehouse", help=argparse.SUPPRESS)
    parser.add_argument("--requests", type=Path, help=argparse.SUPPRESS)
    parser.add_argument("--record", action="store_true", help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.part:
        child(args)
        return
    if args.memory:
        measure_memory(args.memory)
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
    if args.prepare:
        return
    since = int((end - timedelta(days=args.days) + timedelta(minutes=1)).timestamp() * 1000)
    until = int(end.timestamp() * 1000)

    server = PrometheusServer(workdir / "data")
    server.start()
    load_before = Path("/proc/loadavg").read_text().split()[:3]
    try:
        # Warm the page cache and the server once, so that no part pays for the cold start; the
        # warm-up is a collector run that records its requests for the floor to replay.
        PrometheusSource(options(server.url)).series_count(["DCGM_FI_DEV_FB_USED"], since, until)
        measure(server, "collector", since, until, workdir, record=True)
        runs: dict[str, list[dict[str, Any]]] = {}
        for _ in range(args.repeat):
            for part in args.parts.split(","):
                runs.setdefault(part, []).append(measure(server, part, since, until, workdir))
                if part == "collector" and args.base:
                    runs.setdefault("base", []).append(measure(server, part, since, until, workdir, base=args.base))
        results = {part: _median(rs) for part, rs in runs.items()}
    finally:
        server.stop()
    load_after = Path("/proc/loadavg").read_text().split()[:3]

    values = args.gpus * args.days * 1440 * 3
    print(
        f"\n{args.gpus} GPUs x {args.days} days at 1 min = {values:,} metric values (busy, memory, power)\n"
    )
    # The machine may be shared: CPU seconds (the part's own process, and Prometheus serving it)
    # say what each part costs even when the wall-clock time includes waiting for a core.
    print(f"load average {' '.join(load_before)} before, {' '.join(load_after)} after\n")
    head = f"{'':34}{'seconds':>9}{'values/s':>12}{'CPU s':>8}{'server CPU s':>14}{'peak RSS MiB':>14}"
    print(head)
    labels = {
        "floor": "(a) Prometheus floor (raw HTTP)",
        "collector": "(b) preemptlens collector",
        "base": f"(b) from {args.base}" if args.base else "",
        "gzip": "(b') collector, gzip answers",
        "naive": "(c) api-client + DataFrame",
    }
    for part, label in labels.items():
        if part not in results:
            continue
        r = results[part]
        print(
            f"{label:34}{r['seconds']:>9.1f}{values / r['seconds']:>12,.0f}{r['cpu_s']:>8.1f}"
            f"{r['server_cpu_s']:>14.1f}{r['peak_rss_mib']:>14,.0f}"
        )
    secs = {p: r["seconds"] for p, r in results.items()}
    if {"collector", "naive"} <= secs.keys():
        print(f"\n(c)/(b) = {secs['naive'] / secs['collector']:.1f}x faster (target >= 5x)")
    if {"gzip", "naive"} <= secs.keys():
        print(f"(c)/(b') = {secs['naive'] / secs['gzip']:.1f}x faster")
    if {"collector", "floor"} <= secs.keys():
        print(f"(b)/(a) = {secs['collector'] / secs['floor']:.2f}x the floor (target <= 2x)")
    if {"base", "floor"} <= secs.keys():
        print(f"(b from {args.base})/(a) = {secs['base'] / secs['floor']:.2f}x the floor")
    if args.repeat > 1:
        each = "; ".join(p + " " + ", ".join(f"{r['seconds']:.1f}" for r in rs) + " s" for p, rs in runs.items())
        print(f"medians of {args.repeat} rounds (the parts in turn): {each}")
    if "collector" in results:
        print(f"collector rows stored: {results['collector']['stored']:,} (expected {args.gpus * args.days * 1440:,})")
    if not args.workdir:
        shutil.rmtree(workdir, ignore_errors=True)


if __name__ == "__main__":
    main()
