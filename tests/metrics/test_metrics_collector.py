"""The collector itself: team folding, the scrape cache, and what a scrape says when it cannot read the figures."""

from __future__ import annotations

import threading
from pathlib import Path

import polars as pl
import pytest
from prometheus_client import generate_latest
from prometheus_client.core import Metric

from preemptlens.dashboards.metrics import METRICS, OTHER_TEAMS, SnapshotCollector, fold_teams, registry_for
from preemptlens.warehouse import Warehouse


def samples(families: list[Metric]) -> dict[str, float]:
    return {
        f"{s.name}{sorted(s.labels.items())}": s.value for family in families for s in family.samples
    }


def test_fold_teams_keeps_the_largest_and_sums_the_rest() -> None:
    frame = pl.DataFrame(
        {
            "cluster": ["c"] * 5 + ["c"],
            "pool": ["a"] * 5 + ["b"],
            "team": ["t1", "t2", "t3", "t4", "t5", "t9"],
            "v": [5.0, 1.0, 3.0, 3.0, 0.5, 7.0],
            "w": [1.0, 2.0, 3.0, 4.0, 5.0, 6.0],
        }
    )
    folded = fold_teams(frame, "v", 2)
    rows = {(r["pool"], r["team"]): (r["v"], r["w"]) for r in folded.iter_rows(named=True)}
    # t3 and t4 tie at 3.0: the name decides, so the choice is stable from scrape to scrape.
    assert rows == {
        ("a", "t1"): (5.0, 1.0),
        ("a", "t3"): (3.0, 3.0),
        ("a", OTHER_TEAMS): (1.0 + 3.0 + 0.5, 2.0 + 4.0 + 5.0),
        ("b", "t9"): (7.0, 6.0),
    }
    assert folded["v"].sum() == frame["v"].sum()


def test_scrapes_within_cache_s_share_one_read(analysed_warehouse: Path) -> None:
    now = [100.0]
    collector = SnapshotCollector(analysed_warehouse, top_teams=3, cache_s=5.0, clock=lambda: now[0])
    first = list(collector.collect())
    threads = [threading.Thread(target=collector.collect) for _ in range(8)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert collector.reads == 1
    now[0] += 5.0
    second = list(collector.collect())
    assert collector.reads == 2
    # The same snapshot read twice gives the same figures.
    assert samples(first) == samples(second)
    assert {f.name for f in first} == set(METRICS)


def test_no_snapshot_yet_is_reported_not_raised(tmp_path: Path, caplog: pytest.LogCaptureFixture) -> None:
    collector = SnapshotCollector(tmp_path / "none.duckdb", cache_s=0.0)
    registry = registry_for(collector)
    for _ in range(3):
        text = generate_latest(registry).decode()
        assert "preemptlens_snapshot_readable 0.0" in text
        assert "preemptlens_net_benefit_gpu_hours" not in text
    assert collector.reads == 3
    # Said once in the log, not at every scrape.
    assert [r.getMessage() for r in caplog.records if "no snapshot" in r.getMessage()] == [
        f"metrics: no snapshot {tmp_path / 'none.duckdb.snapshot'} yet; a writer publishes it after its first commit"
    ]


def test_snapshot_before_the_first_analyze_serves_what_it_can(tmp_path: Path) -> None:
    path = tmp_path / "w.duckdb"
    with Warehouse(path) as wh:
        wh.publish()
    families = list(SnapshotCollector(path).collect())
    assert {f.name: [s.value for s in f.samples] for f in families} == {
        "preemptlens_snapshot_readable": [0.0],
        "preemptlens_snapshot_timestamp_seconds": [(path.parent / "w.duckdb.snapshot").stat().st_mtime],
    }


def test_close_waits_for_the_read_in_progress_and_stops_reading(analysed_warehouse: Path) -> None:
    reading = threading.Event()
    now = [0.0]

    def clock() -> float:
        reading.set()  # called inside collect, with the read about to start
        return now[0]

    collector = SnapshotCollector(analysed_warehouse, cache_s=1.0, clock=clock)
    scrape = threading.Thread(target=collector.collect)
    scrape.start()
    assert reading.wait(timeout=10)
    collector.close()
    # close() returned, so the read that had begun is over: no DuckDB call can outlive serve.
    assert collector.reads == 1
    scrape.join(timeout=30)
    now[0] += 10.0
    assert {f.name for f in collector.collect()} == set(METRICS)  # the last figures, not read again
    assert collector.reads == 1
