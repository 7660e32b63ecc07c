"""Readers and a writer in separate processes: no lock errors, never half a batch."""

from __future__ import annotations

import subprocess
import sys
import textwrap
import threading
import time
from pathlib import Path

import duckdb
import pytest

from preemptlens.readonly import Limits, QueryError, open_reader, query, snapshot_path
from preemptlens.warehouse import Warehouse

ROOT = Path(__file__).resolve().parents[2]
ROWS_PER_BATCH = 7

# Loads `batches` batches of ROWS_PER_BATCH jobs, one transaction each, and
# publishes the readers' snapshot after each commit as a writer must.
WRITER = textwrap.dedent(
    """
    import sys, time
    from datetime import UTC, datetime
    import polars as pl
    from preemptlens.warehouse import publish_snapshot
    from preemptlens.warehouse import Warehouse

    path, batches, rows, pause = sys.argv[1], int(sys.argv[2]), int(sys.argv[3]), float(sys.argv[4])
    with Warehouse(path) as wh:
        for b in range(batches):
            frame = pl.DataFrame({
                "cluster": ["c1"] * rows,
                "job_id": [f"{b}-{i}" for i in range(rows)],
                "tier": ["low"] * rows,
                "preemptible": [True] * rows,
                "gpus": [1] * rows,
                "submit_time": [datetime.now(UTC)] * rows,
            })
            wh.load("jobs", frame, "writer")
            publish_snapshot(wh.con, path)
            time.sleep(pause)
    print("writer done")
    """
)


def start_writer(path: Path, batches: int, pause: float = 0.02) -> subprocess.Popen[str]:
    return subprocess.Popen(
        [sys.executable, "-c", WRITER, str(path), str(batches), str(ROWS_PER_BATCH), str(pause)],
        cwd=ROOT,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )


def test_reader_sees_whole_batches_while_writer_loads(tmp_path: Path) -> None:
    path = tmp_path / "w.duckdb"
    Warehouse(path).close()
    writer = start_writer(path, batches=30)
    seen: list[int] = []
    while writer.poll() is None:
        result = query(path, "SELECT count(*) AS n, count(DISTINCT _load_id) AS loads FROM jobs", Limits(wait_s=5))
        n, loads = result.frame.row(0)
        assert n == loads * ROWS_PER_BATCH, f"a reader saw {n} rows from {loads} loads: half a batch"
        seen.append(n)
    out, err = writer.communicate()
    assert writer.returncode == 0, err
    assert "writer done" in out
    assert seen == sorted(seen), "a reader went back in time"
    assert len(set(seen)) > 3, f"the reader should have seen the table grow, saw {sorted(set(seen))}"
    final = query(path, "SELECT count(*) FROM jobs").frame.item()
    assert final == 30 * ROWS_PER_BATCH


def test_open_reader_does_not_block_a_writer(tmp_path: Path) -> None:
    path = tmp_path / "w.duckdb"
    Warehouse(path).close()
    reader = open_reader(path)
    try:
        writer = start_writer(path, batches=3, pause=0)
        _, err = writer.communicate(timeout=60)
        assert writer.returncode == 0, err
        # A connection keeps the snapshot it opened; the next one sees the new data.
        assert reader.sql("SELECT count(*) FROM jobs").fetchall() == [(0,)]
    finally:
        reader.close()
    assert query(path, "SELECT count(*) FROM jobs").frame.item() == 3 * ROWS_PER_BATCH


def test_stale_snapshot_refreshed_when_no_writer_runs(tmp_path: Path) -> None:
    path = tmp_path / "w.duckdb"
    with Warehouse(path) as wh:
        wh.con.execute("CREATE TABLE marker (x INTEGER)")
    assert query(path, "SELECT count(*) FROM marker").frame.item() == 0
    # A writer that does not publish (any tool that opens the file read-write).
    time.sleep(0.01)
    with Warehouse(path) as wh:
        wh.con.execute("INSERT INTO marker VALUES (1), (2)")
    assert query(path, "SELECT count(*) FROM marker").frame.item() == 2


def test_writer_without_snapshot_gives_clear_error(tmp_path: Path) -> None:
    path = tmp_path / "w.duckdb"
    holder = subprocess.Popen(
        [sys.executable, "-c", f"import sys, duckdb; c = duckdb.connect({str(path)!r}); print('open', flush=True); "
         "sys.stdin.read()"],
        cwd=ROOT,
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        text=True,
    )
    try:
        assert holder.stdout is not None and holder.stdout.readline().strip() == "open"
        assert not snapshot_path(path).exists()
        with pytest.raises(QueryError, match="being written by another process"):
            query(path, "SELECT 1", Limits(wait_s=0.3))
    finally:
        holder.communicate("")


def test_two_readers_in_one_process(tmp_path: Path) -> None:
    path = tmp_path / "w.duckdb"
    with Warehouse(path) as wh:
        wh.con.execute("CREATE TABLE marker (n INTEGER)")
        wh.con.execute("INSERT INTO marker VALUES (1), (2), (3)")
        wh.publish()
    first = open_reader(path)
    second = open_reader(path)
    try:
        assert first.execute("SELECT count(*) FROM marker").fetchall() == [(3,)]
        assert second.execute("SELECT count(*) FROM marker").fetchall() == [(3,)]
        with pytest.raises(duckdb.Error):
            second.execute("SET enable_external_access = true")
    finally:
        first.close()
        second.close()


def test_readers_opened_at_once_in_many_threads(tmp_path: Path) -> None:
    path = tmp_path / "w.duckdb"
    with Warehouse(path) as wh:
        wh.con.execute("CREATE TABLE marker (n INTEGER)")
        wh.con.execute("INSERT INTO marker VALUES (1)")
    start = threading.Barrier(8)
    errors: list[BaseException] = []
    counts: list[int] = []

    def read() -> None:
        start.wait()
        try:
            con = open_reader(path)
            counts.append(con.execute("SELECT count(*) FROM marker").fetchall()[0][0])
            con.close()
        except BaseException as exc:  # noqa: BLE001 -- collected and asserted below
            errors.append(exc)

    threads = [threading.Thread(target=read) for _ in range(8)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(timeout=60)
    assert errors == []
    assert counts == [1] * 8
