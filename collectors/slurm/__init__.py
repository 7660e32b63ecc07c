"""Slurm: job runs from sacct accounting and preemptors from the slurmctld log.

Two streams, each with its own watermark:
- `sacct`: time windows `[S, E)` of `sacct -X --json --duplicates
  --allusers` (or `--parsable2` where JSON is unavailable). The cursor is the
  E of the last window, which never passes the moment the collection began;
  the next window starts `lag_seconds` earlier, so a record that changed after
  it was first seen (a running job that ended, a row slurmdbd wrote late) is
  read again and replaces its row on the natural key.
- `log`: the byte offset in SlurmctldLogFile (`ctld_log`), see .log.

Besides jobs and job_runs, each started array task ("1230_4") and each
heterogeneous job component ("1233+1") gets a `job_aliases` row with its own
numeric id (1234): that id, $SLURM_JOB_ID and the cgroup's job_<id>, is what
the prolog and cgroup readers hand the GPU exporters, so samples carry it.

One accounting record is one run. Runs are numbered by submission order
among ALL records of a job: a window can start between two records of the
same job, so any job whose earliest record in the window was submitted
before the window began (or soon after: see _REQUEUE_GAP) has its whole
history read again with `sacct -j`, and its numbers do not depend on where
the window fell.
"""

from __future__ import annotations

import argparse
import hashlib
import json
import logging
import os
import shutil
import subprocess
import tempfile
from collections.abc import Iterator, Mapping
from contextlib import contextmanager
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import IO, Any, ClassVar, cast

import polars as pl

from preemptlens import outbound
from preemptlens.collectors.base import capacity_changes
from preemptlens.collectors.slurm import quotas
from preemptlens.collectors.slurm.log import LogCursor, read_log, zone_of
from preemptlens.collectors.slurm.policy import (
    PREEMPT_TYPES,
    QOS_FORMAT,
    Policy,
    cluster_name_from_config,
    config_values,
    parse_partitions,
    parse_qos,
    policy_rows,
    preempt_type_from_config,
)
from preemptlens.collectors.slurm.pools import Node, capacity, parse_nodes, pool_map
from preemptlens.collectors.slurm.sacct import (
    PARTITION_LIMIT,
    DocumentError,
    RecordError,
    SacctRecord,
    decode_run,
    is_text_header,
    iter_json_records,
    json_job_id,
    parse_json_record,
    parse_text_record,
    text_format_arg,
    version_of,
    whole_record,
)
from preemptlens.config import ClusterSettings, Config, parse_size, section, setting, size_text, time_zone
from preemptlens.contract import Batch, Reject, Watermark
from preemptlens.errors import ConfigError, SourceError
from preemptlens.private import others_can_change
from preemptlens.times import TIME_HELP, parse_when

log = logging.getLogger(__name__)


@section("slurm", "The Slurm collector (`preemptlens collect slurm`).")
@dataclass(frozen=True)
class SlurmSettings:
    bin_dir: str = setting("", "Directory holding sacct, scontrol and sacctmgr; empty means $PATH.")
    slurm_conf: str = setting("", "SLURM_CONF for the client commands; empty means the environment's.")
    format: str = setting(
        "auto",
        "sacct output to read: json, parsable2, or auto (JSON, else text).",
        choices=("auto", "json", "parsable2"),
    )
    ctld_log: str = setting(
        "",
        "Path of SlurmctldLogFile, read for victim-to-preemptor links; "
        "empty skips the links.",
    )
    log_timezone: str = setting(
        "UTC",
        "Time zone of the slurmctld log's timestamps when they carry "
        "no offset (the default LogTimeFormat prints local time).",
        check=time_zone,
    )
    lookback_hours: float = setting(168.0, "How far back the first collection reads.", bounds=(1, 87_840))
    lag_seconds: float = setting(
        600.0,
        "How far before the last cursor each collection starts again, "
        "to pick up records that changed or reached the database late.",
        bounds=(0, 7 * 86_400),
    )
    window_hours: float = setting(
        24.0,
        "Length of one sacct window; each is loaded and "
        "committed as one batch.",
        bounds=(0.1, 8760),
    )
    timeout_s: float = setting(
        600.0,
        "Time limit of one sacct, scontrol or sacctmgr run, its whole output read; it is killed then.",
        bounds=(1, 86_400),
    )
    max_output_bytes: str = setting(
        "4GB",
        "Most output read from one sacct, scontrol or sacctmgr run; a command that prints more is killed and "
        "its window is an error (lower slurm.window_hours).",
        check=size_text(2**20, 2**40),
    )
    preempt_type: str = setting(
        "auto",
        "How preemption is decided: partition_prio, qos, none, or "
        "auto (read PreemptType from `scontrol show config`).",
        choices=PREEMPT_TYPES,
    )
    read_policy: bool = setting(
        True,
        "Read partitions and QOS from scontrol and sacctmgr to derive tiers "
        "and preemptibility.",
    )
    preemptible: dict[str, Any] = setting(
        {},
        "Map from partition or QOS to true/false: may its jobs be preempted; "
        "overrides what Slurm says.",
    )
    pools: dict[str, Any] = setting(
        {},
        "Map from partition to GPU pool name; by default partitions that share a "
        "node are one pool, named after them (e.g. `high+low`).",
    )


