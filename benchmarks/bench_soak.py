"""Soak: `preemptlens serve` with every job on, for --minutes (30 by default), against real sources and a
misbehaving receiver: a local Prometheus backfilled with 12 hours of DCGM history, the fake Kubernetes API
server with events arriving all the time, the real single-node Slurm (jobs submitted and preempted all the
way through), and a webhook receiver that answers one byte every half second and never finishes. Every 10 s
it samples serve's resident memory and open file descriptors and scrapes /metrics; the log says when a job
started late (the one worker was busy) and how each job ended.

Printed side by side: the first minute, the last minute and the whole run (memory, descriptors, the latest
job start), then each job's runs and failures, and how long serve took to stop on SIGTERM. Memory and
descriptors should stay flat and job lateness bounded: a slow receiver costs one timeout per alerts round.

    python benchmarks/bench_soak.py --minutes 30

Needs root (Slurm's daemons) and the system packages tests/run.sh installs.
"""

from __future__ import annotations

import argparse
import os
import re
import shutil
import signal
import subprocess
import sys
import tempfile
import threading
import time
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path

import requests

ROOT = Path(__file__).resolve().parents[1]
for folder in (ROOT, ROOT / "tests" / "slurm", ROOT / "tests" / "kubernetes"):
    sys.path.insert(0, str(folder))

from k8s_fake import FakeApiServer, load_case  # noqa: E402
from slurm_harness import SlurmCluster  # noqa: E402

from tests.hostile_peers import Drip  # noqa: E402
from tests.prometheus.conftest import PrometheusServer, backfill, free_port  # noqa: E402
from tests.prometheus.groundtruth import STYLES, history_end, raw_samples  # noqa: E402
from tests.prometheus.openmetrics import write_openmetrics  # noqa: E402

EVENTS = "/api/v1/events"
PODS = "/api/v1/pods"
WORKLOADS = "/apis/kueue.x-k8s.io/v1beta1/workloads"
INTERVAL_S = 30
_STAMP = re.compile(r"^(\d{4}-\d\d-\d\d \d\d:\d\d:\d\d),\d+ ")
_LATE = re.compile(r"job (\S+) started ([\d.]+) s after its time")
_DONE = re.compile(r"job (\S+) done in ([\d.]+) s")
_FAILED = re.compile(r"job (\S+) failed")


@dataclass
class Sample:
    at: float
    rss_mib: float
    fds: int
    scrape_s: float | None


@dataclass
class Feeds:
    stop: threading.Event = field(default_factory=threading.Event)
    submitted: int = 0
    events: int = 0


def rss_mib(pid: int) -> float:
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            return int(line.split()[1]) / 1024
    return 0.0


def fds(pid: int) -> int:
    return len(os.listdir(f"/proc/{pid}/fd"))


def start_prometheus(root: Path) -> PrometheusServer:
    om = root / "dcgm.om.txt"
    write_openmetrics(raw_samples(history_end(), 12), om, STYLES)
    backfill(om, root / "prom" / "data")
    server = PrometheusServer(root / "prom" / "data")
    server.start()
    return server


def feed_kubernetes(api: FakeApiServer, feeds: Feeds) -> None:
    """A new preemption event every few seconds, as a busy cluster's scheduler writes them."""
    template = load_case("events_core_v1.json")["items"][0]
    n = 0
    while not feeds.stop.wait(3):
        n += 1
        event = {**template, "metadata": {**template["metadata"], "name": f"soak-{n}", "uid": f"soak-uid-{n}",
                                          "creationTimestamp": datetime.now(UTC).strftime("%Y-%m-%dT%H:%M:%SZ")}}
        event["lastTimestamp"] = event["firstTimestamp"] = event["metadata"]["creationTimestamp"]
        api.add(EVENTS, event)
        feeds.events += 1


