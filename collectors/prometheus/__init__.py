"""GPU busy, memory and power from DCGM metrics in Prometheus (or Thanos, Mimir, VictoriaMetrics).

Every metric is downsampled on the server to the collection step: the value
at time t summarises the raw samples in (t - step, t] (`avg_over_time` for
busy and power, `max_over_time` for memory by default). The window is written
as step minus one millisecond because Prometheus 2.x range selectors include
their left edge and 3.x do not; with millisecond timestamps both then read
exactly (t - step, t], so no raw sample counts in two steps. Range selectors
also only see samples inside the window, so a series that stopped (a job that
ended; backfilled history has no staleness markers) adds no phantom points.

Range queries are paged: a page asks for at most `page_points` (<= 11,000)
points per series, and page i covers [t0 + i*N*step, t0 + (i*N + N - 1)*step]
so that no boundary point is read twice. A page asks for busy, memory and
power, and for the fallback busy metric only where the busy metric lacks
values, and for raw sample counts only where series share a GPU-step (see
`Staged`). Each page becomes one batch holding the three metrics of its
window in one gpu_samples frame, plus the watermarks (one per cluster and
metric) of that page, so a crash loses at most the page in flight and a
re-run resumes after the last committed page.

Multi-tenant backends (Thanos, Mimir, Cortex, VictoriaMetrics) speak the same
API with a few additions this module handles: the tenant header
(X-Scope-OrgID), bearer tokens, POST for queries too long for a URL, answers
that succeed with `warnings` (a partial response: some store or ingester did
not answer) and rate limiting (429 with Retry-After). The requests of several
pages are in flight at once, at most `concurrency` of them, but pages are
handed over strictly in order, so the watermark only ever moves forward.

The package, along its concerns: `labels` (the GPU and job a series
describes), `queries` (options and the PromQL sent), `source` (HTTP),
`answers` (reading an answer's body), `frames` (a page's gpu_samples rows);
the source itself (settings, CLI, the collector) is here.
"""

from __future__ import annotations

import argparse
import logging
import re
import sys
import time as clock
from collections import deque
from collections.abc import Iterator, Mapping
from concurrent.futures import Future, ThreadPoolExecutor
from dataclasses import replace
from typing import Any, ClassVar

import polars as pl

from preemptlens.collectors.prometheus.answers import (
    AnswerError,
    Problem,
    RangeAnswer,
    SeriesAnswer,
    range_result,
    series_result,
)
from preemptlens.collectors.prometheus.frames import (
    STREAMS,
    TABLE,
    PageParser,
    duplicated,
    page_frame,
    resolve,
)
from preemptlens.collectors.prometheus.labels import GpuSeries, job_of, normalise, series_key
from preemptlens.collectors.prometheus.queries import MAX_POINTS, Options, Staged, gpu_matchers, options_from
from preemptlens.collectors.prometheus.settings import NAME, PrometheusSettings
from preemptlens.collectors.prometheus.source import GET_MAX_URL, PrometheusSource, iso, redact_url
from preemptlens.config import (
    ClusterSettings,
    Config,
    duration_text,
    http_url,
    number_argument,
    text_argument,
)
from preemptlens.contract import Batch, Reject, Watermark
from preemptlens.errors import ConfigError, SourceError
from preemptlens.times import TIME_HELP, parse_when

__all__ = [
    "GET_MAX_URL",
    "MAX_POINTS",
    "NAME",
    "SETTINGS",
    "STREAMS",
    "TABLE",
    "AnswerError",
    "GpuSeries",
    "Options",
    "PageParser",
    "Problem",
    "PrometheusCollector",
    "PrometheusSettings",
    "PrometheusSource",
    "RangeAnswer",
    "SeriesAnswer",
    "Staged",
    "add_arguments",
    "build",
    "duplicated",
    "gpu_matchers",
    "iso",
    "job_of",
    "normalise",
    "options_from",
    "page_frame",
    "parse_time",
    "pinned_cluster",
    "plan_pages",
    "range_result",
    "redact_url",
    "resolve",
    "series_key",
    "series_result",
]