SETTINGS = SlurmSettings

NAME = "slurm"
# Many ids per `sacct -j` keeps the argument list short and the calls few.
_HISTORY_IDS = 500
# A requeued run's record is submitted when slurmctld requeues the job, which
# is after the previous run's recorded end by up to the job's GraceTime and
# KillWait (a second when the job dies at once). A job whose first record in
# a window was submitted this soon after the window began may have a run that
# ended just before it, outside the window.
_REQUEUE_GAP = timedelta(minutes=10)


@dataclass
class Options:
    cluster: str
    bin_dir: str = ""
    slurm_conf: str = ""
    format: str = "auto"
    ctld_log: str = ""
    log_timezone: str = "UTC"
    lookback: timedelta = timedelta(hours=168)
    lag: timedelta = timedelta(seconds=600)
    window: timedelta = timedelta(hours=24)
    timeout_s: float = 600.0
    max_output_bytes: int = 4 * 10**9
    since: datetime | None = None
    until: datetime | None = None
    sacct_file: str | None = None
    policy: Policy = field(default_factory=Policy)
    read_policy: bool = True
    preempt_type: str = "auto"
    pools: Mapping[str, str] = field(default_factory=dict)


class SlurmCollector:
    name: ClassVar[str] = NAME
    tables: ClassVar[tuple[str, ...]] = ("pools", "jobs", "job_runs", "job_aliases", "preemption_links",
                                         "scheduler_policy", "scheduler_quotas")

    def __init__(self, options: Options) -> None:
        self.o = options
        self._format = options.format
        self._nodes: list[Node] = []
        self._pool_of: dict[str, str] = dict(options.pools)
        self._config_text: str | None = None

    # -- commands -----------------------------------------------------------

    def _env(self, epoch_times: bool = False) -> dict[str, str]:
        env = dict(os.environ)
        conf = checked_conf(self.o.slurm_conf)
        if conf:
            env["SLURM_CONF"] = conf
        # -S/-E are read as local time: make that UTC like everything here.
        env["TZ"] = "UTC"
        if epoch_times:
            # Text output then carries epoch seconds. Never for JSON: 22.05
            # re-parses -S/-E in that format and rejects its own output.
            env["SLURM_TIME_FORMAT"] = "%s"
        else:
            env.pop("SLURM_TIME_FORMAT", None)
        return env

    def _exe(self, tool: str) -> str:
        return program(self.o.bin_dir, tool)

    def _run(self, argv: list[str]) -> str:
        try:
            done = outbound.run([self._exe(argv[0]), *argv[1:]], env=self._env(), timeout_s=self.o.timeout_s,
                                limit=self.o.max_output_bytes)
        except FileNotFoundError:
            raise _missing(argv[0]) from None
        except subprocess.TimeoutExpired:
            raise SourceError(f"slurm: {argv[0]} did not answer within {self.o.timeout_s:g}s") from None
        except outbound.AnswerTooLarge as exc:
            raise SourceError(f"slurm: {exc}", "raise slurm.max_output_bytes") from None
        if done.returncode != 0:
            raise _failed(argv[0], done.returncode, done.stderr)
        return done.stdout

    @contextmanager
    def _sacct(self, args: list[str], fmt: str) -> Iterator[IO[Any]]:
        """Stream a sacct document; sacct's own failure is raised after reading."""
        argv = [self._exe("sacct"), "-X", "--duplicates", "--allusers", *args]
        argv += ["--json"] if fmt == "json" else ["--parsable2", "--noheader", text_format_arg()]
        with tempfile.TemporaryFile(mode="w+") as err:
            try:
                # A group of its own: killed at the deadline with whatever it started (outbound.kill).
                proc = subprocess.Popen(argv, env=self._env(epoch_times=fmt != "json"), stdout=subprocess.PIPE,
                                        stderr=err, stdin=subprocess.DEVNULL, text=fmt != "json", process_group=0)
            except FileNotFoundError:
                raise _missing("sacct") from None
            assert proc.stdout is not None
            # The whole run, its output read, within the time limit; at most max_output_bytes of it.
            killer = outbound.kill_at(proc, self.o.timeout_s)
            capped = outbound.Capped(proc.stdout, self.o.max_output_bytes, "sacct's output")
            try:
                try:
                    yield cast(IO[Any], capped)
                    while capped.read(1 << 20):  # drain, so sacct can exit
                        pass
                except outbound.AnswerTooLarge as exc:
                    outbound.kill(proc)
                    raise SourceError(f"slurm: {exc}", "lower slurm.window_hours or raise "
                                      "slurm.max_output_bytes") from None
            finally:
                proc.stdout.close()
                try:
                    code = proc.wait(timeout=max(1.0, self.o.timeout_s))
                except subprocess.TimeoutExpired:
                    outbound.kill(proc)
                    code = proc.wait()
                killer.cancel()
            if killer.fired:
                raise SourceError(f"slurm: sacct did not finish within {self.o.timeout_s:g}s",
                                  "lower slurm.window_hours or raise slurm.timeout_s")
            if code != 0:
                err.seek(0)
                raise _failed("sacct", code, err.read(65536))

    # -- policy -------------------------------------------------------------

    def _load_policy(self) -> None:
        p = self.o.policy
        wanted = self.o.preempt_type
        if not self.o.read_policy or self.o.sacct_file:
            if wanted != "auto":
                p.preempt_type = wanted
            return
        try:
            text = self._show_config()
            kind, mode = preempt_type_from_config(text)
            p.preempt_type = kind if wanted == "auto" else wanted
            p.global_mode = mode
            p.partitions = parse_partitions(self._run(["scontrol", "show", "partition", "-o"]))
            self._nodes = parse_nodes(self._run(["scontrol", "show", "node", "-o"]))
            self._pool_of = pool_map(self._nodes, self.o.pools)
            if p.preempt_type == "qos":
                p.qos = parse_qos(self._run(["sacctmgr", "-n", "-P", "show", "qos", QOS_FORMAT]))
            else:
                # A QOS's PreemptExemptTime holds whatever decides the victims; without slurmdbd there is none.
                try:
                    p.qos = parse_qos(self._run(["sacctmgr", "-n", "-P", "show", "qos", QOS_FORMAT]))
                except SourceError as exc:
                    log.info("slurm: no QOS read (%s); PreemptExemptTime is the global one", exc.message)
            p.config = config_values(text)
        except SourceError as exc:
            # Tiers then come from config alone; the runs are still worth reading.
            log.warning("slurm: cannot read partitions/QOS, tiers come from config only: %s", exc.message)

    def _show_config(self) -> str:
        if self._config_text is None:
            self._config_text = self._run(["scontrol", "show", "config"])
        return self._config_text

    def _name_cluster(self) -> None:
        """Without cluster.name, rows carry the ClusterName slurm.conf gives the cluster (a recorded document's:
        its records' own, see _file_batches)."""
        if self.o.cluster or self.o.sacct_file:
            return
        try:
            name = cluster_name_from_config(self._show_config())
        except SourceError as exc:
            raise SourceError(f"slurm: cluster.name is not set and {exc.message}",
                              "set cluster.name, or let this user run `scontrol show config`") from None
        if not name:
            raise ConfigError("slurm: cluster.name is not set and `scontrol show config` names no ClusterName",
                              "set cluster.name")
        self.o.cluster = name

    # -- batches ------------------------------------------------------------

    def batches(self, watermarks: Mapping[tuple[str, str], str]) -> Iterator[Batch]:
        self._name_cluster()
        self._load_policy()
        cursor = watermarks.get((self.o.cluster, "sacct"))
        if self._nodes:
            yield self._pools_batch(watermarks.get((self.o.cluster, "pools")), cursor)
        policy = self._policy_batch(watermarks.get((self.o.cluster, "policy")))
        if policy is not None:
            yield policy
        if self.o.read_policy and not self.o.sacct_file:
            yield from quotas.batches(self.o.cluster, self._run, NAME, watermarks.get((self.o.cluster, "quotas")))
        yield from self._sacct_batches(cursor)
        if self.o.ctld_log:
            yield self._log_batch(watermarks.get((self.o.cluster, "log")))

    def _windows(self, cursor: str | None) -> Iterator[tuple[datetime, datetime]]:
        now = datetime.now(UTC).replace(microsecond=0)
        end = self.o.until or now
        if self.o.since is not None:
            start = self.o.since
        elif cursor:
            start = datetime.fromisoformat(cursor) - self.o.lag
        else:
            start = end - self.o.lookback
        while start < end:
            stop = min(start + self.o.window, end)
            yield start, stop
            start = stop

    def _sacct_batches(self, cursor: str | None) -> Iterator[Batch]:
        if self.o.sacct_file:
            yield from self._file_batches(Path(self.o.sacct_file))
            return
        read_any = good = False
        first_problem = ""
        for start, stop in self._windows(cursor):
            read = self._read_window(start, stop)
            read_any = True
            good = good or read.count() > 0
            first_problem = first_problem or (read.rejects[0].reason if read.rejects else "")
            batch = self._pooled(build_batch(self.o.cluster, read, self.o.policy))
            # A window given by --until is a re-read of the past: the cursor stays.
            if self.o.until is None:
                batch.watermarks.append(Watermark(NAME, self.o.cluster, "sacct", stop.isoformat()))
            yield batch
        if not read_any:
            log.warning("slurm: nothing to read: the window starts at %s, not before its end (%s)",
                        self.o.since.isoformat() if self.o.since else "the cursor",
                        self.o.until.isoformat() if self.o.until else "now")
        elif not good and first_problem:
            raise SourceError(f"slurm: no sacct record could be read: {first_problem}",
                              "see the quarantine table for every record")

    def _read_window(self, start: datetime, stop: datetime) -> SacctRead:
        window = ["-S", _slurm_time(start), "-E", _slurm_time(stop)]
        read = self._read(window, f"sacct -S {_slurm_time(start)}")
        records = read.frame()
        # Jobs whose earlier records may lie before the window (see module doc).
        older = set(
            records.group_by("job_id").agg(pl.col("submit").min())
            .filter((pl.col("submit") < (start + _REQUEUE_GAP).timestamp())
                    & ~pl.col("job_id").str.contains("[", literal=True))
            ["job_id"].to_list()
        )
        if not older:
            return read
        whole = SacctRead([records.filter(~pl.col("job_id").is_in(sorted(older)))], read.rejects, read.bad_jobs)
        ordered = sorted(older)
        for i in range(0, len(ordered), _HISTORY_IDS):
            ids = ordered[i : i + _HISTORY_IDS]
            more = self._read(["-j", ",".join(ids)], "sacct -j")
            more.frames = [more.frame().filter(pl.col("job_id").is_in(ids))]
            whole.extend(more)
        return whole

    def _read(self, args: list[str], what: str) -> SacctRead:
        fmt = "json" if self._format == "auto" else self._format
        try:
            with self._sacct(args, fmt) as stream:
                return read_document(stream, fmt, what)
        except _JsonUnavailable:
            if self._format != "auto":
                raise
            log.info("slurm: sacct has no JSON output here; reading --parsable2")
            self._format = "parsable2"
            with self._sacct(args, "parsable2") as stream:
                return read_document(stream, "parsable2", what)

    def _file_batches(self, path: Path) -> Iterator[Batch]:
        fmt = "parsable2" if self._format == "parsable2" or path.suffix in (".txt", ".psv") else "json"
        try:
            with path.open("rb") if fmt == "json" else path.open(encoding="utf-8", errors="replace") as stream:
                read = read_document(stream, fmt, path.name)
        except OSError as exc:
            raise SourceError(f"slurm: cannot read {path}: {exc.strerror}") from None
        if self.o.cluster:
            yield self._pooled(build_batch(self.o.cluster, read, self.o.policy))
        else:
            yield from self._per_cluster(read, path)
        if not read.count() and read.rejects:
            # The quarantine above is committed; the run still fails, saying why.
            raise SourceError(f"slurm: nothing could be read from {path}: {read.rejects[0].reason}",
                              "see the quarantine table for every record")

    def _per_cluster(self, read: SacctRead, path: Path) -> Iterator[Batch]:
        """Without cluster.name, a recorded document's rows carry each record's own `cluster` (sacct -M lists
        several clusters' records in one document); one batch per cluster, the quarantined records in the first."""
        records = read.frame()
        unnamed = records.filter(pl.col("cluster").is_null())
        if unnamed.height:
            raise ConfigError(
                f"slurm: cluster.name is not set, and {unnamed.height} record(s) of {path} name no cluster (the first: "
                f"{unnamed['loc'][0]}; sacct --parsable2 output carries none)",
                "set cluster.name to the cluster's ClusterName, or record the document with sacct --json")
        names = sorted(records["cluster"].unique().to_list())
        if self.o.ctld_log and len(names) != 1:
            held = f"records of clusters {', '.join(names)}" if names else "no readable record"
            raise ConfigError(f"slurm: cluster.name is not set and {path} holds {held}: whose is the slurmctld log "
                              f"{self.o.ctld_log}?", "set cluster.name")
        if not names:
            # Nothing readable: what was quarantined is still stored (the collection then fails, saying why).
            yield build_batch("", read, self.o.policy)
        for i, name in enumerate(names):
            mine = SacctRead([records.filter(pl.col("cluster") == name)], read.rejects if i == 0 else [],
                             read.bad_jobs)
            yield self._pooled(build_batch(name, mine, self.o.policy))
        if len(names) == 1:
            # The slurmctld log read after the document is of the same cluster.
            self.o.cluster = names[0]
        log.info("slurm: cluster.name is not set; %s names its records' cluster%s %s", path,
                 "s" if len(names) > 1 else "", ", ".join(names))

    def _pooled(self, batch: Batch) -> Batch:
        """Jobs and runs name their pool (see slurm_pools), not their partition."""
        if self._pool_of:
            for table in ("jobs", "job_runs"):
                batch.frames[table] = batch.frames[table].with_columns(pl.col("pool").replace(self._pool_of))
        return batch

    def _pools_batch(self, cursor_text: str | None, sacct_cursor: str | None) -> Batch:
        windows = self._windows(sacct_cursor)
        first = next(windows, None)
        now = datetime.now(UTC).replace(microsecond=0)
        data_start = first[0] if first else now
        rows, cursor = capacity_changes(cursor_text, capacity(self._nodes, self._pool_of), data_start,
                                        None if self.o.until else now)
        frame = pl.DataFrame(
            {"cluster": [self.o.cluster] * len(rows), "pool": [r.pool for r in rows],
             "valid_from": [r.valid_from for r in rows], "gpus": [r.gpus for r in rows],
             "gpus_per_node": [r.gpus_per_node for r in rows],
             "_record": [f"pool {r.pool} from scontrol show node" for r in rows]},
            schema={"cluster": pl.String, "pool": pl.String, "valid_from": pl.Datetime("us", "UTC"),
                    "gpus": pl.Int32, "gpus_per_node": pl.Int32, "_record": pl.String},
        )
        return Batch(source=NAME, frames={"pools": frame},
                     watermarks=[Watermark(NAME, self.o.cluster, "pools", cursor)])

    def _policy_batch(self, cursor: str | None) -> Batch | None:
        """The preemption settings in force (policy.policy_rows), as one snapshot when they changed since the
        last one stored (the cursor is their digest)."""
        rows = policy_rows(self.o.policy)
        if not rows:
            return None
        digest = hashlib.sha256(json.dumps(rows).encode()).hexdigest()
        if digest == cursor:
            return None
        now = datetime.now(UTC)
        frame = pl.DataFrame(
            {"cluster": [self.o.cluster] * len(rows), "valid_from": [now] * len(rows),
             "scheduler": ["slurm"] * len(rows), "scope": [r[0] for r in rows], "subject": [r[1] for r in rows],
             "setting": [r[2] for r in rows], "value": [r[3] for r in rows], "raw": [r[4] for r in rows],
             "_record": [f"{r[0]} {r[1] or '(cluster)'} {r[2]} from scontrol/sacctmgr" for r in rows]},
            schema={"cluster": pl.String, "valid_from": pl.Datetime("us", "UTC"), "scheduler": pl.String,
                    "scope": pl.String, "subject": pl.String, "setting": pl.String, "value": pl.String,
                    "raw": pl.String, "_record": pl.String},
        )
        return Batch(source=NAME, frames={"scheduler_policy": frame},
                     watermarks=[Watermark(NAME, self.o.cluster, "policy", digest)])

    def _log_batch(self, cursor_text: str | None) -> Batch:
        path = Path(self.o.ctld_log)
        try:
            zone = zone_of(self.o.log_timezone)
        except (KeyError, ValueError):
            raise ConfigError(f"slurm.log_timezone: unknown time zone {self.o.log_timezone!r}") from None
        read = read_log(path, LogCursor.load(cursor_text), zone)
        rows = {
            "cluster": [self.o.cluster] * len(read.links),
            "victim_job_id": [lk.victim for lk in read.links],
            "time": [lk.time for lk in read.links],
            "preemptor_job_id": [lk.preemptor for lk in read.links],
            "reason": [lk.reason for lk in read.links],
            "_record": [lk.record for lk in read.links],
        }
        frame = pl.DataFrame(rows, schema={"cluster": pl.String, "victim_job_id": pl.String,
                                           "time": pl.Datetime("us", "UTC"), "preemptor_job_id": pl.String,
                                           "reason": pl.String, "_record": pl.String})
        rejects = [Reject("preemption_links", rec, "time", f"{path}: {why}", raw) for rec, why, raw in read.bad]
        return Batch(
            source=NAME,
            frames={"preemption_links": frame},
            rejects=rejects,
            watermarks=[Watermark(NAME, self.o.cluster, "log", read.cursor.dump())],
        )


