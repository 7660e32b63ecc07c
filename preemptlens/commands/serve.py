"""`preemptlens serve`: the long-running process.

APScheduler runs the jobs: collect (each configured collector) on an
interval, analyze on an interval, alerts on an interval, the live cost of
running jobs on an interval (live_cost.interval_s), the weekly report
on a cron schedule; the Streamlit dashboard runs beside them as a child
process, and Prometheus's /metrics (dashboards/metrics.py) on a thread. A job
whose module does not exist yet (analyze, report, the dashboard) is not
scheduled, and the start-up log says so.

Jobs run one at a time in one worker thread: DuckDB allows one writing
process, and each job opens the warehouse only while it runs, so a manual
`preemptlens import` can take its turn between jobs. After a job (and at most
every `serve.snapshot_interval_s` during a long collection) the snapshot that
readers use is published.

SIGTERM or Ctrl-C: no job starts any more, a running collection stops after
the batch it is loading has committed, and the process exits 0. A job that has
not finished within STOP_WAIT_S (an analyze of a large warehouse, a slow source)
is abandoned: the process exits anyway, its open transaction rolled back by
DuckDB, so that a stop never takes longer than a few seconds (systemd's
TimeoutStopSec, a Kubernetes grace period).
"""

from __future__ import annotations

import argparse
import contextlib
import functools
import importlib
import importlib.util
import logging
import os
import shlex
import signal
import subprocess
import threading
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from datetime import UTC, datetime
from types import FrameType, ModuleType
from typing import TYPE_CHECKING

from preemptlens.config import (
    Config,
    Secret,
    WarehouseSettings,
    cron_text,
    listen_address,
    section,
    setting,
)
from preemptlens.errors import ConfigError, PreemptlensError
from preemptlens.registry import SOURCES, command_module, source_module

# What serving needs (APScheduler, the metrics server, the warehouse, the other commands) is imported
# where it is used: load_config imports this module, for its settings, in every command.
if TYPE_CHECKING:
    from apscheduler.events import JobExecutionEvent
    from apscheduler.schedulers.background import BackgroundScheduler

    from preemptlens.analytics.actions import ActionSettings
    from preemptlens.contract import Effector
    from preemptlens.dashboards.metrics import MetricsServer
    from preemptlens.warehouse import Warehouse

log = logging.getLogger("preemptlens.serve")

JOBS = ("collect", "analyze", "alerts", "cost", "actions", "report", "dashboard")
# Seconds a stop waits for the running job to reach its next committed batch before it abandons it.
STOP_WAIT_S = 4.0
# A job starting this much after its time says so in the log.
LATE_S = 1.0


def listen_address_or_socket(value: object) -> str | None:
    """The check of serve.metrics_address: an IP address, localhost, or unix: and an absolute path."""
    text = str(value)
    if text.startswith("unix:"):
        path = text[len("unix:"):]
        if not path.startswith("/") or len(path.encode()) > 100 or "\0" in path:
            return "expected unix: and an absolute path of at most 100 bytes, e.g. unix:/run/preemptlens/metrics.sock"
        return None
    return listen_address(text)


