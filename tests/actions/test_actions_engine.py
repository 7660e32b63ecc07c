"""The actions engine on hand-made live costs: thresholds, hysteresis, minimum hold, stepwise boost,
caps by pool share, dry-run, max hold, checkpoint release and reconciliation with the scheduler."""

from __future__ import annotations

from pathlib import Path

import pytest
from actions_world import H, World, kueue_boost, minutes, settings

from preemptlens.analytics import actions
from preemptlens.errors import ConfigError


class SchedulerState:
    """A scheduler's holds in memory, behind the Effector protocol (the Kubernetes effectors are tested against
    the fake API server in tests/kubernetes/test_k8s_actions.py)."""

    scheduler = "kueue"

    def __init__(self) -> None:
        self.levels: dict[str, int] = {}
        self.calls: list[tuple[str, str, object]] = []

    def held(self) -> dict[str, int]:
        self.calls.append(("held", "", None))
        return dict(self.levels)

    def apply(self, job_id: str, level: int) -> dict[str, str]:
        self.calls.append(("apply", job_id, level))
        self.levels[job_id] = level
        return {"before": "none"}

    def undo(self, job_id: str, detail: dict[str, str]) -> None:
        self.calls.append(("undo", job_id, detail))
        self.levels.pop(job_id, None)


def kueue(mode: str, **values: bool | int | float | str) -> str:
    """[kueue_boost] with the step, cap and holds these rules are tested on: steps of 100 up to 300, a
    minimum hold of 30 min and a maximum of 10 h."""
    return kueue_boost(mode, boost_step=100, max_boost=300, min_hold_s=1800, max_hold_s=36000, **values)


def cycle(world: World, s: dict[str, actions.ActionSettings], at: float, cost_gpu_s: float | None,
          bound: dict[str, tuple[str, SchedulerState]] | None = None) -> list[actions.ActionReport]:
    """One engine cycle at minute `at`, just after job "j"'s live cost became `cost_gpu_s`: the step most
    rule tests here take, often several times."""
    world.cost("j", minutes(at), cost_gpu_s)
    return actions.run(world.wh, s, bound or {}, minutes(at))


def held_from_minute_zero(world: World, tmp_path: Path, **values: bool | int | float | str
                          ) -> dict[str, actions.ActionSettings]:
    """Dry-run settings (kueue() with `values`) and job "j" held since minute 0 for a live cost of 9 GPU-h,
    above the high mark: where the tests of what releases a hold start."""
    s = settings(tmp_path, kueue("dry-run", **values))
    world.job("j")
    cycle(world, s, 0, 9 * H)
    return s


def test_dry_run_writes_audit_rows_above_the_high_mark_and_calls_no_effector(world: World, tmp_path: Path) -> None:
    s = settings(tmp_path, kueue("dry-run"))
    for job in ("costly", "cheap", "unknown"):
        world.job(job)
    world.cost("costly", minutes(0), 9 * H)
    world.cost("cheap", minutes(0), 7.9 * H)
    world.cost("unknown", minutes(0), None, None)
    scheduler = SchedulerState()
    [report] = actions.run(world.wh, s, {"kueue_boost": ("c1", scheduler)}, minutes(0))
    assert scheduler.calls == []
    assert report.applied == ["costly"]
    [row] = world.rows()
    assert (row["mode"], row["level"], row["cost_gpu_s"], row["scheduler"]) == ("dry-run", 100, 9 * H, "kueue")
    assert "2.5 GPU-h" not in row["why"] and "9.0 GPU-h >= kueue_boost.cost_high_gpu_s (8.0 GPU-h)" in row["why"]
    assert row["detail"] is None


def test_hysteresis_and_minimum_hold(world: World, tmp_path: Path) -> None:
    s = held_from_minute_zero(world, tmp_path)
    # Between the marks: held.
    cycle(world, s, 40, 6 * H)
    assert world.open("kueue_boost") == {"j": 100}
    # Below the low mark, but a step changed nothing and the hold is 45 min old: released.
    cycle(world, s, 45, 3 * H)
    assert world.open("kueue_boost") == {}
    assert "below the low marks (live cost 3.0 GPU-h" in world.rows()[-1]["undo_why"]
    # Between the marks again: not held (only the high mark holds).
    cycle(world, s, 50, 7 * H)
    assert world.open("kueue_boost") == {}


