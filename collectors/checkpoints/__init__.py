"""Checkpoints and training progress from where jobs write them, without changing their code.

Streams (`checkpoints.streams`), each with its own watermark per cluster:
- `files` (files.py): checkpoint directories and files on shared storage, under configured roots,
  in the layouts frameworks write (layouts.py);
- `logs` (logs.py): a job's stdout and stderr files (the paths the scheduler recorded), read by byte
  offset, for the frameworks' "saved checkpoint", restore and step lines;
- `prometheus` (metrics.py): a metric holding a job's step and/or its last checkpoint's time (a job's
  exporter or a Pushgateway), attributed to jobs by its labels as GPU samples are;
- `annotations` and `pod_logs` (kubernetes.py): an annotation or label of Pods, Kueue Workloads or KAI
  PodGroups holding the last checkpoint's time or step, and pod logs through the API.

Every row is a `checkpoints` row (kind `checkpoint` or `progress`) whose `origin` names the stream and
the layout or preset (files:hf_trainer, log:megatron, prometheus, annotation) and whose `save_s` is how
long the save took where the source says. A path, a log or a label names a job only by where it ran: the
shell hands this collector the runs recorded over `lookback_hours` (contract.UsesRuns), and jobs.py
answers from them; run `collect slurm` or `collect kubernetes` before this collector. Loading twice
changes nothing (the natural key), and each stream's cursor is committed with its rows.

A step that goes back within one run (no restart between) is quarantined with both steps named, as is
anything not read: an unreadable file, a symlink (never followed), a path leaving its root, a line
longer than `max_line_bytes`, a line without a time.
"""

from __future__ import annotations

import argparse
import gc
import json
import logging
import math
import os
import re
from collections.abc import Iterator, Mapping
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from operator import attrgetter, itemgetter
from typing import Any, ClassVar

import polars as pl

from preemptlens.collectors.checkpoints.files import Cursor, Root, Walker, real_path, root_of, root_problem
from preemptlens.collectors.checkpoints.jobs import Point, Runs
from preemptlens.collectors.checkpoints.layouts import LAYOUTS
from preemptlens.collectors.checkpoints.logs import PRESETS, LogReader, dump_cursors, load_cursors, pattern_problem
from preemptlens.collectors.checkpoints.logs import patterns as log_patterns
from preemptlens.collectors.checkpoints.logs import zone_of as log_zone
from preemptlens.config import ClusterSettings, Config, duration_text, section, setting, time_zone
from preemptlens.contract import MAX_EPOCH_S, Batch, Reject, Watermark
from preemptlens.errors import ConfigError

log = logging.getLogger(__name__)

NAME = "checkpoints"
STREAMS = ("files", "logs", "prometheus", "annotations", "pod_logs")


def _list_of(check: Any) -> Any:
    def checked(value: Any) -> str | None:
        for i, item in enumerate(value):
            problem = check(item)
            if problem:
                return f"entry {i + 1}: {problem}"
        return None

    return checked


def _choices(known: tuple[str, ...]) -> Any:
    def checked(value: Any) -> str | None:
        wrong = [v for v in value if v not in known]
        return f"unknown {wrong}; choose from {', '.join(known)}" if wrong else None

    return checked


_METRIC_NAME = re.compile(r"[a-zA-Z_:][a-zA-Z0-9_:]{0,199}")
# A Kubernetes annotation or label key: an optional DNS-subdomain prefix and a name of at most 63 characters.
_OBJECT_KEY = re.compile(r"([a-z0-9]([-a-z0-9.]{0,251}[a-z0-9])?/)?[A-Za-z0-9]([-A-Za-z0-9_.]{0,61}[A-Za-z0-9])?")


def _metric_name(value: Any) -> str | None:
    if value == "" or (isinstance(value, str) and _METRIC_NAME.fullmatch(value)):
        return None
    return "expected a Prometheus metric name (letters, digits, _ and :), or empty"


def _object_key(value: Any) -> str | None:
    if value == "" or (isinstance(value, str) and _OBJECT_KEY.fullmatch(value)):
        return None
    return "expected a Kubernetes annotation or label key such as example.com/last-checkpoint, or empty"


def _positive(value: Any) -> str | None:
    return None if value > 0 else "must be > 0"