log = logging.getLogger(__name__)

# A page's series lookup of the busy fallback metric, beside its queries.
_FALLBACK_SERIES = "fallback series"


SETTINGS = PrometheusSettings


def parse_time(text: str, option: str) -> int:
    """A time as operators type it (preemptlens.times), in epoch milliseconds."""
    return round(parse_when(text, option).timestamp() * 1000)


def plan_pages(start_ms: int, end_ms: int, step_ms: int, points: int) -> list[tuple[int, int]]:
    """Inclusive [first, last] evaluation times of each page; consecutive pages share no point."""
    pages = []
    first = start_ms
    while first <= end_ms:
        last = min(first + (points - 1) * step_ms, end_ms)
        pages.append((first, last))
        first = last + step_ms
    return pages


class PrometheusCollector:
    name: ClassVar[str] = NAME
    tables: ClassVar[tuple[str, ...]] = (TABLE,)

    def __init__(
        self,
        opts: Options,
        since_ms: int | None = None,
        until_ms: int | None = None,
        progress: bool | None = None,
    ) -> None:
        self.opts = opts
        self.since_ms = since_ms
        self.until_ms = until_ms
        # None: a progress bar only when stderr is a terminal.
        self.progress = progress
        # Windows of the last run that came back partial: first, last, the server's warnings.
        self.partial: list[tuple[int, int, list[str]]] = []

    def _floor(self, ms: int) -> int:
        return ms - ms % self.opts.step_ms

    def _ceil(self, ms: int) -> int:
        return -(-ms // self.opts.step_ms) * self.opts.step_ms

    def window(self, watermarks: Mapping[tuple[str, str], str]) -> tuple[int, int, dict[str, int | None]]:
        """First and last evaluation time of this run, and each stream's committed cursor."""
        step = self.opts.step_ms
        now = round(clock.time() * 1000)
        until = self._floor(self.until_ms if self.until_ms is not None else now - self.opts.safety_lag_ms)
        cursors: dict[str, int | None] = {}
        for stream in STREAMS:
            text = watermarks.get((self.opts.cluster, stream))
            cursors[stream] = parse_time(text, f"watermark {stream}") if text else None
        if self.since_ms is not None:
            start = self._ceil(self.since_ms)
        else:
            starts = [
                c + step if c is not None else until - self.opts.initial_window_ms + step
                for c in cursors.values()
            ]
            start = self._ceil(min(starts))
        return start, until, cursors

    def batches(self, watermarks: Mapping[tuple[str, str], str]) -> Iterator[Batch]:
        from tqdm import tqdm

        start, until, cursors = self.window(watermarks)
        pages = plan_pages(start, until, self.opts.step_ms, self.opts.page_points)
        if not pages:
            if self.since_ms is not None and self.until_ms is None:
                log.warning(
                    "prometheus: nothing to collect yet: --since %s lies inside the safety lag "
                    "(prometheus.safety_lag = %gs; samples are collected up to %s)",
                    iso(self.since_ms), self.opts.safety_lag_ms / 1000, iso(until),
                )
            else:
                log.info("prometheus: nothing to collect, already up to %s", iso(until))
            return
        source = PrometheusSource(self.opts)
        # Every query of a page is one task; `concurrency` threads bound the requests in flight.
        # Pages are queued only a few ahead of the one being loaded, which bounds memory, and are
        # handed over in page order: a fetch error surfaces after the pages before it are loaded.
        pool = ThreadPoolExecutor(max_workers=self.opts.concurrency, thread_name_prefix="prometheus-fetch")
        # One thread turns the next page's answers into rows while the caller loads this one (the
        # parsers and the load spend much of their time outside the interpreter lock): pages are
        # built in order, at most one ahead of the page being loaded.
        builder = ThreadPoolExecutor(max_workers=1, thread_name_prefix="prometheus-build")
        ahead = -(-self.opts.concurrency // (len(self.opts.queries) + 1)) + 1
        queued: deque[tuple[dict[str, Future[Any]], int, int]] = deque()
        built: deque[Future[tuple[pl.DataFrame, list[Reject], list[str]]]] = deque()
        submitted = 0
        self.partial.clear()
        held = False

        def build(futures: dict[str, Future[Any]], first: int, last: int) -> tuple[
                pl.DataFrame, list[Reject], list[str]]:
            fetched = {stream: future.result() for stream, future in futures.items()}
            return self.build_page(pool, source, fetched, first, last)

        def top_up() -> None:
            nonlocal submitted
            while True:
                while submitted < len(pages) and len(queued) + len(built) < ahead + 1:
                    queued.append((self.submit_page(pool, source, *pages[submitted]), *pages[submitted]))
                    submitted += 1
                if not queued or len(built) >= 2:
                    return
                built.append(builder.submit(build, *queued.popleft()))

        try:
            if not self._check_series(source, start, until):
                return
            disable = None if self.progress is None else not self.progress
            bar = tqdm(total=len(pages), unit="page", disable=disable, file=sys.stderr)
            rows = 0
            began = clock.monotonic()
            with bar:
                for number, (first, last) in enumerate(pages, 1):
                    # Topped up before and after taking a page, so the workers stay busy and the next
                    # page is built while this one is loaded.
                    top_up()
                    frame, rejects, warnings = built.popleft().result()
                    top_up()
                    marks = []
                    if warnings:
                        # A partial answer (a store or ingester did not answer) still loads what came
                        # back, but no cursor moves past its window in this run, not even for later
                        # complete pages: the cursor is one point in time, so the next run re-collects
                        # from this window on, and the upsert fills in what was missing. A first run
                        # records where that is, or its re-run would start from a later initial window.
                        marks = [
                            Watermark(NAME, self.opts.cluster, stream, iso(first - self.opts.step_ms))
                            for stream in STREAMS
                            if cursors[stream] is None and not held
                        ]
                        held = True
                        self.partial.append((first, last, warnings))
                        log.warning(
                            "prometheus: %s answered [%s, %s] with warnings, so its rows may be incomplete: %s; "
                            "the watermark stays before this window, so the next run collects it again",
                            source.where,
                            iso(first),
                            iso(last),
                            "; ".join(warnings),
                        )
                    for stream in STREAMS if not held else ():
                        cursor = cursors[stream]
                        # A backfill moves a cursor only where it continues what is already collected.
                        if cursor is None or (first <= cursor + self.opts.step_ms and last > cursor):
                            marks.append(Watermark(NAME, self.opts.cluster, stream, iso(last)))
                            cursors[stream] = last
                    rows += frame.height
                    log.debug(
                        "prometheus: page %d/%d [%s, %s]: %d rows",
                        number,
                        len(pages),
                        iso(first),
                        iso(last),
                        rows,
                    )
                    yield Batch(source=NAME, frames={TABLE: frame}, rejects=rejects, watermarks=marks)
                    bar.update(1)
                    bar.set_postfix(
                        samples_s=f"{rows / max(clock.monotonic() - began, 1e-9):,.0f}", refresh=False
                    )
            if self.partial:
                log.warning(
                    "prometheus: %d of %d pages came back partial, from %s on; the next run collects "
                    "from there again",
                    len(self.partial),
                    len(pages),
                    iso(self.partial[0][0]),
                )
        finally:
            # The builder first: a page it is building waits on the fetch pool.
            builder.shutdown(wait=True, cancel_futures=True)
            pool.shutdown(wait=True, cancel_futures=True)
            source.close()

    def _check_series(self, source: PrometheusSource, start: int, until: int) -> bool:
        """Fail before any cursor moves when the busy metric has no series at all in the window:
        a wrong metric name or selector would otherwise commit an empty window as collected.
        False (said in one line) when the window ends before the metric's first sample: it
        cannot hold data, and the cursor stays where it is."""
        if not self.opts.known_metrics:
            return True
        matches = [f"{m}{{{self.opts.selector}}}" for m in self.opts.known_metrics]
        if source.series_count(matches, start - self.opts.step_ms, until) == 0:
            now = round(clock.time() * 1000)
            if until < now and source.series_count(matches, until, now) > 0:
                log.warning(
                    "prometheus: nothing to collect: the window [%s, %s] ends before the first scraped sample "
                    "of %s", iso(start), iso(until), " or ".join(matches),
                )
                return False
            raise SourceError(
                f"no series of {' or '.join(matches)} in Prometheus at {source.where} "
                f"over [{iso(start)}, {iso(until)}]; nothing was collected",
                "check prometheus.busy_metric and prometheus.selector against the server "
                '(e.g. count by (__name__)({__name__=~"DCGM.*"})), and that the window is within its retention',
            )
        return True

    def submit_page(
        self, pool: ThreadPoolExecutor, source: PrometheusSource, first: int, last: int
    ) -> dict[str, Future[Any]]:
        """The first requests of one page, queued on the pool; each worker reads its answer into compact
        columns as soon as it is in, so no page waits in memory as text."""
        staged = self.opts.staged
        queries = dict(self.opts.queries) if staged else {**self.opts.queries, "weight": self.opts.weight_query}
        futures: dict[str, Future[Any]] = {
            stream: pool.submit(source.read_range, stream, query, first, last)
            for stream, query in queries.items()
        }
        if staged is not None and staged.fallback_metric:
            match = [f"{staged.fallback_metric}{{{self.opts.selector}}}"]
            futures[_FALLBACK_SERIES] = pool.submit(source.series, match, first - self.opts.step_ms, last)
        return futures

    def build_page(
        self,
        pool: ThreadPoolExecutor,
        source: PrometheusSource,
        fetched: Mapping[str, Any],
        first: int,
        last: int,
    ) -> tuple[pl.DataFrame, list[Reject], list[str]]:
        """The page's rows from its first answers, asking for the fallback values and the
        weights first when the page needs them (see `Staged`)."""
        parser = PageParser(f"[{iso(first)}, {iso(last)}]")
        answers: dict[str, RangeAnswer] = {s: a for s, a in fetched.items() if s != _FALLBACK_SERIES}
        warnings = [w for answer in answers.values() for w in answer.warnings]
        staged = self.opts.staged

        def ask(stream: str, query: str) -> RangeAnswer:
            # Through the pool, so that no more than `concurrency` requests are in flight.
            answer = pool.submit(source.read_range, stream, query, first, last).result()
            warnings.extend(answer.warnings)
            return answer

        fill = None
        if staged is not None and _FALLBACK_SERIES in fetched:
            listed: SeriesAnswer = fetched[_FALLBACK_SERIES]
            warnings.extend(listed.warnings)
            lacking = self.lacking_busy(answers["busy"], listed, first, last)
            if lacking:
                fill = ask("busy fallback", staged.fill_query(gpu_matchers(lacking)))
        results = {}
        for stream in self.opts.queries:
            results[stream] = parser.points(answers[stream], stream)
            if stream == "busy" and fill is not None and staged is not None:
                scaled = parser.points(fill, stream).with_columns(pl.col("value") * staged.fallback_scale)
                results[stream] = pl.concat([results[stream], scaled])
        if staged is None:
            weights = parser.points(answers["weight"], "weight")
        else:
            shared = self.shared_series(parser, results)
            weights = pl.DataFrame(schema={"sid": pl.Int32, "t": pl.Int64, "value": pl.Float64})
            if shared:
                query = staged.weight_query(gpu_matchers(parser.labels[sid] for sid in shared))
                weights = parser.points(ask("weight", query), "weight")
        frame = page_frame(
            self.opts.cluster,
            parser,
            results,
            weights.rename({"value": "weight"}),
            self.opts.step_ms,
            self.opts.mem_aggregation,
        )
        return frame, list(parser.rejects.values()), list(dict.fromkeys(warnings))

    def lacking_busy(
        self, busy: RangeAnswer, listed: SeriesAnswer, first: int, last: int
    ) -> list[dict[str, str]]:
        """The listed fallback series (without their name) whose label set lacks a busy value at
        some step of the page: the only ones `or` could take a fallback value from. An entry of the
        list that is not a label set might be any series: then every GPU is asked for."""
        if listed.unreadable:
            return [{}]
        steps = (last - first) // self.opts.step_ms + 1
        counts = zip(busy.metrics, busy.counts.tolist(), strict=True)
        complete = {series_key(labels) for labels, n in counts if n == steps}
        lacking = []
        for named in listed.labels:
            labels = {k: v for k, v in named.items() if k != "__name__"}
            if series_key(labels) not in complete:
                lacking.append(labels)
        return lacking

    def shared_series(self, parser: PageParser, results: Mapping[str, pl.DataFrame]) -> list[int]:
        """The series that share a GPU and step with another in a stream `resolve` averages: the
        only ones whose raw sample counts (weights) it reads."""
        shared = [pl.Series("sid", [], pl.Int32)]
        for stream, frame in results.items():
            if stream == "mem_used_mib" and self.opts.mem_aggregation == "max":
                continue
            shared.append(frame["sid"].filter(parser.duplicated(frame, self.opts.step_ms)))
        return sorted(pl.concat(shared).unique().to_list())


# -- CLI ---------------------------------------------------------------------


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "--since", help=f"backfill from this time ({TIME_HELP}) instead of the watermark"
    )
    parser.add_argument("--until", help="collect up to this time, written as --since (default: now minus "
                        "prometheus.safety_lag)")
    parser.add_argument("--url", type=text_argument(http_url), help="Prometheus base URL (overrides prometheus.url)")
    parser.add_argument("--step", type=text_argument(duration_text(1, 86_400)),
                        help="collection step, e.g. 1m (overrides prometheus.step)")
    parser.add_argument(
        "--page-points", type=number_argument(int, 1, 11_000),
        help="points per series per request (overrides prometheus.page_points)",
    )
    parser.add_argument("--no-progress", action="store_true", help="no progress bar")


_PINNED_CLUSTER = re.compile(r'(?:^|,)\s*cluster\s*=\s*"((?:[^"\\]|\\.)+)"\s*(?:,|$)')


def pinned_cluster(selector: str) -> str:
    """The cluster that `prometheus.selector` pins with an equality matcher (`cluster="a"`)."""
    found = _PINNED_CLUSTER.search(selector)
    if not found:
        raise ConfigError(
            "prometheus: cluster.name is not set and prometheus.selector pins no cluster label",
            'set cluster.name, or pin the cluster in the selector: cluster="<name>"',
        )
    return found.group(1).replace('\\"', '"')


def build(args: argparse.Namespace, config: Config) -> PrometheusCollector:
    given = {key: getattr(args, key) for key in ("url", "step", "page_points") if getattr(args, key, None) is not None}
    settings = replace(config.of(PrometheusSettings), **given)
    opts = options_from(settings, config.of(ClusterSettings).name or pinned_cluster(settings.selector))
    since = parse_time(args.since, "--since") if args.since else None
    until = parse_time(args.until, "--until") if args.until else None
    if since is not None and until is not None and since > until:
        raise ConfigError(f"--since {args.since} is after --until {args.until}", "swap them")
    return PrometheusCollector(opts, since, until, progress=False if args.no_progress else None)
