"""The busy query asked for in stages gives what the one `or` query gave, and asks only for what it needs.

Each history here is collected twice from the same real Prometheus: with the
built busy query (asked for in stages, through the counting gateway) and with
the `or` query the collector used to send, given as a custom busy_query (a
custom query is sent as it is, with the weight query, every page). The two
tables must be equal, row for row and bit for bit.
"""

from __future__ import annotations

import re
from collections.abc import Iterator
from dataclasses import dataclass
from datetime import datetime, timedelta
from pathlib import Path

import polars as pl
import pytest

from preemptlens.collectors.prometheus import gpu_matchers
from tests.prometheus.conftest import PrometheusServer, backfill
from tests.prometheus.groundtruth import GPUS, STYLES, history_end, raw_samples
from tests.prometheus.helpers import KEY, collector, run, table
from tests.prometheus.openmetrics import write_openmetrics
from tests.prometheus.proxy import Seen, TenantGateway

TENANT = "team-a"
HOURS = 4
PAGE = 97
BUSY, FALLBACK = "DCGM_FI_PROF_GR_ENGINE_ACTIVE", "DCGM_FI_DEV_GPU_UTIL"
OR_QUERY = f"avg_over_time({BUSY}{{}}[$window]) or (avg_over_time({FALLBACK}{{}}[$window]) * 0.01)"
CONSUMER = next(g for g in GPUS if not STYLES[g.host].profiling)
# Its profiling metric stops for 20 minutes inside the second page (minutes 97-193) and restarts.
STOPS = GPUS[4]
SHARED = GPUS[5]
STOP_FROM, STOP_FOR = timedelta(minutes=121, seconds=30), timedelta(minutes=20)


@dataclass(frozen=True)
class Collected:
    staged: pl.DataFrame
    with_or: pl.DataFrame
    seen: list[Seen]  # what the gateway saw of the staged collection
    first: datetime


def drop_busy(om: Path, uuid: str, since: datetime, until: datetime) -> int:
    """Remove the profiling metric's samples of one GPU in [since, until); how many went."""
    lines = om.read_text().splitlines(keepends=True)
    kept, dropped = [], 0
    for line in lines:
        if line.startswith(f"{BUSY}{{") and f'UUID="{uuid}"' in line:
            at = float(line.rsplit(" ", 1)[1])
            if since.timestamp() <= at < until.timestamp():
                dropped += 1
                continue
        kept.append(line)
    om.write_text("".join(kept))
    return dropped


def collect_both(raw: pl.DataFrame, root: Path, first: datetime, last: datetime, cut: bool = False) -> Collected:
    om = root / "dcgm.om.txt"
    write_openmetrics(raw, om, STYLES)
    if cut:
        assert drop_busy(om, STOPS.uuid, first + STOP_FROM, first + STOP_FROM + STOP_FOR) == 40
    backfill(om, root / "data")
    server = PrometheusServer(root / "data")
    server.start()
    gateway = TenantGateway(server.url, tenant=TENANT).start()
    try:
        run(root / "staged.duckdb", collector(gateway.url, first, last, page_points=PAGE, tenant=TENANT))
        run(root / "or.duckdb", collector(server.url, first, last, page_points=PAGE, busy_query=OR_QUERY))
    finally:
        gateway.stop()
        server.stop()
    return Collected(table(root / "staged.duckdb"), table(root / "or.duckdb"), gateway.seen, first)


@pytest.fixture(scope="module")
def mixed(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Collected]:
    """Every path: a consumer GPU with only the fallback metric, MIG instances with only the
    profiling one, a GPU whose profiling metric stops and restarts inside a page, jobs that
    change off the minute and a GPU shared by two jobs (series share a GPU-minute: weights)."""
    end = history_end()
    root = tmp_path_factory.mktemp("staged-mixed")
    first = end - timedelta(hours=HOURS) + timedelta(minutes=1)
    raw = raw_samples(end, HOURS)
    # A second job shares a GPU for two hours, sampled once a minute against the first job's
    # twice, with other values: the GPU-minute is the 2:1 weighted mean of the two series.
    second = raw.filter(
        (pl.col("gpu_uuid") == SHARED.uuid)
        & (pl.col("time").dt.second() == 0)
        & pl.col("time").is_between(first + timedelta(hours=1), first + timedelta(hours=3))
    ).with_columns(
        pl.lit("7777").alias("job_id"), (1 - pl.col("busy")).round(2).alias("busy"), pl.col("power_w") + 100
    )
    yield collect_both(pl.concat([raw, second]), root, first, end, cut=True)