def _absolute(value: Any) -> str | None:
    return None if isinstance(value, str) and value.startswith("/") and value != "/" else (
        "must be an absolute path other than /")


@section("checkpoints", "The checkpoint collector (`preemptlens collect checkpoints`): checkpoints and steps from "
         "checkpoint files, training logs, Prometheus and Kubernetes annotations.")
@dataclass(frozen=True)
class CheckpointSettings:
    streams: list[str] = setting(["files", "logs"], f"Streams to read, any of: {', '.join(STREAMS)}.",
                                 check=_choices(STREAMS))
    roots: list[Any] = setting(
        [],
        'Where checkpoints are, each `{path = "/scratch/{user}/{job_id}"}` (a template of job_id, user, team, '
        'name: the job\'s directory) or `{path = "/lustre/*/runs", job = "work_dir"}` (a directory or glob; '
        "a match belongs to the jobs whose recorded working directory, or with \"stdout\" output file's "
        "directory, is it or a parent). Nothing outside a root's fixed part is read; symlinks are never followed.",
        check=_list_of(root_problem),
    )
    layouts: list[str] = setting(list(LAYOUTS), f"Checkpoint layouts looked for: {', '.join(LAYOUTS)}.",
                                 check=_choices(LAYOUTS))
    keras_filepaths: list[str] = setting(
        [], 'Keras ModelCheckpoint filepath templates jobs use, e.g. "ckpt-{epoch:02d}.keras" (the file name part '
        "is matched; {epoch} or {batch} is the step).")
    max_depth: int = setting(4, "Directory levels walked below a job's directory.", bounds=(1, 64))
    max_dirs: int = setting(2_000_000, "Most directories one pass walks; the rest waits for the next pass.",
                            bounds=(1, 1_000_000_000))
    lookback_hours: float = setting(
        168.0, "Jobs whose runs were on within this many hours are looked for (files, logs, annotations).",
        check=_positive)
    log_roots: list[str] = setting(
        [], "Directories under which a job's recorded stdout/stderr file may be read (stream logs); a path "
        "elsewhere is never read. Empty: no log file is read.", check=_list_of(_absolute))
    log_presets: list[str] = setting(list(PRESETS), f"Log line presets: {', '.join(PRESETS)}.",
                                     check=_choices(tuple(PRESETS)))
    log_checkpoint_pattern: str = setting(
        "", "A site's own regular expression of a completed-checkpoint line, with (?P<step>...) and optionally "
        "(?P<time>...).", check=pattern_problem)
    log_progress_pattern: str = setting(
        "", "A site's own regular expression of a step line, with (?P<step>...) and optionally (?P<time>...).",
        check=pattern_problem)
    log_timezone: str = setting("UTC", "Time zone of log timestamps that carry no offset.", check=time_zone)
    max_line_bytes: int = setting(65536, "Longest log line read; a longer one is skipped unread.",
                                  bounds=(256, 1 << 30))
    max_read_bytes: int = setting(
        256 << 20, "Most bytes read from one log file in one pass; the rest is read by the next pass.",
        bounds=(1 << 16, 1 << 40))
    step_metric: str = setting("", "Prometheus metric holding a job's training step (stream prometheus).",
                               check=_metric_name)
    checkpoint_time_metric: str = setting(
        "", "Prometheus metric holding the time (epoch seconds) of a job's last completed checkpoint.",
        check=_metric_name)
    checkpoint_step_metric: str = setting(
        "", "Prometheus metric holding the step of a job's last completed checkpoint (with checkpoint_time_metric).",
        check=_metric_name)
    metric_step: str = setting("15s", "Resolution of the metric queries (a Prometheus duration).",
                               check=duration_text(1, 86_400))
    metric_lag: str = setting("2m", "How far before the last cursor each metric query starts again (late samples).",
                              check=duration_text(0, 7 * 86_400))
    time_annotation: str = setting(
        "", "Annotation (or label) key holding the time of the object's last checkpoint (RFC 3339 or epoch "
        "seconds), on Pods, Kueue Workloads or KAI PodGroups.",
        check=_object_key)
    step_annotation: str = setting("", "Annotation (or label) key holding the step of the last checkpoint.",
                                   check=_object_key)
    annotation_objects: list[str] = setting(["pods", "workloads", "podgroups"],
                                            "Kubernetes objects whose annotations are read.",
                                            check=_choices(("pods", "workloads", "podgroups")))
    pod_log_bytes: int = setting(4 << 20, "Most bytes of one pod's log read through the API in one pass.",
                                 bounds=(1 << 10, 1 << 30))
    timeout_s: float = setting(60.0, "Time limit of one Kubernetes or Prometheus request.", check=_positive)