def feed_slurm(slurm: SlurmCluster, feeds: Feeds) -> None:
    """A low job holding every GPU, then a high one that preempts it, over and over."""
    out = slurm.root / "jobs"
    while not feeds.stop.is_set():
        try:
            slurm.sbatch("-p", "low", "-A", "vision", "--gres=gpu:8", "-c", "1", f"--output={out}/%j.out",
                         script="sleep 120")
            if feeds.stop.wait(25):
                return
            slurm.sbatch("-p", "high", "-A", "speech", "--gres=gpu:8", "-c", "1", f"--output={out}/%j.out",
                         script="sleep 20")
            feeds.submitted += 2
        except Exception as exc:  # noqa: BLE001 -- a busy controller refusing a job does not end the soak
            print(f"  (sbatch: {exc})", file=sys.stderr)
        feeds.stop.wait(35)


def config_text(root: Path, prom: PrometheusServer, api: FakeApiServer, slurm: SlurmCluster, metrics_port: int,
                dashboard_port: int) -> str:
    return f"""
[warehouse]
path = "{root / 'w.duckdb'}"
[cluster]
name = "plens"
tiers = {{ high = "high", low = "low", "batch-low" = "low", "inference-critical" = "critical" }}
[prometheus]
url = "{prom.url}"
initial_window = "1d"
[slurm]
slurm_conf = "{slurm.conf}"
ctld_log = "{slurm.ctld_log}"
lookback_hours = 2
window_hours = 1
[kubernetes]
api_url = "{api.url}"
streams = ["events", "pods", "workloads"]
watch_seconds = 10
idle_seconds = 2
[alerts]
rules = ["victim_notice", "cost_exceeds_gain", "scope_creep", "idle_hoarding"]
webhook_url = {{ "$env" = "SOAK_WEBHOOK" }}
team_webhooks = {{ vision = {{ "$env" = "SOAK_WEBHOOK" }}, speech = {{ "$env" = "SOAK_WEBHOOK" }} }}
timeout_s = 5
round_s = 20
lookback_s = 86400
[live_cost]
interval_s = {INTERVAL_S}
[kueue_boost]
enabled = true
mode = "dry-run"
[serve]
jobs = ["collect", "analyze", "alerts", "cost", "actions", "report", "dashboard"]
collect = ["prometheus --no-progress", "slurm", "kubernetes"]
collect_interval_s = {INTERVAL_S}
analyze_interval_s = {2 * INTERVAL_S}
alerts_interval_s = {INTERVAL_S}
actions_interval_s = {2 * INTERVAL_S}
report_cron = "*/5 * * * *"
metrics_port = {metrics_port}
[dashboard]
port = {dashboard_port}
[report]
folder = "{root / 'reports'}"
"""


def window(samples: list[Sample], start: float, end: float) -> list[Sample]:
    return [s for s in samples if start <= s.at < end]