@section("serve", "What `preemptlens serve` runs, and when (times in UTC).")
@dataclass(frozen=True)
class ServeSettings:
    jobs: list[str] = setting(
        list(JOBS),
        f"Jobs to run, from: {', '.join(JOBS)}. A job whose module is not installed is skipped with a log line.",
        choices=JOBS,
    )
    collect: list[str] = setting(
        [],
        "Collectors to run, each written as after `preemptlens collect`, e.g. \"slurm --cluster-name a\"; "
        "a dotted module path exposing add_arguments and build also works.",
    )
    collect_interval_s: float = setting(300.0, "Seconds between collections.", bounds=(1, 7 * 86_400))
    analyze_interval_s: float = setting(900.0, "Seconds between analytics refreshes.", bounds=(1, 7 * 86_400))
    alerts_interval_s: float = setting(
        300.0, "Seconds between alert evaluations and deliveries.",
        bounds=(1, 7 * 86_400),
    )
    actions_interval_s: float = setting(
        300.0,
        "Seconds between cycles of the enabled actions ([kueue_boost], [kai_protect], [slurm_protect]); "
        "the job is scheduled only when one is enabled.",
        bounds=(1, 7 * 86_400),
    )
    report_cron: str = setting(
        "0 6 * * 1", "Crontab line of the weekly report (default: Mondays 06:00 UTC).",
        check=cron_text,
    )
    metrics_port: int = setting(
        9464,
        "Port of the Prometheus /metrics endpoint (preemptlens's own figures, docs/metrics.md); 0 turns it off.",
        bounds=(0, 65_535),
    )
    metrics_address: str = setting(
        "127.0.0.1",
        "Address the /metrics endpoint listens on, or unix:/path for a Unix socket (its folder decides who may "
        "connect: docs/deploy.md); 0.0.0.0 exposes it to the network (docs/deploy.md puts it behind the "
        "dashboard's auth proxy instead).",
        check=listen_address_or_socket,
    )
    metrics_token: Secret | None = setting(
        None,
        "Bearer token every request to /metrics and /live-costs must then send (Prometheus: `authorization: "
        "{ credentials_file: ... }`); only such a request gets what names jobs (the costliest jobs' series, "
        "/live-costs). Unset: /metrics holds aggregates only and /live-costs is refused.",
    )
    snapshot_interval_s: float = setting(
        10.0,
        "During a long collection, publish the readers' snapshot at most this often (seconds); "
        "it is always published when a job ends.",
        bounds=(0, 86_400),
    )
    lock_wait_s: float = setting(
        60.0,
        "Seconds a job waits while another process writes the warehouse before it skips this run.",
        bounds=(0, 3600),
    )


SETTINGS = ServeSettings



def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--no-dashboard", action="store_true", help="do not start the dashboard")


