"""Stream `prometheus`: a job's step and last checkpoint time from application metrics.

Through the Prometheus collector's own client and settings (`[prometheus]`: URL, auth, tenant, TLS,
retries, `selector`), range queries at `checkpoints.metric_step` resolution of:
- `step_metric`: the step a job reports; each value it first reaches is a progress row at that sample's time;
- `checkpoint_time_metric`: the epoch seconds of the job's last completed checkpoint (a Pushgateway
  holds the last push); each distinct value is a checkpoint row at that time, with the step
  `checkpoint_step_metric` gives at the same instant where it is set.
A series' job is its labels read as GPU samples' are (collectors.prometheus.job_of: `hpc_job`, `jobid`,
namespace/pod, the `exported_` labels behind a ServiceMonitor), resolved like them to a recorded job by
its id or an alias on at the time (jobs.Runs.by_label); a series that names no recorded job is
quarantined, named by its labels.

Cursor: the end of the last window read (epoch ms); the next starts `metric_lag` before it and never
passes now minus `prometheus.safety_lag`.
"""

from __future__ import annotations

import dataclasses
import json
import time as clock
from typing import Any

from preemptlens.collectors.checkpoints.jobs import Point, Runs
from preemptlens.collectors.prometheus import (
    PrometheusSettings,
    PrometheusSource,
    job_of,
    options_from,
    range_result,
)
from preemptlens.config import Config
from preemptlens.contract import Reject
from preemptlens.errors import ConfigError
from preemptlens.times import parse_duration_ms


def _selected(metric: str, selector: str) -> str:
    return f"{metric}{{{selector}}}" if selector else metric


def collect_metrics(config: Config, s: Any, cluster: str, runs: Runs, data: str | None) -> tuple[
        list[Any], list[Reject], str]:
    if not (s.step_metric or s.checkpoint_time_metric):
        raise ConfigError("checkpoints: stream prometheus has neither checkpoints.step_metric nor "
                          "checkpoints.checkpoint_time_metric", "name the metric jobs export")
    prom = config.of(PrometheusSettings)
    opts = options_from(prom, cluster)
    step_ms = parse_duration_ms(s.metric_step, "checkpoints.metric_step")
    lag_ms = parse_duration_ms(s.metric_lag, "checkpoints.metric_lag")
    opts = dataclasses.replace(opts, step_ms=step_ms, timeout_s=min(opts.timeout_s, s.timeout_s))
    now_ms = int(clock.time() * 1000) - opts.safety_lag_ms
    last = json.loads(data) if data else None
    start_ms = int(last) - lag_ms if isinstance(last, int) else now_ms - int(s.lookback_hours * 3_600_000)
    if start_ms >= now_ms:
        return [], [], json.dumps(last)
    source = PrometheusSource(opts)
    points: list[Any] = []
    rejects: list[Reject] = []
    selector = prom.selector.strip()
    try:
        # One query per page of at most 11,000 points per series (Prometheus' limit).
        page_ms = step_ms * 10_000
        begin = start_ms
        while begin < now_ms:
            end = min(begin + page_ms, now_ms)
            if s.step_metric:
                answer = range_result(source.query_range(
                    "step", f"max by (hpc_job, jobid, namespace, pod, pod_name, pod_namespace, exported_pod, "
                    f"exported_namespace, service, endpoint) ({_selected(s.step_metric, selector)})", begin, end))
                points += _reached(answer, cluster, runs, rejects, s.step_metric)
            if s.checkpoint_time_metric:
                saved = range_result(source.query_range(
                    "checkpoint", _selected(s.checkpoint_time_metric, selector), begin, end))
                steps = range_result(source.query_range(
                    "checkpoint step", _selected(s.checkpoint_step_metric, selector), begin, end)
                ) if s.checkpoint_step_metric else None
                points += _saves(saved, steps, cluster, runs, rejects, s.checkpoint_time_metric)
            begin = end + step_ms
    finally:
        source.close()
    return points, rejects, json.dumps(now_ms)


def _series(answer: Any, metric: str, rejects: list[Reject]) -> list[tuple[dict[str, str], list[tuple[float, float]]]]:
    out = []
    at = 0
    samples = answer.samples
    for labels, count in zip(answer.metrics, answer.counts, strict=True):
        part = samples.slice(at, int(count))
        at += int(count)
        # The answer's times are epoch milliseconds; one the answer reader could not hold (before 1970, after
        # 2109) is NULL there, and named here.
        times, values = part["t"].to_list(), part["value"].to_list()
        unheld = sum(t is None for t in times)
        if unheld:
            shown = ",".join(f'{k}="{v}"' for k, v in sorted(labels.items()))[:300]
            rejects.append(Reject("checkpoints", f"series {metric}{{{shown}}}", "time",
                                  f"{unheld} sample(s) at a time outside 1970 to 2109: not read"))
        out.append((labels, [(t / 1000.0, v) for t, v in zip(times, values, strict=True) if t is not None]))
    return out


def _job(labels: dict[str, str], cluster: str, runs: Runs, t: float, metric: str,
         rejects: list[Reject]) -> str | None:
    label = job_of(labels)
    job = runs.by_label(cluster, label, t) if label else None
    if job is None:
        shown = ",".join(f'{k}="{v}"' for k, v in sorted(labels.items()))[:300]
        rejects.append(Reject("checkpoints", f"series {metric}{{{shown}}}", "job_id",
                              f"names no recorded job on at {t:.0f}" if label else
                              "has no job label (hpc_job, jobid, namespace/pod)"))
    return job


def _reached(answer: Any, cluster: str, runs: Runs, rejects: list[Reject], metric: str) -> list[Any]:

    out = []
    for labels, values in _series(answer, metric, rejects):
        previous: float | None = None
        for t, value in values:
            if value != value or value == previous:
                continue
            job = _job(labels, cluster, runs, t, metric, rejects)
            if job is None:
                break
            out.append(Point(job, runs.run_at(cluster, job, t), t, "progress", value, None, "prometheus",
                             f"series {metric} of {job} @ {t:.0f}"))
            previous = value
    return out


def _saves(saved: Any, steps: Any, cluster: str, runs: Runs, rejects: list[Reject], metric: str) -> list[Any]:

    step_at: dict[tuple[str | None, float], float] = {}
    if steps is not None:
        for labels, values in _series(steps, metric, rejects):
            for t, value in values:
                step_at[(job_of(labels), t)] = value
    out = []
    for labels, values in _series(saved, metric, rejects):
        previous: float | None = None
        for t, value in values:
            # A value that is not a time since 2000 is not a checkpoint time (an unset gauge reads 0).
            if value != value or value == previous or value < 946_684_800:
                continue
            job = _job(labels, cluster, runs, value, metric, rejects)
            if job is None:
                break
            out.append(Point(job, runs.run_at(cluster, job, value), value, "checkpoint",
                             step_at.get((job_of(labels), t)), None, "prometheus",
                             f"series {metric} of {job} @ {t:.0f}"))
            previous = value
    return out