SETTINGS = CheckpointSettings

_FRAME_SCHEMA: dict[str, pl.DataType] = {
    "cluster": pl.String(), "job_id": pl.String(), "run": pl.Int32(), "time": pl.Datetime("us", "UTC"),
    "kind": pl.String(), "step": pl.Float64(), "save_s": pl.Float64(), "origin": pl.String(),
    "_record": pl.String(),
}


def _instants(seconds: list[float]) -> pl.Series:
    """Epoch seconds as UTC microseconds, rounded as datetime.fromtimestamp rounds them (the whole seconds, then the
    fraction's microseconds half to even), in one vectorised pass: a walk's first pass gives one per checkpoint."""
    s = pl.Series(seconds, dtype=pl.Float64)
    whole = s.floor()
    micros = ((s - whole) * 1e6).round(0, mode="half_to_even").cast(pl.Int64)
    return (whole.cast(pl.Int64) * 1_000_000 + micros).cast(pl.Datetime("us", "UTC"))


# A point's fields by position. Each column is taken in C with one of these: zip(*points) makes an iterator per
# point, and at a first pass's hundred thousand rows the cyclic collector's passes over those cost more than the
# columns do.
_COLUMNS = [itemgetter(i) for i in range(len(Point._fields))]


def frame(cluster: str, points: list[Point]) -> pl.DataFrame:
    if not points:
        return pl.DataFrame(schema=_FRAME_SCHEMA)
    job_id, run, time, kind, step, save_s, origin, record = (list(map(g, points)) for g in _COLUMNS)
    return pl.DataFrame(
        {
            "cluster": [cluster] * len(points),
            "job_id": job_id,
            "run": run,
            "time": _instants(time),
            "kind": kind,
            "step": step,
            "save_s": save_s,
            "origin": origin,
            "_record": record,
        },
        schema=_FRAME_SCHEMA,
    )


_time = attrgetter("time")
_step = attrgetter("step")
_job_id = attrgetter("job_id")


def _all_readable(points: list[Point]) -> bool:
    """Whether every point is readable, checked in C (a first pass has one point per checkpoint or log line found,
    and nearly always all are): a sum is finite only if no term is NaN or infinite, and then the smallest and largest
    time bound them all. False where that cannot tell (a sum that overflows, a time that is not a number): each
    point is then looked at alone."""
    times = list(map(_time, points))
    steps = [s for s in map(_step, points) if s is not None]
    try:
        return not times or (math.isfinite(sum(times)) and 0 <= min(times) and max(times) <= MAX_EPOCH_S
                             and math.isfinite(sum(steps)))
    except (OverflowError, TypeError):
        return False


def readable(points: list[Point], stream: str) -> tuple[list[Point], list[Reject]]:
    """Points whose time and step a frame can hold; the others quarantined (a log's or an annotation's value
    may be anything: a time in the year 58895 would fail the whole batch)."""
    if _all_readable(points):
        return points, []
    kept: list[Point] = []
    rejects: list[Reject] = []
    for p in points:
        if not (p.time == p.time and 0 <= p.time <= MAX_EPOCH_S):
            rejects.append(Reject("checkpoints", p.record, "time", f"{stream}: not a time: {p.time!r}"))
        elif p.step is not None and not math.isfinite(p.step):
            rejects.append(Reject("checkpoints", p.record, "step", f"{stream}: not a finite step: {p.step!r}"))
        else:
            kept.append(p)
    return kept, rejects