class Server:
    """The jobs and their shared stop flag; `run` blocks until a stop signal."""

    def __init__(self, config: Config, *, dashboard: bool = True) -> None:
        self.config = config
        self.settings = config.of(ServeSettings)
        self.warehouse = config.of(WarehouseSettings).path
        self.stop = threading.Event()
        # Set while no job runs: what a stop waits for, at most STOP_WAIT_S.
        self.idle = threading.Event()
        self.idle.set()
        self.running: str | None = None
        # When each job last started, for the lateness its scheduler event reports (`_late`).
        self.started_at: dict[str, datetime] = {}
        self.dashboard = dashboard
        self._last_publish = 0.0
        unknown = [j for j in self.settings.jobs if j not in JOBS]
        if unknown:
            raise ConfigError(f"serve.jobs: unknown job(s) {unknown}", f"known jobs: {', '.join(JOBS)}")
        self.dashboard_options: list[str] | None = None
        self.action_settings: dict[str, ActionSettings] = {}
        self.effectors: dict[str, tuple[str, Effector]] | None = None
        if dashboard and "dashboard" in self.settings.jobs:
            from preemptlens.commands.dashboard import options
            from preemptlens.dashboards.data import DashboardSettings

            # `preemptlens dashboard`'s own options and port (dashboard.port), checked before any job starts:
            # one dashboard, one port, however it is started.
            self.dashboard_options = options(config, config.of(DashboardSettings).port)

    # -- the warehouse, one job at a time -----------------------------------

    @contextmanager
    def writer(self) -> Iterator[Warehouse | None]:
        """The warehouse opened for writing, or None if another process kept it past lock_wait_s."""
        import duckdb

        from preemptlens.analytics.lake import keep_current
        from preemptlens.warehouse import Warehouse

        deadline = time.monotonic() + self.settings.lock_wait_s
        delay = 0.1
        while True:
            try:
                wh = Warehouse(self.warehouse, future_slack_s=self.config.of(WarehouseSettings).future_slack_s)
                break
            except duckdb.IOException as exc:
                if "lock" not in str(exc).lower():
                    raise
                if time.monotonic() >= deadline or self.stop.is_set():
                    log.warning("warehouse %s is held by another process; skipping this run", self.warehouse)
                    yield None
                    return
                time.sleep(delay)
                delay = min(delay * 2, 2.0)
        try:
            yield wh
            keep_current(wh, self.config)
            self.publish(wh, force=True)
        finally:
            wh.close()

    def publish(self, wh: Warehouse, *, force: bool = False) -> None:
        if not force and time.monotonic() - self._last_publish < self.settings.snapshot_interval_s:
            return
        wh.publish()
        self._last_publish = time.monotonic()

    # -- jobs ---------------------------------------------------------------

    def _guarded(self, name: str, job: Callable[[], str]) -> Callable[[], None]:
        def run() -> None:
            if self.stop.is_set():
                return
            started = time.monotonic()
            self.started_at[name] = datetime.now(UTC)
            self.running = name
            self.idle.clear()
            try:
                outcome = job()
            except PreemptlensError as exc:
                log.error("job %s failed: %s", name, exc)
                return
            except Exception as exc:
                log.error("job %s failed: internal error (%s); the next run tries again", name, type(exc).__name__)
                log.debug("job %s", name, exc_info=True)
                return
            finally:
                self.running = None
                self.idle.set()
            log.info("job %s done in %.1f s: %s", name, time.monotonic() - started, outcome)

        return run

    def collect(self, spec: str) -> str:
        from preemptlens.cli import command_args
        from preemptlens.commands.collect import checked_batches, hand_runs

        name, *argv = shlex.split(spec)
        module = importlib.import_module(_source_module(spec))
        args = command_args(module, argv, prog=f"serve.collect {name}")
        collector = module.build(args, self.config)
        batches = rows = 0
        with self.writer() as wh:
            if wh is None:
                return "skipped"
            hand_runs(collector, wh)
            for batch in checked_batches(collector, wh.watermarks(collector.name)):
                report = wh.load_batch(batch)
                batches += 1
                rows += report.loaded
                if self.stop.is_set():
                    log.info("stopping: collection %s ends after its committed batch %d", name, batches)
                    break
                self.publish(wh)
        return f"{batches} batch(es), {rows} row(s) loaded"

    def command(self, name: str, module: ModuleType, argv: tuple[str, ...] = ()) -> str:
        from preemptlens.cli import command_args

        args = command_args(module, argv, prog=f"preemptlens {name}")
        status = int(module.run(args, self.config))
        with self.writer() as wh:
            if wh is None:
                return f"exit status {status}; snapshot not published"
        return f"exit status {status}"

    def alerts(self) -> str:
        import duckdb

        from preemptlens.analytics import alerts

        with self.writer() as wh:
            if wh is None:
                return "skipped"
            try:
                report = alerts.run(wh, self.config)
            except duckdb.CatalogException:
                # Not an error: the rules read the figures, which the first analyze (scheduled too) makes.
                return "waiting for the first analyze (no figures yet)"
        return f"{report.sent} sent, {report.failed} failed, {report.postponed} postponed to the next round"

    def cost(self) -> str:
        from preemptlens.analytics import livecost

        with self.writer() as wh:
            if wh is None:
                return "skipped"
            missing = livecost.missing_figures(wh)
            if missing:
                # Not an error: the first analyze has not run yet (it is scheduled before this job).
                return f"waiting for the first analyze (no {', '.join(missing)} yet)"
            done = livecost.compute(wh, datetime.now(UTC), self.config.of(livecost.LiveCostSettings))
        return f"{done.jobs} running job(s), {done.unknown} of unknown cost, {done.deleted} old row(s) deleted"
    def _open_enforced(self, read: Callable[[Warehouse], set[str]]) -> set[str]:
        """Actions whose enforced holds are open (all of them when the warehouse is busy and cannot tell):
        their effectors are needed to release those holds even when the actions are now off."""
        import duckdb

        from preemptlens.analytics.actions import ACTIONS
        from preemptlens.warehouse import Warehouse

        try:
            with Warehouse(self.warehouse, future_slack_s=self.config.of(WarehouseSettings).future_slack_s) as wh:
                return read(wh)
        except duckdb.IOException as exc:
            if "lock" not in str(exc).lower():
                raise
            return set(ACTIONS)

    def actions(self) -> str:
        from preemptlens.analytics import actions

        assert self.effectors is not None
        with self.writer() as wh:
            if wh is None:
                return "skipped"
            reports = actions.run(wh, self.action_settings, self.effectors, datetime.now(UTC))
        return "; ".join(r.summary() for r in reports)

    # -- schedule -----------------------------------------------------------

    def schedule(self, scheduler: BackgroundScheduler) -> list[str]:
        """Add the configured jobs whose code exists; return their ids."""
        from apscheduler.triggers.cron import CronTrigger
        from apscheduler.triggers.interval import IntervalTrigger

        wanted = set(self.settings.jobs)
        now = datetime.now(UTC)
        added: list[str] = []

        def every(job_id: str, seconds: float, job: Callable[[], str]) -> None:
            scheduler.add_job(
                self._guarded(job_id, job), IntervalTrigger(seconds=seconds), id=job_id, next_run_time=now
            )
            added.append(job_id)

        if "collect" in wanted:
            missing = [s for s in self.settings.collect if not _importable(_source_module(s))]
            if missing:
                raise ConfigError(
                    f"serve.collect: no collector module for {missing}",
                    f"sources: {', '.join(SOURCES)}, or a dotted module path exposing add_arguments and build",
                )
            for spec in self.settings.collect:
                interval = self.settings.collect_interval_s
                every(f"collect:{shlex.split(spec)[0]}", interval, functools.partial(self.collect, spec))
        if "analyze" in wanted:
            analyze = _command_module("analyze")
            if analyze is None:
                log.info("analyze: no `preemptlens analyze` in this installation; not scheduled")
            else:
                interval = self.settings.analyze_interval_s
                every("analyze", interval, functools.partial(self.command, "analyze", analyze))
        if "alerts" in wanted:
            every("alerts", self.settings.alerts_interval_s, self.alerts)
        if "cost" in wanted:
            from preemptlens.analytics import livecost

            every("cost", self.config.of(livecost.LiveCostSettings).interval_s, self.cost)
        if "actions" in wanted:
            from preemptlens.analytics import actions
            from preemptlens.commands.act import build_effectors

            self.action_settings = actions.settings_from(self.config)
            leftover = self._open_enforced(actions.open_enforced)
            if leftover or any(s.enabled for s in self.action_settings.values()):
                # Built once: an enforce action without its scheduler connection fails the start, not a job.
                self.effectors = build_effectors(self.config, self.action_settings, leftover)
                every("actions", self.settings.actions_interval_s, self.actions)
            else:
                log.info("actions: none enabled and no enforced hold open; not scheduled")
        if "report" in wanted:
            report = _command_module("report")
            if report is None:
                log.info("report: no `preemptlens report` in this installation; not scheduled")
            else:
                trigger = CronTrigger.from_crontab(self.settings.report_cron, timezone=UTC)
                # The week the calendar says, with data or not (a stalled collection shows as a week without).
                job = self._guarded("report", functools.partial(self.command, "report", report, ("--week", "last")))
                scheduler.add_job(job, trigger, id="report")
                added.append("report")
        return added

    def _late(self, event: JobExecutionEvent) -> None:
        """Say when a job started well after its time: the one worker was busy with another (serve's log is
        where a slow job shows up first; benchmarks/bench_soak.py reads these lines)."""
        started = self.started_at.get(event.job_id)
        if started is None or event.scheduled_run_time is None:
            return
        late = (started - event.scheduled_run_time).total_seconds()
        if late >= LATE_S:
            log.info("job %s started %.1f s after its time", event.job_id, late)

    def start_dashboard(self) -> subprocess.Popen[bytes] | None:
        from preemptlens.children import environment
        from preemptlens.commands.dashboard import APP, launch
        from preemptlens.dashboards.data import DashboardSettings

        if self.dashboard_options is None:
            return None
        # The dashboard reads the same configuration, and this warehouse even if it came from --warehouse.
        env = environment({**os.environ, "PREEMPTLENS_WAREHOUSE__PATH": self.warehouse})
        if self.config.path is not None:
            env["PREEMPTLENS_CONFIG"] = str(self.config.path)
        process = subprocess.Popen(launch(APP, *self.dashboard_options), env=env)
        settings = self.config.of(DashboardSettings)
        log.info("dashboard on http://%s:%s (pid %d)", settings.address, settings.port, process.pid)
        return process

    def start_metrics(self) -> MetricsServer | None:
        """Serve /metrics on its own thread; figures are read from the published snapshot only."""
        from preemptlens.dashboards.data import DashboardSettings
        from preemptlens.dashboards.metrics import MetricsServer, SnapshotCollector

        port = self.settings.metrics_port
        if port == 0:
            return None
        address = self.settings.metrics_address
        token = self.settings.metrics_token
        try:
            server = MetricsServer(SnapshotCollector.from_config(self.config), address, port,
                                   token=token.reveal() if token is not None else None,
                                   public_host=self.config.of(DashboardSettings).public_host)
        except ConfigError as exc:
            log.error("metrics: %s; serving continues without /metrics", exc)
            return None
        except OSError as exc:
            # Like a dashboard that dies: the jobs matter more than their monitoring, and Prometheus's `up` shows it.
            log.error(
                "metrics: cannot listen on %s:%d (%s); serving continues without /metrics "
                "(set serve.metrics_port to a free port, or 0)",
                address, port, exc.strerror or exc,
            )
            return None
        where = address if address.startswith("unix:") else f"{address}:{port}"
        log.info("metrics on %s/metrics%s", where, "" if token else " (aggregates only: no serve.metrics_token)")
        return server

    def run(self) -> int:
        from apscheduler.executors.pool import ThreadPoolExecutor
        from apscheduler.schedulers.background import BackgroundScheduler

        def on_signal(signum: int, frame: FrameType | None) -> None:
            del frame
            if self.stop.is_set():
                # A second signal: the operator does not want to wait for the running job at all.
                log.warning("%s again: exiting now", signal.Signals(signum).name)
                logging.shutdown()
                os._exit(1)
            log.info("%s: stopping after the running job's current batch", signal.Signals(signum).name)
            self.stop.set()

        previous = {s: signal.signal(s, on_signal) for s in (signal.SIGTERM, signal.SIGINT)}
        _raise_open_files_limit()
        scheduler = BackgroundScheduler(
            executors={"default": ThreadPoolExecutor(1)},
            job_defaults={"coalesce": True, "max_instances": 1, "misfire_grace_time": None},
            timezone=UTC,
        )
        dashboard = None
        metrics = None
        try:
            jobs = self.schedule(scheduler)
            if not jobs:
                raise ConfigError("serve: nothing to run", "set serve.jobs and serve.collect")
            log.info("serving: %s", ", ".join(jobs))
            from apscheduler.events import EVENT_JOB_EXECUTED

            scheduler.add_listener(self._late, EVENT_JOB_EXECUTED)
            scheduler.start()
            metrics = self.start_metrics()
            dashboard = self.start_dashboard()
            while not self.stop.wait(0.5):
                if dashboard is not None and dashboard.poll() is not None:
                    log.error("dashboard exited with status %s; serving continues without it", dashboard.returncode)
                    dashboard = None
        finally:
            self.stop.set()
            if scheduler.running:
                scheduler.shutdown(wait=False)
            # The running job stops after its current batch; one that does not within STOP_WAIT_S is left.
            abandoned = None if self.idle.wait(STOP_WAIT_S) else self.running
            if metrics is not None:
                metrics.stop()
            if dashboard is not None:
                dashboard.terminate()
                try:
                    dashboard.wait(timeout=STOP_WAIT_S)
                except subprocess.TimeoutExpired:
                    dashboard.kill()
            for sig, handler in previous.items():
                signal.signal(sig, handler)
        if abandoned is not None:
            log.warning("stopped without waiting for job %s (its uncommitted work is rolled back; committed "
                        "batches are kept)", abandoned)
            logging.shutdown()
            # Its thread would hold the interpreter's exit until it ends.
            os._exit(0)
        log.info("stopped")
        return 0


def _raise_open_files_limit() -> None:
    """The soft limit on open files up to the hard one: a listener's clients never starve the jobs' files."""
    import resource

    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    if hard == resource.RLIM_INFINITY or hard > soft:
        with contextlib.suppress(ValueError, OSError):
            resource.setrlimit(resource.RLIMIT_NOFILE, (min(hard, 65_536), hard))


def _importable(module_name: str) -> bool:
    try:
        return importlib.util.find_spec(module_name) is not None
    except ModuleNotFoundError:
        # find_spec raises instead of answering when a parent package is missing.
        return False


def _source_module(spec: str) -> str:
    return source_module(shlex.split(spec)[0])


def _command_module(name: str) -> ModuleType | None:
    module_name = command_module(name)
    if not _importable(module_name):
        return None
    return importlib.import_module(module_name)


def run(args: argparse.Namespace, config: Config) -> int:
    logging.getLogger("apscheduler").setLevel(logging.WARNING)
    return Server(config, dashboard=not args.no_dashboard).run()
