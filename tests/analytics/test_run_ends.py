"""Every run's end classified by its cause (sql/views/run_ends.sql, restart_causes.sql) on a hand-built cluster
whose causes the test sets: a preemption (by its state, and a requeue a preemption link binds), a node failure,
a user's requeue, a cancel, a time limit, a crash, a job that stopped making progress long before a watchdog
cancelled it, one that was merely slow between two reports, a completion and a run still going; who asked for
a cancel, a requeue or a hang's end (the job's own user, or an admin), where the scheduler records it."""

from __future__ import annotations

import pytest
from analytics_scenario import Scenario, at

H = 3600.0


def _reports(sc: Scenario, job: str, run: int, start: float, until: float, every: float) -> None:
    t = start + every
    while t <= until:
        sc.add("checkpoints", job_id=job, run=run, time=at(t), kind="progress", step=t)
        t += every


def build(sc: Scenario) -> None:
    sc.pool("p", 64)
    ends = {
        # job: (state, end, team)
        "pre": ("preempted", 2 * H, "a"),
        "link": ("requeued", 2 * H, "a"),  # a requeue the scheduler's log calls a preemption
        "node": ("node_fail", 3 * H, "a"),
        "req": ("requeued", 3 * H, "b"),  # `scontrol requeue`: nothing says preempted
        "can": ("cancelled", 1 * H, "b"),
        "adm": ("cancelled", 1 * H, "b"),  # cancelled by root: an admin
        "other": ("cancelled", 1 * H, "b"),  # by a uid sacct's text names, not root: whose, the record does not say
        "tl": ("timeout", 4 * H, "b"),
        "crash": ("failed", 1.5 * H, "b"),
        "hang": ("cancelled", 5 * H, "b"),  # reported every 60 s until 2 h, then nothing for 3 h
        "slow": ("failed", 5 * H, "b"),  # reported every 40 min to the end: its silence is its usual gap
        "done": ("completed", 2 * H, "a"),
        "going": ("running", None, "a"),
    }
    ended_by = {"can": "user-can", "adm": "root", "other": "uid 1001", "hang": "uid 0", "tl": "slurm"}
    for job, (state, end, team) in ends.items():
        sc.job(job, "low", 4, "p", 0, team=team)
        sc.run(job, 1, 4, "p", 0, end, state, submit=0, ended_by=ended_by.get(job))
    # every job that did not complete or still runs ran again, but the crash
    for job in ("pre", "link", "node", "req", "can", "tl", "hang", "slow"):
        restart = ends[job][1] + 600
        sc.run(job, 2, 4, "p", restart, restart + H, "completed", submit=ends[job][1])
    sc.add("preemption_links", victim_job_id="link", time=at(2 * H), preemptor_job_id="x", reason="preempted")
    sc.job("x", "high", 4, "p", 2 * H - 60, team="c")
    sc.run("x", 1, 4, "p", 2 * H, 3 * H, "completed", submit=2 * H - 60)
    _reports(sc, "hang", 1, 0, 2 * H, 60)
    _reports(sc, "slow", 1, 0, 5 * H, 2400)
    _reports(sc, "crash", 1, 0, 1.5 * H, 60)


def test_every_end_has_its_cause(sc: Scenario) -> None:
    build(sc)
    sc.analyze()
    causes = {r["job_id"]: r["cause"] for r in sc.wh.query(
        "SELECT job_id, cause FROM run_ends WHERE run = 1").to_dicts()}
    assert causes == {
        "pre": "preemption", "link": "preemption", "node": "node_failure", "req": "requeue", "can": "cancel",
        "adm": "cancel", "other": "cancel",
        "tl": "time_limit", "crash": "crash", "hang": "hang", "slow": "crash", "done": "completed",
        "going": "running", "x": "completed",
    }
    hang = sc.wh.query("SELECT * FROM run_ends WHERE job_id = 'hang' AND run = 1").to_dicts()[0]
    assert hang["silent_s"] == pytest.approx(3 * H) and hang["usual_gap_s"] == pytest.approx(60)
    # who asked: the job's own user, or root (by name in JSON, uid 0 in text); nobody recorded (the requeue), a
    # uid whose owner the record does not name, and any end but a cancel, requeue or hang: NULL
    by = {r["job_id"]: r["cause_by"] for r in sc.wh.query(
        "SELECT job_id, cause_by FROM run_ends WHERE run = 1 AND cause_by IS NOT NULL").to_dicts()}
    assert by == {"can": "user", "adm": "admin", "hang": "admin"}
    # the ledger holds the preemptions only
    ledger = sorted(sc.wh.query("SELECT victim_job_id FROM preemption_ledger")["victim_job_id"].to_list())
    assert ledger == ["link", "pre"]


def test_restarts_by_cause_per_team(sc: Scenario) -> None:
    build(sc)
    sc.analyze()
    rows = {(r["team"], r["cause"]): r for r in sc.wh.query(
        "SELECT team, cause, sum(runs) AS runs, sum(restarts) AS restarts, sum(run_gpu_h) AS run_gpu_h, "
        "sum(silent_gpu_h) AS silent_gpu_h FROM restart_causes WHERE level = 'team' GROUP BY team, cause").to_dicts()}
    assert set(rows) == {("a", "preemption"), ("a", "node_failure"), ("b", "requeue"), ("b", "cancel"),
                         ("b", "time_limit"), ("b", "crash"), ("b", "hang")}
    assert rows[("a", "preemption")]["runs"] == 2 and rows[("a", "preemption")]["restarts"] == 2
    assert rows[("b", "crash")]["runs"] == 2 and rows[("b", "crash")]["restarts"] == 1  # "crash" did not rerun
    assert rows[("b", "hang")]["run_gpu_h"] == pytest.approx(4 * 5)
    assert rows[("b", "hang")]["silent_gpu_h"] == pytest.approx(4 * 3)
    assert rows[("b", "crash")]["silent_gpu_h"] is None
    cluster = sc.wh.query("SELECT day, sum(runs) AS runs FROM restart_causes WHERE level = 'cluster' GROUP BY day")
    assert cluster["runs"].sum() == 11 and cluster.height == 1  # every end on the first day
    # the cancels apart by who asked for them
    cancels = dict(sc.wh.query("SELECT cause_by, runs FROM restart_causes WHERE level = 'team' AND team = 'b' "
                               "AND cause = 'cancel'").rows())
    assert cancels == {"user": 1, "admin": 1, None: 1}
