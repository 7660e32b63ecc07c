"""Which job an idle GPU sample belongs to, when its labels do not say.

A sample's `job_id` is the job label the exporter gave it (dcgm-exporter's
`hpc_job`, jobstats' `jobid`, or "namespace/pod"). Where that label is a job
the scheduler collectors recorded, it is used as it is. Otherwise, in order:

1. an alias of a job: "namespace/name" of a Kubernetes job (the scheduler
   collector keys pods by UID, the exporter names them), or an alias a
   collector recorded in `job_aliases` (Slurm's own numeric id of an array
   task, which is what the prolog and the exporters see). Pod names are reused
   (a StatefulSet's `trainer-0`), so an alias resolves to the run that was on
   at the sample's time;
2. the host and time: the one run that held the whole host at that time. A
   host shared by several runs, or held by one run that has only part of its
   GPUs, tells nothing about which GPU is whose: those samples stay
   unattributed rather than being charged to a guess.

Both lookup tables (sql/schema/0007) are small, one row per run or per run
and host, and are rebuilt on every analyze; the samples are joined to them with ASOF joins, and
only the samples whose label is not a known job take that path.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from datetime import datetime
from itertools import product

import polars as pl

from preemptlens.errors import SchemaError
from preemptlens.warehouse import Warehouse, query_sql

_RANGE = re.compile(r"^(\d+)(?:-(\d+))?$")


def expand_hostlist(text: str) -> list[str]:
    """Slurm's compressed node list ("gpu[01-03,07],login1", "r[1-2]n[1-2]") as host names."""
    hosts: list[str] = []
    for item in _split_top(text.strip()):
        parts = re.split(r"(\[[^\]]*\])", item)
        choices: list[list[str]] = []
        for part in parts:
            if part.startswith("[") and part.endswith("]"):
                choices.append(_expand_ranges(part[1:-1], text))
            elif "[" in part or "]" in part:
                raise SchemaError(f"node list {text!r}: unbalanced brackets")
            elif part:
                choices.append([part])
        hosts.extend("".join(combo) for combo in product(*choices))
    return hosts


def _split_top(text: str) -> list[str]:
    items, depth, start = [], 0, 0
    for i, ch in enumerate(text):
        depth += (ch == "[") - (ch == "]")
        if ch == "," and depth == 0:
            items.append(text[start:i])
            start = i + 1
    items.append(text[start:])
    return [item for item in (i.strip() for i in items) if item]


def _expand_ranges(spec: str, text: str) -> list[str]:
    out: list[str] = []
    for piece in spec.split(","):
        m = _RANGE.match(piece.strip())
        if not m:
            raise SchemaError(f"node list {text!r}: {piece!r} is not a number or a range")
        lo, hi = m.group(1), m.group(2) or m.group(1)
        # Zero padding follows the lower bound, as Slurm prints it (gpu[008-010]).
        width = len(lo) if lo.startswith("0") else 0
        out.extend(str(n).zfill(width) for n in range(int(lo), int(hi) + 1))
    return out


@dataclass(frozen=True)
class Attribution:
    alias_runs: int
    host_segments: int
    changed_from: datetime | None  # earliest time whose owner differs from the previous rebuild


def _count_host_gpus(wh: Warehouse, new_loads: str | None) -> None:
    """GPUs each host has reported, kept up to date from the samples of new loads only."""
    if new_loads is None:
        wh.con.execute("DELETE FROM sample_host_gpus")
        scope = ""
    else:
        scope = f"WHERE _load_id IN (SELECT load_id FROM {new_loads})"  # noqa: S608
    wh.con.execute(
        f"INSERT INTO sample_host_gpus SELECT DISTINCT cluster, host, gpu_uuid FROM gpu_samples {scope} "  # noqa: S608
        "EXCEPT SELECT cluster, host, gpu_uuid FROM sample_host_gpus"
    )


