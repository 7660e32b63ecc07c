"""`preemptlens serve` stops within seconds on SIGTERM whatever its running job is doing, and refuses a
schedule that would spin."""

from __future__ import annotations

import signal
import subprocess
import time
from pathlib import Path

from preemptlens.commands.serve import STOP_WAIT_S
from tests.people.test_serve import probe_loads, start_serve, wait_for


def inside_first_batch(tmp_path: Path) -> None:
    """Wait until the collection job has opened the warehouse: from then on it is in its minute-long first batch
    (or about to be), however long a loaded machine took to start serve."""
    wait_for(lambda: (tmp_path / "w.duckdb").exists(), timeout=120)


def test_a_job_that_does_not_stop_is_abandoned_within_seconds(tmp_path: Path) -> None:
    # Each batch takes a minute: a stop that waited for the job would wait that long.
    serve = start_serve(tmp_path, "serve_probe_source --rows 2 --batches 3 --pause 60", interval=600,
                        jobs='["collect"]')
    try:
        inside_first_batch(tmp_path)
    finally:
        serve.send_signal(signal.SIGTERM)
        began = time.monotonic()
        try:
            out, _ = serve.communicate(timeout=30)
        except subprocess.TimeoutExpired:
            serve.kill()
            raise
        took = time.monotonic() - began
    assert serve.returncode == 0, out
    assert took < STOP_WAIT_S + 4, f"stopped after {took:.1f} s"
    assert "stopped without waiting for job collect:serve_probe_source" in out, out


def test_a_second_signal_exits_at_once(tmp_path: Path) -> None:
    serve = start_serve(tmp_path, "serve_probe_source --rows 2 --batches 3 --pause 60", interval=600,
                        jobs='["collect"]')
    inside_first_batch(tmp_path)
    serve.send_signal(signal.SIGTERM)
    time.sleep(0.5)
    serve.send_signal(signal.SIGTERM)
    out, _ = serve.communicate(timeout=10)
    assert serve.returncode == 1 and "again: exiting now" in out, out


def test_a_committed_batch_is_kept_when_the_job_is_abandoned(tmp_path: Path) -> None:
    serve = start_serve(tmp_path, "serve_probe_source --rows 2 --batches 2 --pause 8", interval=600,
                        jobs='["collect"]')
    try:
        wait_for(lambda: probe_loads(tmp_path) >= 1, timeout=60)
    finally:
        serve.send_signal(signal.SIGTERM)
        out, _ = serve.communicate(timeout=30)
    assert serve.returncode == 0, out
    assert probe_loads(tmp_path) >= 1


def test_a_zero_or_negative_interval_is_refused_at_start(tmp_path: Path) -> None:
    for interval in ("0", "-5", "1e300"):
        serve = start_serve(tmp_path, "serve_probe_source", interval=interval, jobs='["collect", "alerts"]')
        out, _ = serve.communicate(timeout=60)
        assert serve.returncode == 2, out
        assert "serve.collect_interval_s" in out and "serve.alerts_interval_s" in out, out
        assert "Traceback" not in out