class _JsonUnavailable(SourceError):
    pass


def program(bin_dir: str, tool: str) -> str:
    """The path of Slurm's `tool` (in `bin_dir`, else found on $PATH) to run, when no other user can change it or
    a folder above it: preemptlens often runs as root, and would run whatever they put there. A tool not found
    is returned as named, for the caller's FileNotFoundError."""
    found = str(Path(bin_dir) / tool) if bin_dir else shutil.which(tool)
    if found is None:
        return tool
    # The folder too, even sticky: there another user could add the program between this check and its run.
    problem = others_can_change(os.path.dirname(os.path.abspath(found)))
    if not problem and os.path.exists(found):
        problem = others_can_change(found)
    if problem:
        raise SourceError(f"slurm: refusing to run {found}: {problem}, so another user could choose what runs",
                          "set slurm.bin_dir to a folder owned by root (or the service's user) that only it can "
                          "write, holding Slurm's own programs")
    return found


def checked_conf(slurm_conf: str) -> str:
    """`slurm_conf` (else the environment's SLURM_CONF), when no other user can change it or a folder above it:
    the Slurm programs, run as root, load the plugins it names. Empty when neither is set (Slurm's default)."""
    path = slurm_conf or os.environ.get("SLURM_CONF", "")
    problem = others_can_change(path) if path else ""
    if problem:
        raise SourceError(f"slurm: refusing SLURM_CONF {path}: {problem}, so another user could choose what the "
                          "Slurm programs load", "keep slurm.conf owned by root and writable by it alone")
    return path


