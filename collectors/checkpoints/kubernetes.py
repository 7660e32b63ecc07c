"""Streams `annotations` and `pod_logs`: checkpoints a Kubernetes job states on its objects or in its log.

Read through the Kubernetes collector's client (collectors.kubernetes.api_client, `[kubernetes]`
settings) and its paged lister (collectors.kubernetes.watch.ListWatch, a list without a watch here):

- `annotations`: on every Pod, Kueue Workload or KAI PodGroup listed, the annotation (or label)
  `checkpoints.time_annotation` holds the time of its last checkpoint (RFC 3339, or epoch seconds) and
  `checkpoints.step_annotation` its step; each (object, time) is a checkpoint row. The object's job is
  its own UID where that is a recorded job (a Workload, a PodGroup, a plain GPU pod), else its
  namespace/name resolved as GPU samples' labels are (jobs.Runs.by_label).
- `pod_logs`: each running recorded pod's log (`timestamps=true`, at most `pod_log_bytes` a pass),
  read with logs.py's presets; the cursor is the last timestamp read per pod.
"""

from __future__ import annotations

import json
import time as clock
from datetime import UTC
from typing import Any

from preemptlens.collectors.checkpoints.jobs import Point, Runs
from preemptlens.collectors.checkpoints.logs import LogReader, parse_time, patterns
from preemptlens.config import Config
from preemptlens.contract import Reject
from preemptlens.errors import ConfigError, SourceError

_OBJECTS = {
    "pods": ("core", "pods"),
    "workloads": ("kueue.x-k8s.io", "workloads"),
    "podgroups": ("scheduling.run.ai", "podgroups"),
}


def _client(config: Config) -> Any:
    from preemptlens.collectors.kubernetes import KubernetesSettings, api_client

    return api_client(config.of(KubernetesSettings)), config.of(KubernetesSettings)


def _listed(what: str, call: Any, k8s: Any) -> list[dict[str, Any]]:
    from preemptlens.collectors.kubernetes import watch_bounds
    from preemptlens.collectors.kubernetes.watch import Change, ListWatch

    watcher = ListWatch(f"checkpoints {what}", call, watch_bounds(k8s).list_only())
    return [item.object for item in watcher.run(None) if isinstance(item, Change) and isinstance(item.object, dict)]


def _when(text: str) -> float | None:
    """An annotation's time: RFC 3339 or epoch seconds, since 2000 and before 3000 (else not a time)."""
    text = text.strip()
    try:
        value: float | None = float(text)
    except ValueError:
        value = parse_time(text, UTC)
    return value if value is not None and 946_684_800 <= value < 32_503_680_000 else None


def _job_of(obj: dict[str, Any], cluster: str, runs: Runs, t: float) -> str | None:
    meta = obj.get("metadata") or {}
    uid, ns, name = meta.get("uid"), meta.get("namespace"), meta.get("name")
    if isinstance(uid, str) and (cluster, uid) in runs.jobs:
        return uid
    if isinstance(ns, str) and isinstance(name, str):
        return runs.by_label(cluster, f"{ns}/{name}", t)
    return None


def read_annotations(config: Config, s: Any, cluster: str, runs: Runs, data: str | None) -> tuple[
        list[Any], list[Reject], str]:
    import functools

    import kubernetes.client

    if not (s.time_annotation or s.step_annotation):
        raise ConfigError("checkpoints: stream annotations has no checkpoints.time_annotation",
                          "name the annotation jobs set to their last checkpoint's time")
    client, k8s = _client(config)
    core = kubernetes.client.CoreV1Api(client)
    custom = kubernetes.client.CustomObjectsApi(client)
    versions = {"kueue.x-k8s.io": k8s.kueue_version, "scheduling.run.ai": "v2alpha2"}
    points: list[Any] = []
    rejects: list[Reject] = []
    for kind in s.annotation_objects:
        group, plural = _OBJECTS[kind]
        call = core.list_pod_for_all_namespaces if group == "core" else functools.partial(
            custom.list_cluster_custom_object, group, versions[group], plural)
        try:
            objects = _listed(kind, call, k8s)
        except SourceError as exc:
            rejects.append(Reject("checkpoints", f"annotations {kind}", "list", exc.message))
            continue
        found, refused = annotation_points(kind, objects, s.time_annotation, s.step_annotation, cluster, runs)
        points += found
        rejects += refused
    return points, rejects, data or "{}"