def rebuild(wh: Warehouse, new_loads: str | None = None) -> Attribution:
    """Rebuild sample_alias_runs and sample_host_segments from jobs and job_runs.

    `new_loads` (a relation of load_id) limits the count of each host's GPUs to
    the samples those loads wrote; None counts them over all samples."""
    con = wh.con
    # The previous tables, to tell from when on the owners changed.
    for table in ("sample_alias_runs", "sample_host_segments"):
        con.execute(f"CREATE OR REPLACE TEMP TABLE _old_{table} AS SELECT * FROM {table}")  # noqa: S608
    aliases = query_sql("attribution", "job_labels")
    con.execute("DELETE FROM sample_alias_runs")
    con.execute(
        f"""
        INSERT INTO sample_alias_runs
        WITH aliases AS ({aliases}),
        known AS (SELECT DISTINCT cluster, job_id FROM job_runs)
        SELECT a.cluster, a.label, r.job_id, r.start_time,
            coalesce(r.end_time, 'infinity'::TIMESTAMPTZ) AS end_time
        FROM aliases AS a
        JOIN job_runs AS r ON r.cluster = a.cluster AND r.job_id = a.job_id
        ANTI JOIN known AS k ON k.cluster = a.cluster AND k.job_id = a.label
        WHERE r.start_time IS NOT NULL
        """  # noqa: S608 -- fixed fragments only
    )
    runs = wh.query(
        """
        SELECT r.cluster, r.job_id, r.run, r.hosts, r.gpus, r.start_time,
            coalesce(r.end_time, 'infinity'::TIMESTAMPTZ) AS end_time,
            (SELECT max(p.gpus_per_node) FROM pools AS p
             WHERE p.cluster = r.cluster AND p.pool = coalesce(r.pool, j.pool)) AS gpus_per_node
        FROM job_runs AS r JOIN jobs AS j USING (cluster, job_id)
        WHERE r.start_time IS NOT NULL AND r.hosts IS NOT NULL AND r.hosts <> ''
        """
    )
    _count_host_gpus(wh, new_loads)
    host_gpus = wh.query("SELECT cluster, host, count(*) AS seen_gpus FROM sample_host_gpus GROUP BY ALL")
    expanded = {text: expand_hostlist(text) for text in runs["hosts"].unique().to_list()}
    per_host = (
        runs.with_columns(pl.col("hosts").replace_strict(expanded, return_dtype=pl.List(pl.String)).alias("host"))
        .explode("host")
        .join(host_gpus, on=["cluster", "host"], how="left")
        # The pool's node size where the pools table gives it, else the GPUs the host has reported.
        .with_columns(pl.coalesce("gpus_per_node", "seen_gpus").alias("host_gpus"))
    )
    # A run that holds every GPU of its hosts is the only one whose samples a host can name.
    whole = per_host.group_by("cluster", "job_id", "run").agg(
        (pl.col("host_gpus").is_not_null().all() & (pl.col("gpus").first() >= pl.col("host_gpus").sum())).alias(
            "whole"
        )
    )
    run_hosts = per_host.join(whole, on=["cluster", "job_id", "run"]).select(
        "cluster", "host", "job_id", "start_time", "end_time", "whole"
    )
    con.register("_run_hosts", run_hosts.to_arrow())
    try:
        # Per host, the stretches during which exactly one run is on it and holds it whole; the
        # running sum of the runs' hashes names that run without a join of every run with every step.
        con.execute("DELETE FROM sample_host_segments")
        con.execute(
            """
            INSERT INTO sample_host_segments
            WITH ev AS (
                SELECT cluster, host, start_time AS t, 1 AS d, hash(job_id)::HUGEINT AS h, whole::INT AS w
                FROM _run_hosts
                UNION ALL
                SELECT cluster, host, end_time, -1, -hash(job_id)::HUGEINT, -(whole::INT) FROM _run_hosts
            ),
            steps AS (SELECT cluster, host, t, sum(d) AS d, sum(h) AS h, sum(w) AS w FROM ev GROUP BY ALL),
            running AS (
                SELECT cluster, host, t AS seg_start,
                    lead(t) OVER (PARTITION BY cluster, host ORDER BY t) AS seg_end,
                    sum(d) OVER acc AS active, sum(h) OVER acc AS hsum, sum(w) OVER acc AS wsum
                FROM steps
                WINDOW acc AS (PARTITION BY cluster, host ORDER BY t ROWS UNBOUNDED PRECEDING)
            ),
            named AS (SELECT DISTINCT cluster, job_id, hash(job_id)::HUGEINT AS h FROM _run_hosts)
            SELECT r.cluster, r.host, r.seg_start, r.seg_end, n.job_id
            FROM running AS r JOIN named AS n ON n.cluster = r.cluster AND n.h = r.hsum
            WHERE r.active = 1 AND r.wsum = 1 AND r.seg_end IS NOT NULL
            """
        )
    finally:
        con.unregister("_run_hosts")
    ((aliased, segments, changed_from),) = con.execute(
        """
        SELECT (SELECT count(*) FROM sample_alias_runs), (SELECT count(*) FROM sample_host_segments),
            least(
                (SELECT min(start_time) FROM ((FROM sample_alias_runs EXCEPT FROM _old_sample_alias_runs)
                    UNION ALL (FROM _old_sample_alias_runs EXCEPT FROM sample_alias_runs))),
                (SELECT min(seg_start) FROM ((FROM sample_host_segments EXCEPT FROM _old_sample_host_segments)
                    UNION ALL (FROM _old_sample_host_segments EXCEPT FROM sample_host_segments))))
        """
    ).fetchall()
    con.execute("DROP TABLE _old_sample_alias_runs")
    con.execute("DROP TABLE _old_sample_host_segments")
    return Attribution(int(aliased), int(segments), changed_from)


