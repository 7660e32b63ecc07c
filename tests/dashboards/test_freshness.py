"""The Operations page's freshness query reads the newest record of each source of the raw tables source by
source (dashboards.data._newest_by_source), not by grouping every row: it must give what the grouping gives,
whether a row group holds one source (as a load's rows do) or several interleaved."""

from __future__ import annotations

import shutil
from pathlib import Path

from preemptlens.dashboards import data
from preemptlens.reading.masking import EVERYTHING
from preemptlens.warehouse import Warehouse

# Every table the freshness query reads, and the time its newest record is.
NEWEST = {
    "GPU samples": ("gpu_samples", "time"),
    "checkpoints": ("checkpoints", "time"),
    "job runs": ("job_runs", "greatest(submit_time, start_time, end_time)"),
    "jobs": ("jobs", "submit_time"),
    "preemption links": ("preemption_links", "time"),
    "pool capacity": ("pools", "valid_from"),
}


def test_each_sources_newest_record_as_grouping_gives_it(cluster_warehouse: Path, tmp_path: Path) -> None:
    path = tmp_path / "w.duckdb"
    shutil.copyfile(cluster_warehouse, path)
    with Warehouse(path) as wh:
        # Interleaved in every row group: three sources row by row, one of them sorting before the fixture's.
        for table in ("gpu_samples", "checkpoints"):
            wh.con.execute(f"UPDATE {table} SET source = ['aardvark', 'fixture', 'zebra'][rowid % 3 + 1]")
        # And one source's rows apart, appended after them: a second copy of the samples, a day later.
        wh.con.execute("INSERT INTO gpu_samples SELECT * REPLACE ('prometheus' AS source, "
                       "time + INTERVAL 1 DAY AS time) FROM gpu_samples")
        truth: dict[str, dict[str, object]] = {}
        for records, (table, newest) in NEWEST.items():
            for source, time in wh.con.execute(f"SELECT source, max({newest}) FROM {table} GROUP BY source").fetchall():
                truth.setdefault(source, {})[records] = time
        wh.mark_changed()
    with data.reader(path, scope=EVERYTHING) as r:
        fresh = data.freshness(r)
    assert sorted(truth) == fresh["source"].to_list() == ["aardvark", "fixture", "prometheus", "zebra"]
    for row in fresh.iter_rows(named=True):
        tables = truth[row["source"]]
        assert row["tables"] == ", ".join(sorted(tables))
        assert row["newest_record"] == max(t for t in tables.values() if t is not None)
        assert tables[row["newest_in"]] == row["newest_record"]