def _missing(tool: str) -> SourceError:
    return SourceError(f"slurm: {tool} not found", "install slurm-client, or set slurm.bin_dir")


# What sacct's stderr says, and what it means for the user.
_DIAGNOSES: tuple[tuple[tuple[str, ...], str, str], ...] = (
    (("munge",), "munge is not answering (authentication failed)", "start munged on this host"),
    (("permission denied", "access denied", "not authorized"), "permission denied",
     "run as a user allowed to read accounting (SlurmUser, root or an operator)"),
    (("slurmdbd", "connection refused", "unable to connect", "communication"),
     "the accounting daemon (slurmdbd) is unreachable", "check that slurmdbd runs and AccountingStorageHost"),
    (("slurm_conf", "slurm.conf", "could not establish a configuration"), "no Slurm configuration",
     "set slurm.slurm_conf to the cluster's slurm.conf"),
)


def _failed(tool: str, code: int, stderr: str) -> SourceError:
    text = stderr.strip()
    lowered = text.lower()
    if tool == "sacct" and ("json" in lowered or "data_parser" in lowered or "openapi" in lowered
                            or "unrecognized option" in lowered):
        return _JsonUnavailable(f"slurm: sacct cannot print JSON: {text[:300]}")
    for needles, what, hint in _DIAGNOSES:
        if any(n in lowered for n in needles):
            return SourceError(f"slurm: {tool} failed, {what}: {text[:300]}", hint)
    return SourceError(f"slurm: {tool} exited with status {code}: {text[:300] or 'no message'}")


