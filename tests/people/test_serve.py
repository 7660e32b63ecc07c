"""`preemptlens serve` as a real process: jobs on schedule, clean stop on SIGTERM."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from pathlib import Path

from preemptlens.readonly import Limits, query
from preemptlens.warehouse import Warehouse

ROOT = Path(__file__).resolve().parents[2]
HERE = Path(__file__).resolve().parent
ROWS = 5


def start_serve(tmp_path: Path, collect: str, interval: float | str, jobs: str) -> subprocess.Popen[str]:
    config = tmp_path / "serve.toml"
    config.write_text(
        f'[warehouse]\npath = "{tmp_path / "w.duckdb"}"\n'
        f"[serve]\njobs = {jobs}\ncollect = [\"{collect}\"]\n"
        f"collect_interval_s = {interval}\nalerts_interval_s = {interval}\nsnapshot_interval_s = 0\n"
        "[alerts]\nrules = []\n"
    )
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(HERE), str(ROOT)])}
    return subprocess.Popen(
        [sys.executable, "-m", "preemptlens.cli", "--config", str(config), "serve", "--no-dashboard"],
        cwd=tmp_path,
        env=env,
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
    )


def wait_for(predicate: object, timeout: float) -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if callable(predicate) and predicate():
            return
        time.sleep(0.2)
    raise AssertionError(f"condition not met within {timeout} s")


def probe_loads(tmp_path: Path) -> int:
    path = tmp_path / "w.duckdb"
    if not path.exists():
        return 0
    try:
        return int(query(path, "SELECT count(*) FROM _loads WHERE source = 'probe'", Limits(wait_s=0)).frame.item())
    except Exception:  # noqa: BLE001 - before the first snapshot the warehouse may be mid-creation
        return 0


def test_jobs_run_on_schedule_and_stop_cleanly(tmp_path: Path) -> None:
    jobs = '["collect", "alerts", "report"]'
    serve = start_serve(tmp_path, f"serve_probe_source --rows {ROWS} --batches 1", interval=1, jobs=jobs)
    started = time.monotonic()
    try:
        wait_for(lambda: probe_loads(tmp_path) >= 4, timeout=60)
        elapsed = time.monotonic() - started
    finally:
        serve.send_signal(signal.SIGTERM)
        out, _ = serve.communicate(timeout=60)
    assert serve.returncode == 0, out
    # One batch per run at a 1 s interval: four runs take at least three seconds.
    assert elapsed >= 3, out
    assert out.count("job collect:serve_probe_source done") >= 4, out
    assert "job alerts done" in out, out
    # A job whose command is not installed is not scheduled, and the log says so.
    report_installed = (ROOT / "preemptlens" / "commands" / "report.py").exists()
    assert report_installed or "report: no `preemptlens report` in this installation; not scheduled" in out, out
    assert "stopped" in out.splitlines()[-1], out


def test_sigterm_mid_collection_keeps_whole_batches(tmp_path: Path) -> None:
    collect = f"serve_probe_source --rows {ROWS} --batches 100000 --pause 0.05"
    serve = start_serve(tmp_path, collect, interval=600, jobs='["collect"]')
    try:
        wait_for(lambda: probe_loads(tmp_path) >= 3, timeout=60)
    finally:
        serve.send_signal(signal.SIGTERM)
        out, _ = serve.communicate(timeout=60)
    assert serve.returncode == 0, out
    assert "stopping: collection serve_probe_source ends after its committed batch" in out, out
    with Warehouse(tmp_path / "w.duckdb") as wh:
        jobs, loads = wh.query("SELECT count(*), count(DISTINCT _load_id) FROM jobs").row(0)
        (cursor,) = wh.watermarks("probe").values()
    assert loads >= 3
    assert jobs == loads * ROWS, "a half-written batch"
    assert int(cursor) == loads, "the watermark moved with exactly the committed batches"
    # The snapshot published at the end holds the same whole batches.
    assert query(tmp_path / "w.duckdb", "SELECT count(*) FROM jobs").frame.item() == jobs
