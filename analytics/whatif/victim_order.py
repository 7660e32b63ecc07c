"""Cost-aware victim choice replayed beside today's order: a bound, "if the scheduler could choose".

Schedulers evict the lowest tier's youngest runs first; none knows what a victim
loses, and none can be told to choose by it. `preemptlens suggest` replays the recorded
workload (analytics/whatif/replay.py) once more with the simulator's victim order "cost"
(the eligible victims of the least live cost, `sim_engine.victim_cost_gpu_s`) and prints
its figures next to the replay under the policy in force, which is today's order: what
choosing victims could give at most, never a fix (preemptlens's actions, replayed as they
act, are the fix: tuning.protect_costly). Both columns come from replays of the same jobs,
so the replay's own error (printed first by `suggest`) affects both alike. docs/tuning.md
describes it.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, replace

from preemptlens.analytics.whatif.replay import Figures, Variant, Workload, run_variant


@dataclass(frozen=True)
class Comparison:
    """The replayed figures under today's victim order and under the cost-aware one."""

    today: Figures
    cost: Figures
    # How the scheduler in force picks its victims (`ORDER_OF`), in the heading.
    scheduler: str = "generic"

    def rows(self) -> list[tuple[str, str, str]]:
        """(figure, today, cost-aware), each value formatted or 'unknown (<missing input>)'."""
        return [
            (label, _shown(pick(self.today), shape, missing), _shown(pick(self.cost), shape, missing))
            for label, pick, shape, missing in _ROWS
        ]

    def lines(self) -> list[str]:
        width = max(len(r[0]) for r in self.rows())
        column = max(12, *(len(v) for r in self.rows() for v in r[1:]))
        out = [
            f"victim order, both replayed over the window: today's ({ORDER_OF.get(self.scheduler, 'generic')}) against "
            "the bound if the scheduler could choose (least live cost: GPUs x (lost progress + warm-up + requeue "
            "hold); no scheduler offers it, so it is no fix)",
            f"   {'':{width}}  {'today':>{column}}  {'could choose':>{column}}",
        ]
        out += [f"   {name:{width}}  {a:>{column}}  {b:>{column}}" for name, a, b in self.rows()]
        for name, figures in (("today", self.today), ("could choose", self.cost)):
            if figures.warmup_assumed_victims:
                out.append(f"   {name}: {figures.warmup_assumed_victims} victims' warm-up not measured "
                           "(the median measured warm-up is assumed)")
        return out


def _shown(value: float | None, shape: str, missing: str) -> str:
    return f"unknown ({missing})" if value is None else shape.format(value)


# Figure, how to read it from Figures, its format, and the missing input that makes it unknown.
_ROWS: tuple[tuple[str, Callable[[Figures], float | None], str, str], ...] = (
    ("work thrown away (GPU-hours)", lambda f: f.thrown_away_gpu_h, "{:,.1f}", "no warm-up measured"),
    ("critical+high wait, median (s)", lambda f: f.high_wait_median_s, "{:,.0f}", "no critical or high job"),
    ("critical+high wait, p90 (s)", lambda f: f.high_wait_p90_s, "{:,.0f}", "no critical or high job"),
    ("victims per week", lambda f: f.victims_per_week, "{:,.1f}", "a window under a day is not extrapolated"),
    ("preemptions", lambda f: f.preemptions, "{:,.0f}", ""),
)


# Today's victim order of each scheduler model (analytics/simulator/engine.py).
ORDER_OF = {
    "generic": "lowest tier, then youngest run",
    "slurm": "Slurm: lowest PriorityTier, then job order (oldest first) or youngest first, fewest jobs",
    "kueue": "Kueue: lowest priority, then most recently admitted",
    "kai": "KAI: lowest priority, then newest job",
}


def compare(workload: Workload, today: Figures) -> Comparison:
    """`today`: the replay under the policy in force (today's order); the cost-aware one is replayed here."""
    policy = replace(workload.actual.policy, victim_order="cost")
    return Comparison(today, run_variant(workload, Variant("victim order cost", policy)),
                      workload.actual.policy.scheduler)