def _slurm_time(when: datetime) -> str:
    return when.astimezone(UTC).strftime("%Y-%m-%dT%H:%M:%S")


# Columns of a read: where each record came from, then the SacctRecord fields.
_READ_SCHEMA: dict[str, pl.DataType] = {
    "loc": pl.String(), "job_id": pl.String(), "name": pl.String(), "account": pl.String(),
    "user": pl.String(), "partition": pl.String(), "qos": pl.String(), "priority": pl.Float64(),
    "state": pl.String(), "raw_state": pl.String(), "reason": pl.String(), "submit": pl.Int64(),
    "eligible": pl.Int64(), "start": pl.Int64(), "end": pl.Int64(), "gpus": pl.Int32(), "nodes": pl.String(),
    "restart_cnt": pl.Int64(), "alias": pl.String(), "work_dir": pl.String(), "stdout": pl.String(),
    "stderr": pl.String(), "cluster": pl.String(), "ended_by": pl.String(), "time_limit_s": pl.Float64(),
}
_RECORD_SCHEMA = {name: dtype for name, dtype in _READ_SCHEMA.items() if name != "loc"}
assert list(_RECORD_SCHEMA) == list(SacctRecord._fields)


@dataclass
class SacctRead:
    """Records of sacct documents with their locators, and what failed.

    The records are kept as polars frames of `_READ_SCHEMA`, one per run of
    records read together, so a 200,000-job read holds columns, not objects."""

    frames: list[pl.DataFrame] = field(default_factory=list)
    rejects: list[Reject] = field(default_factory=list)
    bad_jobs: set[str] = field(default_factory=set)

    def frame(self) -> pl.DataFrame:
        if not self.frames:
            return pl.DataFrame(schema=_READ_SCHEMA)
        if len(self.frames) > 1:
            self.frames = [pl.concat(self.frames, rechunk=True)]
        return self.frames[0]

    def count(self) -> int:
        return sum(f.height for f in self.frames)

    @property
    def records(self) -> list[tuple[str, SacctRecord]]:
        """Each record with its locator, as objects (for small reads and tests)."""
        return [(row[0], SacctRecord(*row[1:])) for row in self.frame().iter_rows()]

    def extend(self, other: SacctRead) -> None:
        self.frames.extend(other.frames)
        self.rejects.extend(other.rejects)
        self.bad_jobs |= other.bad_jobs