def test_a_new_hold_is_kept_for_the_minimum_hold_even_when_the_cost_drops(world: World, tmp_path: Path) -> None:
    s = held_from_minute_zero(world, tmp_path)
    cycle(world, s, 10, 1 * H)
    assert world.open("kueue_boost") == {"j": 100}
    actions.run(world.wh, s, {}, minutes(30))
    assert world.open("kueue_boost") == {}


def test_boost_moves_one_step_per_minimum_hold_up_to_max_boost(world: World, tmp_path: Path) -> None:
    s = settings(tmp_path, kueue("enforce"))
    scheduler = SchedulerState()
    bound = {"kueue_boost": ("c1", scheduler)}
    world.job("j")
    cycle(world, s, 0, 8 * H, bound)
    assert scheduler.levels == {"j": 100}
    cycle(world, s, 10, 50 * H, bound)  # calls for 600, capped at max_boost 300
    assert scheduler.levels == {"j": 100}  # within the minimum hold
    for at, expected in ((31, 200), (45, 200), (62, 300), (100, 300)):
        cycle(world, s, at, 50 * H, bound)
        assert scheduler.levels == {"j": expected}, at
    rows = world.rows()
    assert [r["level"] for r in rows] == [100, 200, 300]
    assert [r["undo_why"] for r in rows] == ["stepped to 200", "stepped to 300", None]
    assert {r["held_since"] for r in rows} == {minutes(0)}
    # The first apply's detail is carried: undo restores the state from before the hold.
    assert all(r["detail"] == '{"before": "none"}' for r in rows)
    # Cost falls between the marks: one step down per minimum hold, not straight to the target.
    cycle(world, s, 100, 4.5 * H, bound)
    assert scheduler.levels == {"j": 200}


def test_pool_share_cap_holds_the_costliest_and_unknown_capacity_holds_none(world: World, tmp_path: Path) -> None:
    s = settings(tmp_path, """
[kai_protect]
enabled = true
near_completion_high = 0.9
near_completion_low = 0.85
max_pool_share = 0.25
""")
    world.pool("p1", 64)  # 16 GPUs may be held
    for job, near in (("a", 0.91), ("b", 0.97), ("c", 0.93)):
        world.job(job)
        world.cost(job, minutes(0), None, near)
    world.job("elsewhere", pool="p2")
    world.cost("elsewhere", minutes(0), None, 0.99, pool="p2")
    [report] = actions.run(world.wh, s, {}, minutes(0))
    assert world.open("kai_protect") == {"b": 1, "c": 1}
    assert sorted(report.capped) == ["a", "elsewhere"]
    assert "near-completion share 0.97 >= kai_protect.near_completion_high (0.9)" in world.rows()[0]["why"]


def test_max_jobs_caps_across_pools(world: World, tmp_path: Path) -> None:
    s = settings(tmp_path, kueue("dry-run", max_jobs=1))
    for job, cost in (("a", 10 * H), ("b", 20 * H)):
        world.job(job)
        world.cost(job, minutes(0), cost)
    [report] = actions.run(world.wh, s, {}, minutes(0))
    assert world.open("kueue_boost") == {"b": 100}
    assert report.capped == ["a"]


def test_kai_protection_ends_when_the_job_ends_or_at_max_hold_and_is_not_renewed(
        world: World, tmp_path: Path) -> None:
    s = settings(tmp_path, """
[kai_protect]
enabled = true
near_completion_high = 0.9
max_hold_s = 7200
max_pool_share = 1.0
""")
    for job in ("ends", "runs-on"):
        world.job(job)
        world.cost(job, minutes(0), None, 0.95)
    actions.run(world.wh, s, {}, minutes(0))
    assert world.open("kai_protect") == {"ends": 1, "runs-on": 1}
    world.gone("ends")
    world.cost("runs-on", minutes(60), None, 0.97)
    actions.run(world.wh, s, {}, minutes(60))
    assert world.open("kai_protect") == {"runs-on": 1}
    world.cost("runs-on", minutes(120), None, 0.99)
    actions.run(world.wh, s, {}, minutes(120))
    world.cost("runs-on", minutes(150), None, 0.99)
    actions.run(world.wh, s, {}, minutes(150))
    assert world.open("kai_protect") == {}
    undo = {r["job_id"]: r["undo_why"] for r in world.rows()}
    assert undo == {"ends": "the job has no live cost: it ended or is not running",
                    "runs-on": "reached max_hold_s (2.0 h)"}


