"""Write gpu_samples-shaped frames as dcgm-exporter metrics in OpenMetrics text.

The output is what `promtool tsdb create-blocks-from openmetrics` backfills
into a real Prometheus (the tests and benchmarks), and what a small exporter
can serve for a live scrape. Each host is written in the label style of one
dcgm-exporter setup (`ExporterStyle`), so one file can hold every variant the
Prometheus collector has to normalise.

Format facts that promtool relies on: timestamps are in SECONDS (milliseconds
are accepted silently and land in the far future), samples of a series must
be in time order (out-of-order ones are dropped silently), metric families
are not interleaved, and the file ends with `# EOF`.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping
from contextlib import ExitStack
from dataclasses import dataclass
from pathlib import Path
from typing import IO, Literal

import polars as pl

# How a setup attaches the workload to a GPU series:
#   pod          dcgm-exporter's Kubernetes mapping: pod, namespace, container
#   exported_pod the same behind a ServiceMonitor with honorLabels false: the
#                workload's labels become exported_*, while pod/namespace name
#                the exporter itself and service/endpoint are added
#   hpc_job      dcgm-exporter's HPC mapping directory (Slurm prolog/epilog)
#   jobid        Princeton jobstats' GPU exporter
#   none         no attribution at all
JobLabels = Literal["pod", "exported_pod", "hpc_job", "jobid", "none"]

GR_ENGINE_ACTIVE = "DCGM_FI_PROF_GR_ENGINE_ACTIVE"
GPU_UTIL = "DCGM_FI_DEV_GPU_UTIL"
FB_USED = "DCGM_FI_DEV_FB_USED"
POWER_USAGE = "DCGM_FI_DEV_POWER_USAGE"

_HELP = {
    GR_ENGINE_ACTIVE: "Ratio of time the graphics engine is active.",
    GPU_UTIL: "GPU utilization (in %).",
    FB_USED: "Framebuffer memory used (in MiB).",
    POWER_USAGE: "Power draw (in W).",
}


@dataclass(frozen=True)
class ExporterStyle:
    """The labels one dcgm-exporter setup puts on its series."""

    hostname_label: Literal["Hostname", "hostname"] = "Hostname"
    job_labels: JobLabels = "pod"
    # Consumer GPUs have no profiling metrics: only GPU_UTIL carries busy.
    profiling: bool = True
    model: str = "NVIDIA A100-SXM4-80GB"
    mig_profile: str = "1g.10gb"
    scrape_job: str = "dcgm-exporter"
    exporter_port: int = 9400


def _escape(value: str) -> str:
    return value.replace("\\", "\\\\").replace("\n", "\\n").replace('"', '\\"')


def _k8s_names(job_id: str) -> tuple[str, str]:
    # The collector reports a pod's job as "namespace/pod".
    namespace, _, pod = job_id.rpartition("/")
    return namespace or "default", pod


def series_labels(
    host: str,
    gpu_uuid: str,
    gpu_instance: str,
    gpu_index: int | None,
    job_id: str | None,
    style: ExporterStyle,
    scrape_labels: bool = True,
) -> dict[str, str]:
    """The label set dcgm-exporter (plus the scrape) gives one GPU series, in its order."""
    index = "" if gpu_index is None else str(gpu_index)
    labels = {
        "gpu": index,
        "UUID": gpu_uuid,
        "pci_bus_id": f"00000000:{(gpu_index or 0) + 0x10:02X}:00.0",
        "device": f"nvidia{index}",
        "modelName": style.model,
    }
    if gpu_instance:
        labels["GPU_I_PROFILE"] = style.mig_profile
        labels["GPU_I_ID"] = gpu_instance
    labels[style.hostname_label] = host
    labels["DCGM_FI_DRIVER_VERSION"] = "580.95.05"
    if style.job_labels == "exported_pod":
        # The exporter's own pod, added as target labels by the ServiceMonitor.
        labels.update(
            pod=f"nvidia-dcgm-exporter-{host}",
            namespace="gpu-operator",
            container="nvidia-dcgm-exporter",
            service="nvidia-dcgm-exporter",
            endpoint="gpu-metrics",
        )
    if job_id:
        if style.job_labels == "pod":
            namespace, pod = _k8s_names(job_id)
            labels.update(pod=pod, namespace=namespace, container="main")
        elif style.job_labels == "exported_pod":
            namespace, pod = _k8s_names(job_id)
            labels.update(exported_pod=pod, exported_namespace=namespace, exported_container="main")
        elif style.job_labels == "hpc_job":
            labels["hpc_job"] = job_id
        elif style.job_labels == "jobid":
            labels["jobid"] = job_id
    if scrape_labels:
        # Backfilled history needs the labels a scrape would add, or queries filtering on them miss it.
        labels["job"] = style.scrape_job
        labels["instance"] = f"{host}:{style.exporter_port}"
    return labels


def _label_text(labels: Mapping[str, str]) -> str:
    return "{" + ",".join(f'{k}="{_escape(v)}"' for k, v in labels.items()) + "}"


def _with_labels(
    frame: pl.DataFrame, styles: Mapping[str, ExporterStyle], default: ExporterStyle, scrape_labels: bool
) -> pl.DataFrame:
    """Attach each row's label text and its host's style flags, computed once per series."""
    ident = ["host", "gpu_uuid", "gpu_instance", "gpu_index", "job_id"]
    series = frame.select(ident).unique()
    texts, profiling = [], []
    for host, uuid, instance, index, job in series.iter_rows():
        style = styles.get(host, default)
        texts.append(_label_text(series_labels(host, uuid, instance, index, job, style, scrape_labels)))
        profiling.append(style.profiling)
    series = series.with_columns(
        pl.Series("_labels", texts, dtype=pl.String), pl.Series("_profiling", profiling, dtype=pl.Boolean)
    )
    return frame.join(series, on=ident, how="left", nulls_equal=True)


def _seconds(time: pl.Expr) -> pl.Expr:
    ms = time.dt.epoch("ms")
    return pl.concat_str(
        [(ms // 1000).cast(pl.String), pl.lit("."), (ms % 1000).cast(pl.String).str.zfill(3)]
    )


def _prepare(frame: pl.DataFrame, timestamps: bool) -> pl.DataFrame:
    frame = frame.with_columns(
        pl.col("gpu_instance").fill_null("")
        if "gpu_instance" in frame.columns
        else pl.lit("").alias("gpu_instance"),
        pl.col("job_id").cast(pl.String)
        if "job_id" in frame.columns
        else pl.lit(None, pl.String).alias("job_id"),
        pl.col("gpu_index").cast(pl.Int64)
        if "gpu_index" in frame.columns
        else pl.lit(None, pl.Int64).alias("gpu_index"),
    )
    if timestamps and not isinstance(frame.schema["time"], pl.Datetime):
        # Epoch seconds, as the load API also accepts them.
        epoch_ms = (pl.col("time").cast(pl.Float64) * 1000).round(0).cast(pl.Int64)
        frame = frame.with_columns(pl.from_epoch(epoch_ms, time_unit="ms").alias("time"))
    return frame


def _families() -> list[tuple[str, pl.Expr, pl.Expr]]:
    """Each family: its name, its value, and which rows carry it."""
    return [
        (GR_ENGINE_ACTIVE, pl.col("busy").cast(pl.Float64), pl.col("_profiling")),
        (GPU_UTIL, (pl.col("busy") * 100).round(0).cast(pl.Int64), pl.col("gpu_instance") == ""),
        (FB_USED, pl.col("mem_used_mib").round(0).cast(pl.Int64), pl.lit(True)),
        (POWER_USAGE, pl.col("power_w").cast(pl.Float64).round(3), pl.lit(True)),
    ]


def write_openmetrics(
    frame: pl.DataFrame,
    out: str | Path | IO[str],
    styles: Mapping[str, ExporterStyle] | None = None,
    default: ExporterStyle | None = None,
    *,
    timestamps: bool = True,
) -> int:
    """Write `frame` (gpu_samples columns) as dcgm-exporter families; return the sample count.

    busy becomes GR_ENGINE_ACTIVE (ratio, omitted where the host's style has no
    profiling) and GPU_UTIL (integer percent as DCGM reports it, omitted for
    MIG instances); mem_used_mib becomes FB_USED (integer MiB); power_w
    becomes POWER_USAGE. A null value writes no sample. Without `timestamps`
    the text is an exposition a scrape stamps itself (frame: one row per series).
    """
    return write_openmetrics_chunks(lambda: (frame,), out, styles, default, timestamps=timestamps)


def write_openmetrics_chunks(
    chunks: Callable[[], Iterable[pl.DataFrame]],
    out: str | Path | IO[str],
    styles: Mapping[str, ExporterStyle] | None = None,
    default: ExporterStyle | None = None,
    *,
    timestamps: bool = True,
) -> int:
    """`write_openmetrics` of a history too large to hold at once, in one file.

    `chunks()` yields the history in parts whose series are disjoint (e.g. by
    host); it is called once per metric family, because a family's lines must
    not be interleaved with another's, so it should regenerate or re-read its
    parts rather than keep them all.
    """
    default = default or ExporterStyle()
    written = 0
    with ExitStack() as stack:
        fh = stack.enter_context(open(out, "w", encoding="utf-8")) if isinstance(out, str | Path) else out
        for name, value, keep in _families():
            fh.write(f"# HELP {name} {_HELP[name]}\n# TYPE {name} gauge\n")
            for chunk in chunks():
                labelled = _with_labels(_prepare(chunk, timestamps), styles or {}, default, timestamps)
                rows = labelled.filter(keep & value.is_not_null())
                if rows.height == 0:
                    continue
                rows = rows.sort("_labels", "time") if timestamps else rows.sort("_labels")
                parts = [pl.lit(name), pl.col("_labels"), pl.lit(" "), value.cast(pl.String)]
                if timestamps:
                    parts += [pl.lit(" "), _seconds(pl.col("time"))]
                lines = rows.select(pl.concat_str(parts).alias("line"))
                lines.write_csv(fh, include_header=False, quote_style="never")
                written += rows.height
        fh.write("# EOF\n")
    return written