_UNSTORABLE = (UnicodeEncodeError, pl.exceptions.PolarsError, OverflowError)
# Records per frame: a frame's columns hold a run of records far more
# compactly than the records themselves.
_FRAME_ROWS = 8192


class _Collected:
    """Records of one document in document order: runs as columns as they
    come, single records gathered until the next run or `_FRAME_ROWS`."""

    def __init__(self, read: SacctRead, what: str) -> None:
        self.read = read
        self.what = what
        self.pending: list[tuple[int, SacctRecord]] = []

    def columns(self, first: int, columns: dict[str, list[Any]]) -> None:
        self.flush()
        size = len(columns["job_id"])
        try:
            frame = pl.DataFrame(columns, schema=_RECORD_SCHEMA)
        except _UNSTORABLE:
            # Some value cannot be held by its column: the records one by one find which.
            for j in range(size):
                self.record(first + j, SacctRecord(*(column[j] for column in columns.values())))
            return
        index = pl.int_range(first, first + size, dtype=pl.Int64)
        self.read.frames.append(frame.select(pl.format("{} record {}", pl.lit(self.what), index).alias("loc"),
                                             pl.all()))

    def record(self, index: int, rec: SacctRecord) -> None:
        self.pending.append((index, rec))
        if len(self.pending) >= _FRAME_ROWS:
            self.flush()

    def reject(self, index: int, exc: RecordError, shown: Any) -> None:
        """Record `index` quarantined naming the field, with `shown` (a text
        line, or a JSON record whole, not only the members the parser read)."""
        job = _job_of(shown)
        if job:
            self.read.bad_jobs.add(job)
        where = f"{self.what} record {index}" + (f" (JobId={job})" if job else "")
        self.read.rejects.append(Reject("job_runs", where, exc.field, exc.reason, _raw(shown)))

    def flush(self) -> None:
        if not self.pending:
            return
        rows = [(f"{self.what} record {i}", *rec) for i, rec in self.pending]
        self.pending = []
        try:
            self.read.frames.append(pl.DataFrame(rows, schema=_READ_SCHEMA, orient="row"))
            return
        except _UNSTORABLE:
            pass
        for row in rows:
            try:
                self.read.frames.append(pl.DataFrame([row], schema=_READ_SCHEMA, orient="row"))
            except _UNSTORABLE:
                # Half a surrogate pair escaped in the JSON (\ud800): no text column holds it.
                self.read.rejects.append(Reject("job_runs", row[0], "record",
                                                "a text value is not valid Unicode", repr(row)[:2000]))