def test_stale_live_cost_releases(world: World, tmp_path: Path) -> None:
    s = held_from_minute_zero(world, tmp_path, stale_after_s=600)
    actions.run(world.wh, s, {}, minutes(11))
    assert world.open("kueue_boost") == {}
    assert world.rows()[0]["undo_why"].startswith("its live cost is stale")


def test_slurm_protects_a_costly_victim_while_it_waits_and_never_releases_it_while_it_runs(
        world: World, tmp_path: Path) -> None:
    # slurmctld moves a job to another QOS only while it is pending (tests/slurm/test_slurm_actions.py).
    s = settings(tmp_path, """
[slurm_protect]
enabled = true
mode = "enforce"
max_pool_share = 1.0
""")
    scheduler = SchedulerState()
    bound = {"slurm_protect": ("c1", scheduler)}
    for job in ("123", "456", "789"):
        world.job(job, source="slurm")
    world.job("pod", source="kubernetes")
    world.run("123", 1, "running", minutes(-120))
    world.cost("123", minutes(-1), 9 * H)  # its live cost, the last computation before it was preempted
    world.run("789", 1, "running", minutes(-120))
    world.cost("789", minutes(-1), 0.5 * H)  # preempted too, but cheaply
    world.run("456", 1, "running", minutes(-60))
    world.cost("456", minutes(0), 9 * H)  # costly but running: Slurm cannot protect it now
    world.cost("pod", minutes(0), 9 * H)
    for job in ("123", "789"):
        world.gone(job)
        world.run(job, 1, "preempted", minutes(-120), minutes(-1))
        world.run(job, 2, "pending", None)
    actions.run(world.wh, s, bound, minutes(0))
    assert world.open("slurm_protect") == {"123": 1}
    changes = [c for c in scheduler.calls if c[0] != "held"]
    assert changes == [("apply", "123", 1)]
    assert "live cost 9.0 GPU-h" in world.rows("slurm_protect")[0]["why"]

    # It restarts in the protected QOS, checkpoints, its cost falls, max_hold_s passes: held all the same,
    # since undo on a running job is refused; a running job's hold ends when the job does.
    world.run("123", 2, "running", minutes(2))
    world.checkpoint("123", minutes(30))
    world.cost("123", minutes(24 * 60 + 5), 0.1 * H)
    world.cost("456", minutes(24 * 60 + 5), 9 * H)
    actions.run(world.wh, s, bound, minutes(24 * 60 + 5))
    assert world.open("slurm_protect") == {"123": 1}
    assert [c for c in scheduler.calls if c[0] != "held"] == changes

    world.gone("123")
    world.run("123", 2, "completed", minutes(2), minutes(24 * 60 + 6))
    actions.run(world.wh, s, bound, minutes(24 * 60 + 10))
    assert world.open("slurm_protect") == {}
    assert scheduler.calls[-1] == ("undo", "123", {"before": "none"})
    assert world.rows("slurm_protect")[0]["undo_why"].startswith("the job has no live cost")