def monotonic(points: list[Point], last: dict[str, list[Any]], stream: str) -> tuple[list[Point], list[Reject]]:
    """Points whose step does not go back within their run, and the others quarantined.

    `last` holds each job's latest (run, step, time) from earlier passes and is updated: a step below the
    previous one of the same run, with no restart between, is a report the ledger cannot trust."""
    kept: list[Point] = []
    keep = kept.append
    rejects: list[Reject] = []
    # By job, then time: two stable sorts, each on keys of one type (list.sort compares floats and strings without
    # the generic comparison that a (job_id, time) tuple's elements take).
    for p in sorted(sorted(points, key=_time), key=_job_id):
        step = p.step
        if step is None:
            keep(p)
            continue
        job_id, run, time = p.job_id, p.run, p.time
        prev = last.get(job_id)
        if prev is not None and prev[0] == run and run is not None and step < prev[1] and time > prev[2]:
            rejects.append(Reject("checkpoints", p.record, "step",
                                  f"{stream}: step goes back from {prev[1]:g} to {step:g} within run {run} of job "
                                  f"{job_id} without a restart"))
            continue
        keep(p)
        if prev is None or time >= prev[2]:
            last[job_id] = [run, step, time]
    return kept, rejects


class CheckpointCollector:
    name: ClassVar[str] = NAME
    tables: ClassVar[tuple[str, ...]] = ("checkpoints",)

    def __init__(self, config: Config, cluster: str, streams: list[str]) -> None:
        self.config = config
        self.s = config.of(CheckpointSettings)
        self.cluster = cluster
        self.streams = streams
        self.runs = Runs()
        self.started = datetime.now(UTC)

    # -- contract.UsesRuns ------------------------------------------------------

    def runs_since(self) -> datetime:
        return self.started - timedelta(hours=self.s.lookback_hours)

    def use_runs(self, runs: pl.DataFrame, labels: pl.DataFrame) -> None:
        self.runs = Runs.from_frames(runs, labels)

    # -- batches ----------------------------------------------------------------

    def clusters(self) -> list[str]:
        if self.cluster:
            return [self.cluster]
        return sorted(self.runs.clusters())

    def batches(self, watermarks: Mapping[tuple[str, str], str]) -> Iterator[Batch]:
        clusters = self.clusters()
        if not clusters:
            log.warning("checkpoints: no recorded runs within checkpoints.lookback_hours: collect a scheduler "
                        "(slurm, kubernetes) first; nothing to look for")
            return
        for cluster in clusters:
            for stream in self.streams:
                yield from self._stream(stream, cluster, watermarks.get((cluster, stream)))

    def _stream(self, stream: str, cluster: str, cursor: str | None) -> Iterator[Batch]:
        state = _State.load(cursor)
        # A pass makes objects per directory entry, checkpoint and line found, none in a reference cycle and many kept
        # until the batch is built: cyclic collections, triggered by their count, would only rescan them (about a
        # tenth of a 100,000-directory first pass). Off while the batch is made, as the sacct decoder does.
        collecting = gc.isenabled()
        gc.disable()
        try:
            batch = self._pass(stream, cluster, state)
        finally:
            if collecting:
                gc.enable()
        yield batch

    def _pass(self, stream: str, cluster: str, state: _State) -> Batch:
        if stream == "files":
            points, rejects, state.data = self._files(cluster, state.data)
        elif stream == "logs":
            points, rejects, state.data = self._logs(cluster, state.data)
        elif stream == "prometheus":
            from preemptlens.collectors.checkpoints.metrics import collect_metrics

            points, rejects, state.data = collect_metrics(self.config, self.s, cluster, self.runs, state.data)
        else:
            from preemptlens.collectors.checkpoints.kubernetes import read_annotations, read_pod_logs

            reader = read_annotations if stream == "annotations" else read_pod_logs
            points, rejects, state.data = reader(self.config, self.s, cluster, self.runs, state.data)
        timed, untimed = readable(points, stream)
        kept, backwards = monotonic(timed, state.steps, stream)
        return Batch(source=NAME, frames={"checkpoints": frame(cluster, kept)},
                    rejects=rejects + untimed + backwards,
                    watermarks=[Watermark(NAME, cluster, stream, state.dump())])

    def _files(self, cluster: str, data: str | None) -> tuple[list[Point], list[Reject], str]:
        roots = [root_of(r) for r in self.s.roots]
        if not roots:
            raise ConfigError("checkpoints: stream files has no checkpoints.roots",
                              'add e.g. roots = [{path = "/scratch/{user}/{job_id}"}], or drop files from '
                              "checkpoints.streams")
        walker = Walker(roots, list(self.s.layouts), list(self.s.keras_filepaths), self.s.max_depth, self.s.max_dirs)
        scan, cursor = walker.scan(cluster, self.runs, Cursor.load(data))
        log.info("checkpoints files: %d directories looked at, %d listed, %d checkpoint(s) new",
                 scan.dirs_seen, scan.dirs_listed, len(scan.rows))
        return scan.rows, scan.rejects, cursor.dump()

    def _logs(self, cluster: str, data: str | None) -> tuple[list[Point], list[Reject], str]:
        if not self.s.log_roots:
            raise ConfigError("checkpoints: stream logs has no checkpoints.log_roots",
                              "name the directories job output files may be read from, or drop logs from "
                              "checkpoints.streams")
        reader = LogReader(log_patterns(self.s.log_presets, self.s.log_checkpoint_pattern,
                                        self.s.log_progress_pattern),
                           log_zone(self.s.log_timezone), self.s.max_line_bytes, self.s.max_read_bytes)
        cursors = load_cursors(data)
        roots = [Root(r.rstrip("/"), "path") for r in self.s.log_roots]
        points: list[Point] = []
        rejects: list[Reject] = []
        kept = {}
        for path, job_id, owner in self._log_files(cluster, roots, rejects):
            read, cursor = reader.read(path, cursors.get(path), owner)
            rejects.extend(read.rejects)
            if cursor is not None:
                kept[path] = cursor
            for line in read.lines:
                points.append(Point(job_id, self.runs.run_at(cluster, job_id, line.time), line.time, line.kind,
                                    line.step, line.save_s, line.origin, f"{path}:{line.record.rsplit('@', 1)[-1]}"))
        return points, rejects, dump_cursors(kept)

    def _log_files(self, cluster: str, roots: list[Root],
                   rejects: list[Reject]) -> Iterator[tuple[str, str, int]]:
        """Each recorded job's log files that lie under log_roots (their real paths too), with the uid of the job's
        user: a file is read only if it is that user's own (LogReader.read checks the open file)."""
        seen: set[str] = set()
        bases = [os.path.realpath(r.path).rstrip("/") + "/" for r in roots]
        folders: dict[str, str] = {}
        elsewhere = 0
        for (c, job_id), job in sorted(self.runs.jobs.items()):
            if c != cluster:
                continue
            uid = self.runs.uid(job)
            for path in job.output_files():
                if path in seen:
                    continue
                seen.add(path)
                real = real_path(path, folders)
                if any(real.startswith(b) for b in bases):
                    if uid is None:
                        rejects.append(Reject("checkpoints", path, "user",
                                              f"the job's user {job.user!r} is not a user of this host: its log is "
                                              "not read (whose file it is cannot be checked)"))
                        continue
                    yield path, job_id, uid
                elif any(os.path.normpath(path).startswith(r.path + "/") for r in roots):
                    rejects.append(Reject("checkpoints", path, "path",
                                          "leaves checkpoints.log_roots through a symlink: not read"))
                else:
                    elsewhere += 1
        if elsewhere:
            log.info("checkpoints logs: %d job output file(s) lie outside checkpoints.log_roots: not read", elsewhere)


@dataclass
class _State:
    """A stream's cursor: the stream's own data and each job's last (run, step, time) for the monotonic check."""

    data: str | None
    steps: dict[str, list[Any]]

    @staticmethod
    def load(text: str | None) -> _State:
        if not text:
            return _State(None, {})
        try:
            parsed = json.loads(text)
            return _State(parsed.get("data"), dict(parsed.get("steps") or {}))
        except (ValueError, AttributeError, TypeError):
            return _State(None, {})

    def dump(self) -> str:
        return json.dumps({"data": self.data, "steps": self.steps}, separators=(",", ":"))


# -- command line ------------------------------------------------------------------


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--stream", action="append", dest="streams", choices=STREAMS,
                        help="stream to read; repeat for several (overrides checkpoints.streams)")


def build(args: argparse.Namespace, config: Config) -> CheckpointCollector:
    settings = config.of(CheckpointSettings)
    streams = getattr(args, "streams", None) or list(settings.streams)
    try:
        log_zone(settings.log_timezone)
    except (KeyError, ValueError):
        raise ConfigError(f"checkpoints.log_timezone: unknown time zone {settings.log_timezone!r}") from None
    return CheckpointCollector(config, config.of(ClusterSettings).name, streams)
