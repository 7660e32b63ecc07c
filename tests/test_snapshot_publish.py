"""Publishing the snapshot survives a kill -9 mid-copy: the next open removes the dead copy."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from datetime import UTC, datetime
from pathlib import Path

import polars as pl

from preemptlens.readonly import query
from preemptlens.warehouse import Warehouse, remove_stale_publishes, snapshot_path

ROOT = Path(__file__).resolve().parents[1]

# Loads a few hundred thousand rows once, then publishes over and over until it is killed.
PUBLISHER = """
import sys
from datetime import UTC, datetime
import polars as pl
from preemptlens.warehouse import Warehouse
n = 300_000
with Warehouse(sys.argv[1], publish_every_s=1e9) as wh:
    wh.load("gpu_samples", pl.DataFrame({
        "cluster": ["c1"] * n, "host": [f"h{i % 97}" for i in range(n)], "gpu_uuid": [f"G{i % 8}" for i in range(n)],
        "time": [datetime.fromtimestamp(1_793_000_000 + i, UTC) for i in range(n)],
        "busy": [0.5] * n}), "test")
    wh.publish()
    print("published", flush=True)
    while True:
        wh.publish()
"""


def test_kill_9_mid_publish_leaves_nothing_behind_after_the_next_open(tmp_path: Path) -> None:
    path = tmp_path / "w.duckdb"
    child = subprocess.Popen([sys.executable, "-c", PUBLISHER, str(path)], cwd=ROOT, stdout=subprocess.PIPE,
                             text=True)
    try:
        assert child.stdout is not None and child.stdout.readline().strip() == "published"
        snapshot = snapshot_path(path)
        deadline = time.monotonic() + 60
        # Kill it while a copy is on disk (the loop spends most of its time copying).
        while not list(tmp_path.glob(f"{snapshot.name}.{child.pid}.*.tmp")):
            assert time.monotonic() < deadline, "the publisher never wrote a copy"
            time.sleep(0.005)
        os.kill(child.pid, signal.SIGKILL)
    finally:
        child.kill()
        child.wait()
    left = list(tmp_path.glob(f"{snapshot.name}.*.tmp*"))
    assert left, "the kill came between two copies; the test needs one to be on disk"

    with Warehouse(path) as wh:
        assert wh.query("SELECT count(*) AS n FROM gpu_samples")["n"][0] == 300_000
    assert not list(tmp_path.glob(f"{snapshot.name}.*.tmp*"))
    assert query(path, "SELECT count(*) FROM gpu_samples").frame.item() == 300_000


def test_a_live_publisher_s_copy_is_left_alone(tmp_path: Path) -> None:
    path = tmp_path / "w.duckdb"
    snapshot = snapshot_path(path)
    dead = subprocess.run([sys.executable, "-c", "import os; print(os.getpid())"], capture_output=True, text=True)
    dead_pid = int(dead.stdout)
    mine = tmp_path / f"{snapshot.name}.{os.getpid()}.1.tmp"
    stale = [tmp_path / f"{snapshot.name}.{dead_pid}.7.tmp", tmp_path / f"{snapshot.name}.{dead_pid}.7.tmp.wal"]
    other = tmp_path / "unrelated.tmp"
    for file in (mine, *stale, other):
        file.write_bytes(b"x")
    assert sorted(remove_stale_publishes(path)) == sorted(stale)
    assert mine.exists() and other.exists() and not any(f.exists() for f in stale)
    with Warehouse(path) as wh:
        wh.load("pools", pl.DataFrame({"cluster": ["c1"], "pool": ["a"], "gpus": [8],
                                       "valid_from": [datetime(2026, 11, 1, tzinfo=UTC)]}), "test")
    assert mine.exists() and snapshot.exists()


# Tries to open the warehouse for writing; prints what happened.
OPENER = """
import sys, duckdb
try:
    duckdb.connect(sys.argv[1]).close()
    print("opened")
except duckdb.IOException as exc:
    print("locked" if "lock" in str(exc).lower() else f"error: {exc}")
"""


def _other_process_opens(path: Path) -> str:
    return subprocess.run([sys.executable, "-c", OPENER, str(path)], capture_output=True, text=True,
                          check=True).stdout.strip()


def test_a_publish_copies_the_file_and_keeps_the_writer_s_lock(tmp_path: Path) -> None:
    path = tmp_path / "w.duckdb"
    with Warehouse(path) as wh:
        os.chmod(path, 0o640)
        wh.load("pools", pl.DataFrame({"cluster": ["c1"], "pool": ["a"], "gpus": [8],
                                       "valid_from": [datetime(2026, 11, 1, tzinfo=UTC)]}), "test")
        wh.publish()
        # Copying the file opened and closed no descriptor of it: DuckDB's lock still keeps others out.
        assert _other_process_opens(path) == "locked"
        assert query(path, "SELECT count(*) FROM pools").frame.item() == 1
        wh.load("pools", pl.DataFrame({"cluster": ["c1"], "pool": ["b"], "gpus": [4],
                                       "valid_from": [datetime(2026, 11, 1, tzinfo=UTC)]}), "test")
    snapshot = snapshot_path(path)
    # Owner only, however the warehouse was widened since (preemptlens.private: every file it writes).
    assert os.stat(snapshot).st_mode & 0o777 == 0o600, "the snapshot is private"
    # Closing wrote nothing after the last publish, so a reader does not copy the warehouse again.
    assert snapshot.stat().st_mtime >= path.stat().st_mtime
    assert not Path(f"{path}.wal").exists()
    assert query(path, "SELECT count(*) FROM pools").frame.item() == 2
    assert _other_process_opens(path) == "opened"


# Commits rows and is killed before anything checkpoints them: they sit in the write-ahead log only.
CRASHED_WRITER = """
import os, signal, sys, duckdb
con = duckdb.connect(sys.argv[1])
con.execute("SET checkpoint_threshold = '1GB'")
con.execute("INSERT INTO marker VALUES (2), (3)")
os.kill(os.getpid(), signal.SIGKILL)
"""


def test_a_reader_after_a_crashed_writer_copies_the_transactions_of_its_log(tmp_path: Path) -> None:
    path = tmp_path / "w.duckdb"
    with Warehouse(path) as wh:
        wh.con.execute("CREATE TABLE marker (x INTEGER)")
        wh.con.execute("INSERT INTO marker VALUES (1)")
        wh.mark_changed()
    assert query(path, "SELECT count(*) FROM marker").frame.item() == 1
    subprocess.run([sys.executable, "-c", CRASHED_WRITER, str(path)], check=False)
    assert Path(f"{path}.wal").stat().st_size > 0
    assert query(path, "SELECT count(*) FROM marker").frame.item() == 3