def lateness(log: Path, began: float, start: float, end: float) -> float:
    """The latest start (seconds after its time) of a job in [start, end) seconds of the run."""
    worst = 0.0
    for line in log.read_text(errors="replace").splitlines():
        stamp, late = _STAMP.match(line), _LATE.search(line)
        if stamp and late:
            at = datetime.strptime(stamp.group(1), "%Y-%m-%d %H:%M:%S").replace(tzinfo=UTC).timestamp() - began
            if start <= at < end:
                worst = max(worst, float(late.group(2)))
    return worst


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--minutes", type=float, default=30.0, help="how long serve runs (default 30)")
    parser.add_argument("--sample-s", type=float, default=10.0, help="seconds between samples (default 10)")
    parser.add_argument("--keep", action="store_true", help="keep the working folder")
    args = parser.parse_args()
    if os.geteuid() != 0:
        print("bench_soak: needs root (the Slurm daemons)", file=sys.stderr)
        return 2
    root = Path(tempfile.mkdtemp(prefix="preemptlens-soak-"))
    feeds = Feeds()
    threads: list[threading.Thread] = []
    prom = api = slurm = serve = None
    receiver = Drip(interval=0.5)
    try:
        print(f"== setting up in {root} (Prometheus, fake API server, Slurm, a dripping webhook receiver)",
              flush=True)
        prom = start_prometheus(root)
        api = FakeApiServer().start()
        api.add(EVENTS, *load_case("events_core_v1.json")["items"])
        api.add(PODS, *load_case("pods.json")["items"])
        api.add(WORKLOADS, *load_case("workloads_v1beta1.json")["items"])
        slurm = SlurmCluster(root / "slurm")
        slurm.start()
        metrics_port, dashboard_port = free_port(), free_port()
        config = root / "preemptlens.toml"
        config.write_text(config_text(root, prom, api, slurm, metrics_port, dashboard_port))
        config.chmod(0o600)
        for target, feeder in ((feed_kubernetes, api), (feed_slurm, slurm)):
            thread = threading.Thread(target=target, args=(feeder, feeds), daemon=True)
            thread.start()
            threads.append(thread)
        env = {**os.environ, "PYTHONPATH": str(ROOT), "SOAK_WEBHOOK": f"{receiver.url}/hook",
               "SLURM_CONF": str(slurm.conf)}
        log = root / "serve.log"
        with log.open("wb") as out:
            serve = subprocess.Popen([sys.executable, "-m", "preemptlens.cli", "--config", str(config), "serve"],
                                     cwd=root, env=env, stdout=out, stderr=subprocess.STDOUT)
        began = time.time()
        samples: list[Sample] = []
        end = began + args.minutes * 60
        print(f"== serve (pid {serve.pid}) for {args.minutes:g} min; sampling every {args.sample_s:g} s", flush=True)
        while time.time() < end:
            if serve.poll() is not None:
                print(f"serve exited with {serve.returncode}; see {log}", file=sys.stderr)
                return 1
            t0 = time.monotonic()
            try:
                requests.get(f"http://127.0.0.1:{metrics_port}/metrics", timeout=10).raise_for_status()
                scrape: float | None = time.monotonic() - t0
            except requests.RequestException:
                scrape = None
            samples.append(Sample(time.time() - began, rss_mib(serve.pid), fds(serve.pid), scrape))
            time.sleep(max(0.0, args.sample_s - (time.monotonic() - t0)))
        took = args.minutes * 60
        stopping = time.monotonic()
        serve.send_signal(signal.SIGTERM)
        serve.wait(timeout=120)
        stopped = time.monotonic() - stopping

        first, last = window(samples, 0, 60), window(samples, took - 60, took + 1)

        def cell(rows: list[Sample], what: str) -> str:
            values = [getattr(s, what) for s in rows if getattr(s, what) is not None]
            if not values:
                return "-"
            return f"{min(values):,.1f}-{max(values):,.1f}" if what != "fds" else f"{min(values)}-{max(values)}"

        print()
        print(f"{'':28}{'first minute':>18}{'last minute':>18}{'whole run':>18}")
        for label, what in (("resident memory (MiB)", "rss_mib"), ("open file descriptors", "fds"),
                            ("/metrics scrape (s)", "scrape_s")):
            print(f"{label:28}{cell(first, what):>18}{cell(last, what):>18}{cell(samples, what):>18}")
        late = (lateness(log, began, 0, 60), lateness(log, began, took - 60, took + 1), lateness(log, began, 0, took))
        print(f"{'latest job start (s late)':28}{late[0]:>18.1f}{late[1]:>18.1f}{late[2]:>18.1f}")
        text = log.read_text(errors="replace")
        done: dict[str, int] = {}
        failed: dict[str, int] = {}
        for found, into in ((_DONE.findall(text), done), (_FAILED.findall(text), failed)):
            for match in found:
                name = match[0] if isinstance(match, tuple) else match
                into[name] = into.get(name, 0) + 1
        print()
        print(f"{'job':28}{'runs done':>12}{'failed':>10}")
        for name in sorted(set(done) | set(failed)):
            print(f"{name:28}{done.get(name, 0):>12}{failed.get(name, 0):>10}")
        print()
        print(f"Slurm jobs submitted {feeds.submitted}, Kubernetes events added {feeds.events}, "
              f"webhook connections {receiver.connections} (each cut at alerts.timeout_s = 5 s)")
        print(f"serve stopped {stopped:.1f} s after SIGTERM, exit status {serve.returncode}; log: {log}")
        return 0
    finally:
        feeds.stop.set()
        if serve is not None and serve.poll() is None:
            serve.kill()
        receiver.close()
        if slurm is not None:
            slurm.stop()
        if api is not None:
            api.stop()
        if prom is not None:
            prom.stop()
        if not args.keep:
            shutil.rmtree(root, ignore_errors=True)


if __name__ == "__main__":
    sys.exit(main())