def test_reconcile_closes_rows_the_scheduler_does_not_hold_and_undoes_unrecorded_holds(
        world: World, tmp_path: Path) -> None:
    s = settings(tmp_path, kueue("enforce"))
    scheduler = SchedulerState()
    bound = {"kueue_boost": ("c1", scheduler)}
    for job in ("a", "b"):
        world.job(job)
        world.cost(job, minutes(0), 9 * H)
    actions.run(world.wh, s, bound, minutes(0))
    assert scheduler.levels == {"a": 100, "b": 100}
    # Someone removed b's boost; c was boosted by a run that died before its audit row.
    del scheduler.levels["b"]
    scheduler.levels["c"] = 200
    world.cost("b", minutes(1), 1 * H)  # below the marks: not held again
    scheduler.calls.clear()
    [report] = actions.run(world.wh, s, bound, minutes(1))
    assert scheduler.levels == {"a": 100}
    assert ("undo", "c", {}) in scheduler.calls
    assert sorted(report.reconciled) == ["b", "c"]
    rows = {r["job_id"]: r for r in world.rows()}
    assert rows["b"]["undo_why"] == "not held by the scheduler (it holds nothing); closed at reconcile"
    assert rows["c"]["undo_why"] == "released at reconcile: the hold was not recorded"
    assert rows["c"]["level"] == 200 and rows["c"]["undone_at"] == minutes(1)


def enforced_hold(world: World, tmp_path: Path) -> SchedulerState:
    """Job "a" held in enforce mode since minute 0 for a live cost of 9 GPU-h; the scheduler holding it is
    returned. Where the tests of what releases an enforced hold start."""
    scheduler = SchedulerState()
    world.job("a")
    world.cost("a", minutes(0), 9 * H)
    actions.run(world.wh, settings(tmp_path, kueue("enforce")), {"kueue_boost": ("c1", scheduler)}, minutes(0))
    return scheduler


def test_switching_to_dry_run_releases_enforced_holds(world: World, tmp_path: Path) -> None:
    scheduler = enforced_hold(world, tmp_path)
    actions.run(world.wh, settings(tmp_path, kueue("dry-run")), {"kueue_boost": ("c1", scheduler)},
                minutes(1))
    assert scheduler.levels == {}
    assert [(r["mode"], r["undo_why"]) for r in world.rows()] == [("enforce", "mode changed to dry-run"),
                                                                   ("dry-run", None)]


def test_settings_are_checked_together(tmp_path: Path) -> None:
    with pytest.raises(ConfigError) as err:
        settings(tmp_path, """
[kueue_boost]
enabled = true
cost_high_gpu_s = 100
cost_low_gpu_s = 200
max_pool_share = 0
""")
    assert "cost_low_gpu_s: must not exceed" in str(err.value) and "max_pool_share" in str(err.value)


def test_disabling_an_enforcing_action_releases_its_holds(world: World, tmp_path: Path) -> None:
    scheduler = enforced_hold(world, tmp_path)
    assert actions.open_enforced(world.wh) == {"kueue_boost"}
    off = settings(tmp_path, kueue("enforce", enabled=False))
    actions.run(world.wh, off, {"kueue_boost": ("c1", scheduler)}, minutes(1))
    assert scheduler.levels == {} and actions.open_enforced(world.wh) == set()
    assert world.rows()[0]["undo_why"] == "the action was disabled"


def test_enforce_without_an_effector_is_refused(tmp_path: Path) -> None:
    from preemptlens.cli import main

    config = tmp_path / "c.toml"
    config.write_text(f'[warehouse]\npath = "{tmp_path / "w.duckdb"}"\n[slurm_protect]\nenabled = true\n'
                      'mode = "enforce"\n')
    assert main(["--config", str(config), "act"]) == 2


def test_a_recorded_detail_that_is_not_an_object_of_texts_is_undone_as_unrecorded(
        world: World, tmp_path: Path, caplog: pytest.LogCaptureFixture) -> None:
    """The audit row is data: what undo is handed is an object of texts (or nothing), never what a changed row
    holds; the effector then restores its documented default (tests/slurm/test_qos_checked.py: and checks it)."""
    s = settings(tmp_path, kueue("enforce"))
    world.job("j")
    scheduler = SchedulerState()
    bound = {"kueue_boost": ("c1", scheduler)}
    cycle(world, s, 0, 9 * H, bound)
    assert world.open("kueue_boost") == {"j": 100}
    world.wh.con.execute("UPDATE actions SET detail = $d", {"d": '{"qos": ["normal", "--help"]}'})
    cycle(world, s, 60, 0.1 * H, bound)
    assert world.open("kueue_boost") == {}
    assert scheduler.calls[-1] == ("undo", "j", {})
    assert "detail is not an object of texts" in caplog.text