def annotation_points(kind: str, objects: list[dict[str, Any]], time_key: str, step_key: str, cluster: str,
                      runs: Runs) -> tuple[list[Any], list[Reject]]:
    """The checkpoints the listed objects' annotations (or labels) state, and what cannot be read of them."""
    points: list[Any] = []
    rejects: list[Reject] = []
    for obj in objects:
        meta = obj.get("metadata") or {}
        marks = {**(meta.get("labels") or {}), **(meta.get("annotations") or {})}
        record = f"{kind} {meta.get('namespace')}/{meta.get('name')}"
        raw_time = marks.get(time_key) if time_key else None
        raw_step = marks.get(step_key) if step_key else None
        if raw_time is None:
            continue
        when = _when(str(raw_time))
        if when is None:
            rejects.append(Reject("checkpoints", record, time_key,
                                  f"annotation {time_key} is not a time: {str(raw_time)[:80]!r}"))
            continue
        step = None
        if raw_step is not None:
            try:
                step = float(raw_step)
            except ValueError:
                rejects.append(Reject("checkpoints", record, step_key,
                                      f"annotation {step_key} is not a number: {str(raw_step)[:80]!r}"))
                continue
        job = _job_of(obj, cluster, runs, when)
        if job is None:
            rejects.append(Reject("checkpoints", record, "job_id", "names no recorded job on at its checkpoint"))
            continue
        points.append(Point(job, runs.run_at(cluster, job, when), when, "checkpoint", step, None, "annotation",
                            record))
    return points, rejects


def read_pod_logs(config: Config, s: Any, cluster: str, runs: Runs, data: str | None) -> tuple[
        list[Any], list[Reject], str]:
    import kubernetes.client
    from kubernetes.client.exceptions import ApiException

    from preemptlens.collectors.checkpoints.logs import zone_of

    client, _ = _client(config)
    core = kubernetes.client.CoreV1Api(client)
    reader = LogReader(patterns(s.log_presets, s.log_checkpoint_pattern, s.log_progress_pattern),
                       zone_of(s.log_timezone), s.max_line_bytes, s.pod_log_bytes)
    last: dict[str, float] = json.loads(data) if data else {}
    now = clock.time()
    points: list[Any] = []
    rejects: list[Reject] = []
    kept: dict[str, float] = {}
    for (c, job_id), job in sorted(runs.jobs.items()):
        if c != cluster or job.team is None or job.name is None or runs.run_at(cluster, job_id, now) is None:
            continue
        pod = f"{job.team}/{job.name}"
        since = last.get(pod)
        try:
            text = core.read_namespaced_pod_log(
                job.name, job.team, timestamps=True, limit_bytes=s.pod_log_bytes,
                since_seconds=max(1, int(now - since) + 1) if since else None, _request_timeout=s.timeout_s)
        except ApiException as exc:
            rejects.append(Reject("checkpoints", f"pod log {pod}", "log", f"cannot be read: HTTP {exc.status}"))
            continue
        newest = since or 0.0
        for line in reader.lines_of(str(text).splitlines(), f"pod {pod}"):
            if since is not None and line.time <= since:
                continue
            newest = max(newest, line.time)
            points.append(Point(job_id, runs.run_at(cluster, job_id, line.time), line.time, line.kind, line.step,
                                line.save_s, line.origin, line.record))
        kept[pod] = newest or now
    return points, rejects, json.dumps(kept)