def read_document(stream: IO[Any], fmt: str, what: str) -> SacctRead:
    """Records of one document: JSON from a binary or text stream, --parsable2 text from a text one."""
    read = SacctRead()
    out = _Collected(read, what)
    index = 0
    if fmt == "json":
        meta: dict[str, Any] = {}
        try:
            for run, bytes_of in iter_json_records(stream, meta):
                try:
                    out.columns(index + 1, decode_run(run))
                    index += len(run)
                    continue
                except RecordError:
                    pass  # read again a record at a time, to name each that fails
                for k, record in enumerate(run):
                    index += 1
                    try:
                        out.record(index, parse_json_record(record))
                    except RecordError as exc:
                        out.reject(index, exc, whole_record(bytes_of(k)))
        except DocumentError as exc:
            read.rejects.append(Reject("job_runs", f"{what}: jobs after record {index}", "document",
                                       f"{what} ({version_of(meta) or 'unknown format'}): {exc}"))
        out.flush()
        errors = [e for e in meta.get("errors") or [] if not _nothing_found(e)]
        if errors and not read.count():
            raise SourceError(f"slurm: {what} reported errors: {json.dumps(errors)[:300]}")
    else:
        for index, line in enumerate(stream, start=1):
            if line.strip() and not is_text_header(line):
                try:
                    out.record(index, parse_text_record(line))
                except RecordError as exc:
                    out.reject(index, exc, line)
        out.flush()
    return read

def _nothing_found(error: Any) -> bool:
    """22.05 reports an empty result as error 9003 "Nothing found"."""
    return isinstance(error, Mapping) and (error.get("error_number") == 9003
                                           or str(error.get("description", "")).startswith("Nothing found"))


def _job_of(item: Any) -> str | None:
    """The id of a record that failed, where it can still be told."""
    if isinstance(item, str):
        return item.split("|", 1)[0].strip() or None if "|" in item else None
    return json_job_id(item)


def _raw(item: Any) -> str:
    text = item if isinstance(item, str) else json.dumps(item, default=str)
    return text if len(text) <= 2000 else text[:1997] + "..."