def attributed(samples: str) -> str:
    """SQL of `samples` (a relation with cluster, host, gpu_uuid, gpu_instance, job_id, time)
    with job_id resolved as the module docstring says, samples no rule names left out."""
    return f"""
        SELECT s.cluster, s.host, s.gpu_uuid, s.gpu_instance, s.job_id, s.time
        FROM {samples} AS s
        SEMI JOIN (SELECT DISTINCT cluster, job_id FROM job_runs) AS k
            ON k.cluster = s.cluster AND k.job_id = s.job_id
        UNION ALL
        SELECT s.cluster, s.host, s.gpu_uuid, s.gpu_instance,
            CASE WHEN s.time < a.end_time THEN a.job_id
                 WHEN s.time < h.seg_end THEN h.job_id END AS job_id,
            s.time
        FROM (
            SELECT * FROM {samples} AS s
            ANTI JOIN (SELECT DISTINCT cluster, job_id FROM job_runs) AS k
                ON k.cluster = s.cluster AND k.job_id = s.job_id
        ) AS s
        ASOF LEFT JOIN sample_alias_runs AS a
            ON a.cluster = s.cluster AND a.label = s.job_id AND s.time >= a.start_time
        ASOF LEFT JOIN sample_host_segments AS h
            ON h.cluster = s.cluster AND h.host = s.host AND s.time >= h.seg_start
        WHERE s.time < a.end_time OR s.time < h.seg_end
    """  # noqa: S608 -- `samples` is a fixed relation name or subquery of the caller


def runs_changed_from(wh: Warehouse, new_loads: str) -> datetime | None:
    """Earliest start of a run that a load in `new_loads` (a relation of load_id) wrote."""
    ((earliest,),) = wh.con.execute(
        f"SELECT min(start_time) FROM job_runs WHERE _load_id IN (SELECT load_id FROM {new_loads})"  # noqa: S608
    ).fetchall()
    return earliest
