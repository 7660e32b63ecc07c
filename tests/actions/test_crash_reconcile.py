"""kill -9 of `preemptlens serve` in the middle of an action leaves no job held for good: the next start
reconciles the audit table with what the (fake) API server holds."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from datetime import UTC, datetime, timedelta
from pathlib import Path

from actions_world import H, World
from k8s_fake import MERGE_PATCH, FakeApiServer, Patch, load_case, serve_workload_crd

from preemptlens.cli import main
from preemptlens.warehouse import Warehouse

WORKLOADS = "/apis/kueue.x-k8s.io/v1beta1/workloads"
LOW = "5a5a0000-bbbb-4ccc-8ddd-000000000001"  # team-a/job-low-4f2a1
MID = "5a5a0000-bbbb-4ccc-8ddd-000000000002"  # team-a/job-mid-1
ROOT = Path(__file__).resolve().parents[2]


def _boosts(api: FakeApiServer) -> dict[str, str | None]:
    return {name: (api.get(WORKLOADS, "team-a", name) or {})["metadata"].get("annotations", {}).get(
        "kueue.x-k8s.io/priority-boost") for name in ("job-low-4f2a1", "job-mid-1")}


def test_kill_9_mid_action_then_the_next_start_reconciles(tmp_path: Path, api: FakeApiServer) -> None:
    api.add(WORKLOADS, *load_case("workloads_v1beta1.json")["items"])
    serve_workload_crd(api, "0.19")  # a Kueue that reads the boost annotation
    now = datetime.now(UTC)
    warehouse = tmp_path / "w.duckdb"
    with Warehouse(warehouse) as wh:
        world = World(wh)
        for job, cost in ((MID, 10 * H), (LOW, 9 * H)):
            world.job(job)
            world.cost(job, now, cost)
    config = tmp_path / "preemptlens.toml"
    config.write_text(f"""
[warehouse]
path = "{warehouse}"
[cluster]
name = "c1"
[kubernetes]
api_url = "{api.url}"
[serve]
jobs = ["actions"]
metrics_port = 0
actions_interval_s = 1.0
[kueue_boost]
enabled = true
mode = "enforce"
cost_high_gpu_s = 28800
cost_low_gpu_s = 14400
max_hold_s = 7200
stale_after_s = 86400
""")
    # The second PATCH takes effect on the server and is never answered: serve is killed inside apply.
    api.hold_patches_from = 2
    serve = subprocess.Popen([sys.executable, "-m", "preemptlens.cli", "--config", str(config), "serve",
                              "--no-dashboard"], cwd=ROOT, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
    try:
        deadline = time.monotonic() + 120
        while len(api.patches) < 2 and serve.poll() is None and time.monotonic() < deadline:
            time.sleep(0.05)
        assert len(api.patches) == 2, serve.stderr.read().decode() if serve.poll() is not None else "no patch"
        os.kill(serve.pid, signal.SIGKILL)
        assert serve.wait(timeout=30) == -signal.SIGKILL
    finally:
        if serve.poll() is None:
            serve.kill()
            serve.wait()
        assert serve.stderr is not None
        serve.stderr.close()
    api.hold_patches_from = None
    assert _boosts(api) == {"job-low-4f2a1": "100", "job-mid-1": "100"}
    with Warehouse(warehouse) as wh:
        rows = {r["job_id"]: r for r in wh.query("SELECT * FROM actions").iter_rows(named=True)}
        # The costlier job's hold was recorded whole; the other's row was written, its detail not yet.
        assert rows[MID]["detail"] is not None and rows[LOW]["detail"] is None
        assert rows[MID]["undone_at"] is None and rows[LOW]["undone_at"] is None
        World(wh).gone(MID)  # it finished while preemptlens was down

    # The next start of serve: the finished job's boost is removed; the other stays held (the server holds it).
    sent = len(api.patches)
    serve = subprocess.Popen([sys.executable, "-m", "preemptlens.cli", "--config", str(config), "serve",
                              "--no-dashboard"], cwd=ROOT, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
    try:
        deadline = time.monotonic() + 120
        while len(api.patches) == sent and serve.poll() is None and time.monotonic() < deadline:
            time.sleep(0.05)
        serve.send_signal(signal.SIGTERM)
        assert serve.wait(timeout=60) == 0
    finally:
        if serve.poll() is None:
            serve.kill()
            serve.wait()
        assert serve.stderr is not None
        log = serve.stderr.read().decode()
        serve.stderr.close()
    assert "kueue_boost (enforce): 1 released" in log, log
    mid_path = "/apis/kueue.x-k8s.io/v1beta1/namespaces/team-a/workloads/job-mid-1"
    removal = {"metadata": {"labels": {"preemptlens.io/action": None},
                            "annotations": {"kueue.x-k8s.io/priority-boost": None}}}
    assert api.patches[sent:] == [Patch(mid_path, MERGE_PATCH, removal)]
    assert _boosts(api) == {"job-low-4f2a1": "100", "job-mid-1": None}
    # And its hold, whose detail was lost, still ends at max_hold_s.
    sent = len(api.patches)
    assert main(["--config", str(config), "act", "--now", (now + timedelta(hours=2, minutes=1)).isoformat()]) == 0
    low_path = "/apis/kueue.x-k8s.io/v1beta1/namespaces/team-a/workloads/job-low-4f2a1"
    assert api.patches[sent:] == [Patch(low_path, MERGE_PATCH, removal)]
    assert _boosts(api) == {"job-low-4f2a1": None, "job-mid-1": None}
    with Warehouse(warehouse) as wh:
        undone = dict(wh.query("SELECT job_id, undo_why FROM actions").iter_rows())
    assert undone == {MID: "the job has no live cost: it ended or is not running", LOW: "reached max_hold_s (2.0 h)"}
