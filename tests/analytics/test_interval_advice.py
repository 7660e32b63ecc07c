"""The Young/Daly checkpoint-interval advice on a hand-built cluster whose saving is known.

Pool p holds five nodes of 4 GPUs. Team t runs five 4-GPU low jobs from 0, each checkpointing every 2 h
(first at 2 h, every save timed at 60 s, as a files or logs stream gives it) for 27,000 s of run time in
all; job k is preempted at 3 h + k x 10 min by a high job of team hi and restarts 10 minutes later.

- Young/Daly: cost C = 60 s (the median timed save), mean time between preemptions M = 5 x 27,000 s / 5
  = 27,000 s, so tau = sqrt(2 x 60 x 27,000) = 1,800 s: every 30 minutes instead of 2 hours.
- What happened: victim k lost the time since its 2 h checkpoint, 3,600 + 600 k s, on 4 GPUs: 26.67
  GPU-hours in all. At 30 minutes the last checkpoint before 3 h + k x 10 min is at 3 h, 3 h, 3 h, 3.5 h
  and 3.5 h: losses 0, 600, 1,200, 0 and 600 s, 2.67 GPU-hours. The extra saves cost 60 s x 4 GPUs x
  135,000 s x (1/1,800 - 1/7,200) = 3.75 GPU-hours: a saving of 20.25 GPU-hours.
"""

from __future__ import annotations

import pytest
from analytics_scenario import Scenario, at

from preemptlens.analytics.whatif.replay import default_window
from preemptlens.analytics.whatif.tuning import (
    Context,
    TuningSettings,
    check_interval,
    checkpoint_interval,
    context,
    hazard_schedule,
    last_checkpoint_under,
    saves_per_s,
    schedule_text,
)

H = 3600.0
RUN_S = 27000.0


def build(sc: Scenario) -> None:
    sc.add("pools", pool="p", gpus=20, gpus_per_node=4, valid_from=at(-86400))
    for k in range(5):
        preempted = 3 * H + 600 * k
        restart = preempted + 600
        job = f"t{k}"
        sc.job(job, "low", 4, "p", 0, team="t")
        sc.run(job, 1, 4, "p", 0, preempted, "preempted", submit=0, preemptor_job_id=f"x{k}", reason="priority")
        sc.run(job, 2, 4, "p", restart, restart + RUN_S - preempted, "completed", submit=preempted)
        for run, start, end in ((1, 0.0, preempted), (2, restart, restart + RUN_S - preempted)):
            t = start + 2 * H
            while t < end:
                sc.add("checkpoints", job_id=job, run=run, time=at(t), kind="checkpoint", step=t, save_s=60.0)
                t += 2 * H
        sc.job(f"x{k}", "high", 4, "p", preempted - 60, team="hi")
        sc.run(f"x{k}", 1, 4, "p", preempted, preempted + 600, "completed", submit=preempted - 60)


@pytest.fixture
def ctx(sc: Scenario) -> Context:
    build(sc)
    sc.analyze()
    return context(sc.wh, default_window(sc.wh, "c1"), TuningSettings(processes=1))


def test_the_advised_interval_checked_against_what_happened(ctx: Context) -> None:
    check = check_interval(ctx, "t", current=2 * H, proposed=1800.0, cost=60.0, run_gpu_s=5 * 4 * RUN_S)
    assert check.preemptions == 5
    assert check.lost_gpu_h == pytest.approx(4 * (5 * 3600 + 600 * 10) / 3600)
    assert check.advised_lost_gpu_h == pytest.approx(4 * 2400 / 3600)
    assert check.extra_saves_gpu_h == pytest.approx(3.75)
    assert check.saving_gpu_h == pytest.approx(20.25)
    # another team's preemptions are not this team's evidence
    assert check_interval(ctx, "hi", 2 * H, 1800.0, 60.0, 0.0).preemptions == 0


def test_young_daly_reads_the_timed_saves_and_the_measured_cadence(ctx: Context) -> None:
    (advice,) = checkpoint_interval(ctx)
    assert advice.subject == "t"
    assert (advice.current, advice.proposed) == ("2.0 h", "30 min")
    # five saves in the preempted runs, eight in the restarts (two in the three longest)
    assert "checkpoint cost 60 s (measured: median of 13 timed saves)" in advice.evidence
    assert "5 jobs' measured cadence and 0 declared" in advice.evidence
    # five preemptions are too few to tell the hazard's bands apart: one pooled band, the mean rate's interval
    assert "by run age (from 0 s: 5 in 38 run-hours)" in advice.evidence
    assert "(a mean rate, one every 7.5 h, would give 1800 s at every age)" in advice.evidence
    assert "lost 26.7 GPU-hours, 2.7 at the advised interval, plus +3.8 of saves" in advice.evidence


def _band(lo: float, hi: float | None, d: int, exposure_h: float) -> dict[str, float | int | None]:
    return {"age_from_s": lo, "age_to_s": hi, "preemptions": d, "exposure_h": exposure_h, "exposure_gpu_h": exposure_h}


def test_a_hazard_that_falls_with_age_gives_a_schedule() -> None:
    """Young per band: sqrt(2 x 60 s / (h / 3600 s)). 40 preemptions in 10 run-hours of the first hour (4 an
    hour: 329 s, rounded to 5 min), 10 in 40 run-hours to 4 h (0.25: 1,315 s, 22 min), 2 then none in 200
    run-hours after (pooled: 0.01 an hour, 6,572 s, 110 min)."""
    bands = [_band(0, 3600, 40, 10.0), _band(3600, 14400, 10, 40.0), _band(14400, 28800, 2, 100.0),
             _band(28800, None, 0, 100.0)]
    schedule, words = hazard_schedule(bands, 60.0)
    assert schedule == ((0.0, 300.0), (3600.0, 1320.0), (14400.0, 6600.0))
    assert words == ["from 0 s: 40 in 10 run-hours", "from 60 min: 10 in 40 run-hours",
                     "from 4.0 h: 2 in 200 run-hours"]
    assert schedule_text(schedule) == "5 min to 60 min, then 22 min to 4.0 h, then 1.8 h after"
    # a first step longer than itself: no save while preemptions are rare, the first one interval into the next
    assert schedule_text(((0.0, 3540.0), (900.0, 2160.0))) == "none in the first 15 min, then 36 min after"
    assert last_checkpoint_under(0.0, ((0.0, 3540.0), (900.0, 2160.0)), 3100.0) == 900.0 + 2160.0
    # the last checkpoint of a run under it: every 5 min to 1 h, then every 22 min
    assert last_checkpoint_under(0.0, schedule, 3500.0) == 3300.0
    assert last_checkpoint_under(0.0, schedule, 3600.0 + 1320.0) == 3600.0 + 1320.0
    assert last_checkpoint_under(100.0, schedule, 250.0) is None
    # saves per second weighted by where the run time is spent
    rate = saves_per_s(schedule, [(b["age_from_s"], b["age_to_s"], b["exposure_gpu_h"]) for b in bands])
    assert rate == pytest.approx((10 / 300 + 40 / 1320 + 100 / 6600 + 100 / 6600) / 250)


def test_bands_too_thin_are_pooled_and_steps_too_close_merged() -> None:
    # two preemptions in each of the first two bands: pooled into one band of four
    schedule, words = hazard_schedule([_band(0, 900, 2, 1.0), _band(900, 3600, 2, 3.0), _band(3600, None, 0, 4.0)],
                                      60.0)
    assert words == ["from 0 s: 4 in 8 run-hours"]
    assert len(schedule) == 1
