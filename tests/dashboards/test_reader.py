"""The dashboard's shared snapshot connection: every reader sees the newest snapshot, never an old one."""

from __future__ import annotations

import threading
import time
from pathlib import Path

import fixture_cluster
import polars as pl

from preemptlens.dashboards import data
from preemptlens.reading.masking import EVERYTHING
from preemptlens.warehouse import Warehouse

COUNT = "SELECT count(*) AS n FROM pools"


def add_pool(path: Path, name: str) -> None:
    with Warehouse(path) as wh:
        frame = pl.DataFrame({"cluster": ["c1"], "pool": [name], "valid_from": ["2026-11-01"], "gpus": [8]})
        wh.load("pools", frame, "test")


def test_a_new_snapshot_is_read_once_the_readers_of_the_old_one_finished(tmp_path: Path) -> None:
    path = fixture_cluster.build(tmp_path / "w.duckdb")
    with data.reader(path, scope=EVERYTHING) as r:
        pools = int(r.frame(COUNT)["n"][0])
    add_pool(path, "new-1")
    with data.reader(path, scope=EVERYTHING) as r:
        assert int(r.frame(COUNT)["n"][0]) == pools + 1

    # A page still reading the old snapshot when a new one appears keeps its rows; the next reader
    # waits for it to finish and then reads the new snapshot, not the database still open.
    seen: list[int] = []
    opened, release = threading.Event(), threading.Event()

    def old_page() -> None:
        with data.reader(path, scope=EVERYTHING) as old:
            opened.set()
            release.wait(10)
            seen.append(int(old.frame(COUNT)["n"][0]))

    page = threading.Thread(target=old_page)
    page.start()
    assert opened.wait(10)
    add_pool(path, "new-2")
    threading.Timer(0.5, release.set).start()
    began = time.monotonic()
    with data.reader(path, scope=EVERYTHING) as r:
        assert int(r.frame(COUNT)["n"][0]) == pools + 2
        waited = time.monotonic() - began
    page.join(10)
    assert seen == [pools + 1]
    assert waited >= 0.4


def test_readers_in_threads_share_the_connection_and_read_utc(tmp_path: Path) -> None:
    path = fixture_cluster.build(tmp_path / "w.duckdb")
    zones: list[str] = []

    def read() -> None:
        with data.reader(path, scope=EVERYTHING) as r:
            zones.append(str(r.frame("SELECT current_setting('TimeZone') AS tz")["tz"][0]))
            r.frame("SELECT * FROM preemption_ledger")

    threads = [threading.Thread(target=read) for _ in range(4)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(30)
    assert zones == ["UTC"] * 4
