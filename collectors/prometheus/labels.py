"""The GPU a DCGM series describes, and the job it is attributed to, read from its labels."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass

import orjson

# gpu_samples.gpu_index is an INTEGER.
_MAX_GPU_INDEX = 2**31 - 1


@dataclass(frozen=True)
class GpuSeries:
    host: str
    gpu_uuid: str
    gpu_instance: str
    gpu_index: int | None
    job_id: str | None


def _first(labels: Mapping[str, str], *names: str) -> str | None:
    for name in names:
        value = labels.get(name)
        if value:
            return value
    return None


def job_of(labels: Mapping[str, str]) -> str | None:
    """The workload a GPU series is attributed to by its labels, if any.

    Slurm mappings name the job directly. Kubernetes pods are reported as
    "namespace/pod". Behind a ServiceMonitor (it adds `service` and `endpoint`
    target labels) `pod`/`namespace` name the exporter itself and the
    workload is only ever the `exported_` one.
    """
    job = _first(labels, "hpc_job", "jobid")
    if job:
        return job
    candidates = [("exported_pod", "exported_namespace")]
    if not ("service" in labels and "endpoint" in labels):
        candidates += [("pod", "namespace"), ("pod_name", "pod_namespace")]
    for pod_label, namespace_label in candidates:
        pod = labels.get(pod_label)
        if pod:
            namespace = labels.get(namespace_label)
            return f"{namespace}/{pod}" if namespace else pod
    return None


def normalise(labels: Mapping[str, str]) -> GpuSeries | tuple[str, str]:
    """The GPU a series describes, or (field, reason) when it cannot be told."""
    host = _first(labels, "Hostname", "hostname")
    if host is None and labels.get("instance"):
        # Exporters without a host label (jobstats' GPU exporter) are told apart by their target.
        host = labels["instance"].rsplit(":", 1)[0]
    if host is None:
        return "Hostname", "series has no Hostname, hostname or instance label"
    uuid = _first(labels, "UUID", "uuid")
    if uuid is None:
        return "UUID", "series has no UUID label"
    index_text = _first(labels, "gpu", "minor_number")
    # isdigit() alone takes "²" and "١"; and gpu_index is an INTEGER.
    index = int(index_text) if index_text and index_text.isascii() and index_text.isdigit() else None
    if index is not None and index > _MAX_GPU_INDEX:
        index = None
    return GpuSeries(host, uuid, labels.get("GPU_I_ID", ""), index, job_of(labels))


def series_key(labels: Mapping[str, str]) -> str:
    """A label set as one string, the same whatever the order of its labels."""
    return orjson.dumps(labels, option=orjson.OPT_SORT_KEYS).decode()