@pytest.fixture(scope="module")
def common(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Collected]:
    """The common case: every GPU reports the profiling metric at every step, one series each."""
    end = history_end()
    root = tmp_path_factory.mktemp("staged-common")
    first = end - timedelta(hours=HOURS) + timedelta(minutes=1)
    keep = [g.uuid for g in GPUS if STYLES[g.host].profiling and g != GPUS[3]]  # GPUS[3] goes silent
    raw = raw_samples(end, HOURS).filter(pl.col("gpu_uuid").is_in(keep))
    raw = raw.with_columns(pl.lit(None, pl.String).alias("job_id"))
    yield collect_both(raw, root, first, end)


def queries(seen: list[Seen]) -> list[str]:
    return [s.param("query") or "" for s in seen if s.path.endswith("/query_range") and s.status == 200]


def test_staged_equals_the_or_query_on_every_path(mixed: Collected) -> None:
    assert mixed.staged.equals(mixed.with_or)
    rows = mixed.staged
    # Busy comes from the utilisation for the consumer GPU, and where the profiling metric stopped.
    consumer = rows.filter(pl.col("gpu_uuid") == CONSUMER.uuid)
    assert consumer.height > 200 and consumer["busy"].null_count() == 0
    start = mixed.first + STOP_FROM
    stopped = rows.filter(
        (pl.col("gpu_uuid") == STOPS.uuid)
        & pl.col("time").is_between(start + timedelta(minutes=1), start + STOP_FOR - timedelta(minutes=1))
    )
    assert stopped.height >= 18 and stopped["busy"].null_count() == 0
    # Two series shared GPU-minutes: the weights were asked for, and only for those GPUs.
    asked = queries(mixed.seen)
    weights = [q for q in asked if q.startswith("count_over_time")]
    fills = [q.replace("\\", "") for q in asked if " unless " in q]
    assert weights and all("UUID=~" in q for q in weights)
    assert any(CONSUMER.uuid in q and STOPS.uuid in q for q in fills)
    assert not any(" or " in q and "avg_over_time" in q and " unless " not in q for q in asked)


def test_common_case_sends_no_fallback_and_no_weight_query(common: Collected) -> None:
    assert common.staged.equals(common.with_or) and common.staged.height > 0
    assert common.staged.select(KEY).is_duplicated().sum() == 0
    pages = -(-HOURS * 60 // PAGE)
    asked = queries(common.seen)
    # Per page: busy, memory and power; and the fallback metric's series lookup, index only.
    assert len(asked) == 3 * pages
    assert all(re.fullmatch(r"(avg|max)_over_time\(DCGM_\w+\{\}\[59999ms\]\)", q) for q in asked), asked
    lookups = [s for s in common.seen if s.path.endswith("/api/v1/series")]
    assert len(lookups) == pages + 1  # and the check that the metrics exist at all, at the start
    assert all(s.param("match[]") == f"{FALLBACK}{{}}" for s in lookups[1:])


def test_matchers_select_the_gpus_by_the_uuid_label_read() -> None:
    series = [
        {"UUID": "GPU-a.1", "Hostname": "n1"},
        {"UUID": "", "uuid": 'GPU-"b"', "hostname": "n2"},
        {"UUID": "GPU-a.1", "hpc_job": "7"},
    ]
    assert gpu_matchers(series) == ['UUID=~"GPU\\\\-a\\\\.1"', 'uuid=~"GPU\\\\-\\"b\\""']
    assert gpu_matchers([*series, {"Hostname": "n3"}]) == [""]