def build_batch(cluster: str, read: SacctRead, policy: Policy) -> Batch:
    """jobs and job_runs rows from the records of whole jobs."""
    records = read.frame()
    out_rejects = list(read.rejects)
    if read.bad_jobs:
        # Numbering the rest would shift every later run: keep the job whole or not at all.
        bad = pl.col("job_id").is_in(sorted(read.bad_jobs))
        for loc, job_id in records.filter(bad).select("loc", "job_id").iter_rows():
            out_rejects.append(Reject("job_runs", f"{loc} (JobId={job_id})", "job_id",
                                      "another record of this job could not be read"))
        records = records.filter(~bad)
    # Runs in job order (of first appearance), then by submission within a job.
    # `_first` (the job's first record) keys each job by an integer; after the
    # sort a job's runs are adjacent, so a run's number is its distance from
    # the job's first row (a per-group int_range would be evaluated per job).
    runs = (
        records.with_row_index("_pos")
        .with_columns(pl.col("_pos").min().over("job_id").alias("_first"))
        .sort(["_first", pl.col("submit").fill_null(0), pl.col("start").fill_null(0), "_pos"])
        .with_row_index("_row")
        .with_columns((pl.col("_row") - pl.col("_row").min().over("_first") + 1).cast(pl.Int32).alias("run"))
    )
    # A job is described by its last run; its GPUs are the most any run had,
    # its submission the first.
    jobs = runs.group_by("_first", maintain_order=True).agg(
        pl.col("job_id", "name", "account", "user", "partition", "qos", "priority", "work_dir", "stdout",
               "stderr", "time_limit_s").last(),
        pl.col("gpus").max(),
        pl.col("submit").min(),
    )
    # Few distinct (partition, QOS) pairs: decide each pair's class, tier and preemptibility once.
    pairs = jobs.select("partition", "qos").unique().rows()
    decisions = []
    for partition, qos in pairs:
        klass = policy.priority_class(partition, qos)
        tier = policy.tier(klass)
        decisions.append((klass, tier, policy.preemptible(klass, tier)))
    decided = pl.DataFrame(
        [(*pair, *decision) for pair, decision in zip(pairs, decisions, strict=True)],
        schema={"partition": pl.String, "qos": pl.String, "priority_class": pl.String, "tier": pl.String,
                "preemptible": pl.Boolean},
        orient="row",
    )
    # "Partition_Limit": the job set none, its partition's DefaultTime or MaxTime applies (unknown when the
    # partitions were not read).
    partition_limits = {name: part.time_limit_s for name, part in policy.partitions.items()}
    limit = pl.when(pl.col("time_limit_s") == PARTITION_LIMIT).then(
        pl.col("partition").replace_strict(partition_limits, default=None, return_dtype=pl.Float64)
    ).otherwise(pl.col("time_limit_s"))
    jobs = jobs.with_columns(limit.alias("time_limit_s"))
    job_frame = jobs.join(decided, on=["partition", "qos"], how="left", nulls_equal=True,
                          maintain_order="left").select(
        pl.lit(cluster).alias("cluster"),
        "job_id",
        "name",
        pl.col("account").alias("team"),
        pl.col("user").alias("user_name"),
        "priority_class",
        pl.col("priority").alias("priority_value"),
        "tier",
        "preemptible",
        pl.col("partition").alias("pool"),
        "gpus",
        _epoch_time("submit").alias("submit_time"),
        "work_dir",
        pl.col("stdout").alias("stdout_path"),
        pl.col("stderr").alias("stderr_path"),
        pl.when(pl.col("time_limit_s").is_finite()).then(pl.col("time_limit_s")).alias("time_limit_s"),
        pl.when(pl.col("time_limit_s").is_not_null()).then(pl.col("time_limit_s").is_infinite())
        .alias("time_unlimited"),
        pl.concat_str(pl.lit("JobId="), "job_id").alias("_record"),
    )
    run_frame = runs.select(
        pl.lit(cluster).alias("cluster"),
        "job_id",
        "run",
        pl.col("partition").alias("pool"),
        pl.col("nodes").alias("hosts"),
        "gpus",
        *(_epoch_time(c).alias(f"{name}_time") for c, name in
          (("submit", "submit"), ("eligible", "eligible"), ("start", "start"), ("end", "end"))),
        "state",
        "reason",
        "ended_by",
        pl.col("restart_cnt").cast(pl.Int32).alias("restarts_before"),
        pl.format("JobId={} run {} ({})", "job_id", "run", "loc").alias("_record"),
    )
    # Samples labelled with an array task's own id find the task through these.
    alias_frame = (
        runs.filter(pl.col("alias").is_not_null())
        .select(pl.lit(cluster).alias("cluster"), "alias", "job_id")
        .unique(maintain_order=True)
        .with_columns(pl.format("JobId={} alias {}", "job_id", "alias").alias("_record"))
    )
    return Batch(source=NAME, frames={"jobs": job_frame, "job_runs": run_frame, "job_aliases": alias_frame},
                 rejects=out_rejects)


def _epoch_time(column: str) -> pl.Expr:
    return pl.from_epoch(pl.col(column), time_unit="s").dt.replace_time_zone("UTC")


# -- command line -----------------------------------------------------------


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--since", help=f"start of the window ({TIME_HELP}); "
                        "default: the last cursor minus slurm.lag_seconds")
    parser.add_argument("--until", help="end of the window, written as --since; default now. A window that "
                        "ends in the past does not move the cursor")
    parser.add_argument("--sacct-file", help="read a recorded sacct document (JSON, or --parsable2 text "
                        "named *.txt) instead of running sacct; without cluster.name a JSON document's rows carry "
                        "each record's own cluster")
    parser.add_argument("--format", choices=("auto", "json", "parsable2"), help="overrides slurm.format")


def _when(text: str | None, flag: str) -> datetime | None:
    return parse_when(text, flag) if text else None


def build(args: argparse.Namespace, config: Config) -> SlurmCollector:
    s = config.of(SlurmSettings)
    cluster = config.of(ClusterSettings)
    policy = Policy(
        tiers=dict(cluster.tiers),
        default_tier=cluster.default_tier,
        preemptible_tiers=tuple(cluster.preemptible_tiers),
        preemptible_override={k: bool(v) for k, v in s.preemptible.items()},
    )
    since, until = _when(getattr(args, "since", None), "--since"), _when(getattr(args, "until", None), "--until")
    if since is not None and until is not None and since > until:
        raise ConfigError(f"--since {args.since} is after --until {args.until}", "swap them")
    return SlurmCollector(Options(
        cluster=cluster.name,
        bin_dir=s.bin_dir,
        slurm_conf=s.slurm_conf,
        format=getattr(args, "format", None) or s.format,
        ctld_log=s.ctld_log,
        log_timezone=s.log_timezone,
        lookback=timedelta(hours=s.lookback_hours),
        lag=timedelta(seconds=s.lag_seconds),
        window=timedelta(hours=s.window_hours),
        timeout_s=s.timeout_s,
        max_output_bytes=parse_size(s.max_output_bytes) or Options.max_output_bytes,
        since=since,
        until=until,
        sacct_file=getattr(args, "sacct_file", None),
        policy=policy,
        read_policy=s.read_policy,
        preempt_type=s.preempt_type,
        pools={str(k): str(v) for k, v in s.pools.items()},
    ))
