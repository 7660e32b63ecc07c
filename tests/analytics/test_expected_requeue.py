"""The expected requeue wait (expected_requeue) against a cluster whose waits the test sets: small jobs restart
within minutes, large ones wait days and some never restart within the data.

All in cluster c1, tier low, the data ending at END = 100 h (a clock job runs to it):
- pool a, 1 GPU: twelve victims restarting after 1, 2, ... 12 min. Kaplan-Meier falls by 1/12 at each:
  median 6 min (S = 6/12), p90 11 min (S = 1/12, the first at or below 0.1).
- pool a, 8 GPUs: ten victims; five restart after 10, 20, 30, 40 and 50 h, one still waits 25 h at the data's
  end, four still wait 80 h. S: 0.9 (10 h), 0.8 (20 h), then 6 of 7 at risk (30 h) 0.686, 5 of 6 (40 h) 0.571,
  4 of 5 (50 h) 0.457: median 50 h (the restarted ones' own median, 30 h, leaves out the longest waits), no
  p90 ("more than 80 h", the longest wait seen).
- pool a, 2 GPUs: three victims restarting after 1, 2, 3 h: too few (requeue_min_victims 10), so their estimate
  is the next size down's, the twelve of 1 GPU (median 6 min), before pool a's of all sizes (25 victims, median
  1 h; what a larger minimum gives the 8-GPU jobs).
- pool b, 8 GPUs: one victim restarting after 2 h: too few in its size and its pool, so it reads its size in
  any pool (tier and size), 11 victims, not its tier's 26 of every size (median 1 h, from the small jobs):
  S = 10/11 (2 h), 9/11 (10 h), 8/11 (20 h), 25 h censored, then x 6/7 (30 h) 0.623, x 5/6 (40 h) 0.519,
  x 4/5 (50 h) 0.416: median 50 h.
- tier normal, pool a, 8 GPUs: one victim, still waiting 30 h at the data's end: no median ("more than 30 h");
  a normal-tier job of 8 GPUs running at the data's end costs at least 8 x 30 h of waiting.
"""

from __future__ import annotations

import math
from collections.abc import Iterator
from pathlib import Path

import polars as pl
import pytest
from analytics_scenario import Scenario, analysed, at

from preemptlens.analytics.alerts import VictimNotice
from preemptlens.analytics.livecost import LiveCostSettings, compute
from preemptlens.analytics.requeue import basis_text, restart_text
from preemptlens.config import load_config
from preemptlens.dashboards import data
from preemptlens.reading.masking import EVERYTHING
from preemptlens.reading.words import duration

H = 3600.0
END = 100 * H
SMALL = [60.0 * i for i in range(1, 13)]
LARGE_RESTARTED = [10 * H, 20 * H, 30 * H, 40 * H, 50 * H]
LARGE_WAITING = [25 * H, 80 * H, 80 * H, 80 * H, 80 * H]


def victim(sc: Scenario, job_id: str, gpus: int, pool: str, preempted: float, wait: float | None,
           tier: str = "low") -> None:
    """A job preempted at `preempted` that runs again `wait` seconds later (None: not by END)."""
    sc.job(job_id, tier, gpus, pool, 0, team="vision", user_name="ana")
    sc.run(job_id, 1, gpus, pool, 1, preempted, "preempted", preemptor_job_id="P")
    if wait is not None:
        sc.run(job_id, 2, gpus, pool, preempted + wait, preempted + wait + 600, "completed")


def build(sc: Scenario) -> None:
    sc.job("P", "critical", 8, "a", 0, team="infer")
    sc.run("P", 1, 8, "a", 10 * H, 11 * H, "completed")
    sc.job("CLOCK", "high", 1, "a", 0, team="infer")
    sc.run("CLOCK", 1, 1, "a", 1, END, "completed")
    for i, wait in enumerate(SMALL):
        victim(sc, f"S{i}", 1, "a", 60 * H + 100 * i, wait)
    for i, wait in enumerate(LARGE_RESTARTED):
        victim(sc, f"L{i}", 8, "a", 20 * H + 10 * i, wait)
    for i, wait in enumerate(LARGE_WAITING):
        victim(sc, f"W{i}", 8, "a", END - wait, None)
    for i, wait in enumerate((1 * H, 2 * H, 3 * H)):
        victim(sc, f"M{i}", 2, "a", 30 * H + 10 * i, wait)
    victim(sc, "B0", 8, "b", 40 * H, 2 * H)
    victim(sc, "N0", 8, "a", END - 30 * H, None, tier="normal")
    sc.job("RN", "normal", 8, "a", 0, team="vision")
    sc.run("RN", 1, 8, "a", 95 * H, None, "running")
    # a running job of 32 GPUs in pool a: no victim of its size anywhere, so its live cost reads the next class
    # down (8-31 GPUs, any pool: 11 victims, median 50 h), not pool a's small jobs (median 1 h)
    sc.job("R32", "low", 32, "a", 0, team="vision")
    sc.run("R32", 1, 32, "a", 90 * H, None, "running")


@pytest.fixture(scope="module")
def scenario(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Scenario]:
    with analysed(tmp_path_factory.mktemp("requeue"), build) as sc:
        yield sc


def estimate(sc: Scenario, pool: str, size_class: str, tier: str = "low") -> dict[str, object]:
    """The estimate for the victims of `tier` in `pool` of one size class: the same for every GPU count in it."""
    rows = sc.wh.query("SELECT * EXCLUDE (gpus) FROM expected_requeue WHERE pool = $p AND size_class = $s "
                       "AND tier = $t", {"p": pool, "s": size_class, "t": tier}).unique().to_dicts()
    assert len(rows) == 1
    return rows[0]


def greenwood_loglog_band(steps: list[tuple[int, int]], z: float = 1.959964) -> list[tuple[float, float, float]]:
    """(S, lower, upper) after each (at risk, restarts) step, written from the textbook formulas."""
    s, total, out = 1.0, 0.0, []
    for n, d in steps:
        s *= 1 - d / n
        total += d / (n * (n - d))
        se = math.sqrt(total) / abs(math.log(s))
        out.append((s, s ** math.exp(z * se), s ** math.exp(-z * se)))
    return out


def test_small_jobs_restart_in_minutes(scenario: Scenario) -> None:
    e = estimate(scenario, "a", "1")
    assert (e["expected_requeue_s"], e["requeue_p90_s"]) == (360.0, 660.0)
    assert (e["victims"], e["restarted"], e["requeue_group"]) == (12, 12, "tier, pool and size")
    assert e["longest_wait_s"] == 720.0


def test_large_jobs_wait_days_and_the_ones_still_waiting_count(scenario: Scenario) -> None:
    e = estimate(scenario, "a", "8-31")
    assert (e["victims"], e["restarted"], e["requeue_group"]) == (10, 5, "tier, pool and size")
    # the median of the restarted ones alone would be 30 h: the censored waits push it to 50 h
    assert e["expected_requeue_s"] == 50 * H
    assert e["requeue_p90_s"] is None and e["longest_wait_s"] == 80 * H
    # the median's 95% interval: the first waits at which the lower and the upper band fall to 0.5
    steps = [(10, 1), (9, 1), (7, 1), (6, 1), (5, 1)]
    bands = greenwood_loglog_band(steps)
    waits = LARGE_RESTARTED
    low = next(w for w, (_, lo, _) in zip(waits, bands, strict=True) if lo <= 0.5)
    high = next((w for w, (_, _, up) in zip(waits, bands, strict=True) if up <= 0.5), None)
    assert (e["requeue_median_low_s"], e["requeue_median_high_s"]) == (low, high)
    assert low == 10 * H and high is None, "with 10 victims the interval is wide, its upper end open"


def test_a_small_group_falls_back_to_its_pool_then_its_tier(scenario: Scenario) -> None:
    # three victims of 2-7 GPUs: too few, so the next size down answers (twelve of 1 GPU), before pool a's mixed sizes
    e = estimate(scenario, "a", "2-7")
    assert (e["requeue_group"], e["group_size_class"], e["victims"], e["expected_requeue_s"]) == (
        "tier and a smaller size", "1", 12, 360.0)
    b = estimate(scenario, "b", "8-31")
    assert (b["requeue_group"], b["victims"], b["restarted"], b["expected_requeue_s"]) == (
        "tier and size", 11, 6, 50 * H), "a large job's wait from large jobs of other pools, not small ones"
    # a size no victim had reads the next size down, in any pool, before its pool's mixed sizes
    large = estimate(scenario, "a", "32+")
    assert (large["requeue_group"], large["group_size_class"], large["victims"], large["expected_requeue_s"]) == (
        "tier and a smaller size", "8-31", 11, 50 * H)
    row = {"requeue_group": large["requeue_group"], "requeue_size_class": "32+",
           "requeue_group_size_class": large["group_size_class"], "requeue_victims": 11, "requeue_restarted": 6}
    assert basis_text(row, "low", "a") == ("from 11 recent victims of tier low with 8-31 GPUs in any pool (too few "
                                           "with 32+ GPUs, which tend to wait longer), 6 restarted")


def test_the_smallest_group_is_a_setting(tmp_path: Path) -> None:
    with analysed(tmp_path, build) as sc:
        sc.analyze(requeue_min_victims=1)
        b = estimate(sc, "b", "8-31")
        assert (b["requeue_group"], b["victims"], b["expected_requeue_s"]) == ("tier, pool and size", 1, 2 * H)
        sc.analyze(requeue_min_victims=11)
        assert estimate(sc, "a", "8-31")["requeue_group"] == "tier and size"
        sc.analyze(requeue_min_victims=12)
        assert estimate(sc, "a", "8-31")["requeue_group"] == "tier and pool"


def test_notice_and_card_say_the_same_and_that_the_wait_passed_most(scenario: Scenario) -> None:
    config = load_config(overrides={"alerts.lookback_s": 200 * H})
    notices = {a.dedupe_key.split(":")[2]: a for a in VictimNotice().evaluate(scenario.wh, config, at(END))}
    # W0 has waited 25 h at the data's end: under the 50 h median of its size
    assert "expect a restart about 2.1 days after the preemption" in notices["W0"].text
    assert "(the median wait, 95% interval 10.0 h to more than 3.3 days)" in notices["W0"].text
    assert "from 10 recent victims of tier low with 8-31 GPUs in pool a, 5 restarted" in notices["W0"].text
    # W1 has waited 80 h: past the median, and no p90 is known within the 80 h seen
    # (every outlet words a duration one way: 50 h and 80 h read in days)
    expected = ("it has waited 3.3 days, longer than most: half of such victims restarted within 2.1 days, fewer "
                "than 9 in 10 within the longest wait seen, 3.3 days; from 10 recent victims")
    assert expected in notices["W1"].text
    assert notices["W1"].facts["requeue_victims"] == 10

    scenario.wh.publish()
    window = data.Filters(start=at(0), end=at(END + H))
    with data.reader(scenario.wh.path, scope=EVERYTHING) as r:
        rows = data.mine(r, window, ("ana",), (), 100)
    cards = {p["victim_job_id"]: p for p in rows.iter_rows(named=True)}
    for job in ("W0", "W1"):
        p = cards[job]
        assert restart_text(p, "low", "a", p["requeue_delay_s"], duration) in notices[job].text
        assert "longer than most" in restart_text(p, "low", "a", p["requeue_delay_s"], duration) or job == "W0"
    assert cards["W0"]["expected_restart_time"] == at(END - 25 * H + 50 * H)
    # too few restarted for a median: more than the longest wait seen, and from which group
    assert ("Requeue: expect more than 30.0 h: fewer than half of such victims restarted within the longest wait "
            "seen; from 1 recent victim of tier normal of any size in any pool (too few with 8-31 GPUs in pool a), "
            "0 restarted."
            ) in notices["N0"].text
    assert cards["N0"]["expected_restart_time"] is None


def test_live_cost_reads_the_running_jobs_own_estimate(scenario: Scenario) -> None:
    compute(scenario.wh, at(END), LiveCostSettings())
    rows = {r["job_id"]: r for r in scenario.wh.query("SELECT * FROM live_costs").iter_rows(named=True)}
    r32 = rows["R32"]
    pool_a = estimate(scenario, "a", "32+")
    assert (r32["expected_requeue_s"], r32["requeue_basis"], r32["requeue_at_least"]) == (
        pool_a["expected_requeue_s"], "tier and a smaller size", False)
    assert r32["requeue_gpu_s"] == 32 * pool_a["expected_requeue_s"] == 32 * 50 * H
    # no median within the 30 h seen: that wait stands in as a lower bound, so the job still ranks by its cost
    rn = rows["RN"]
    assert (rn["expected_requeue_s"], rn["requeue_basis"], rn["requeue_at_least"]) == (30 * H, "tier", True)
    assert rn["requeue_gpu_s"] == 8 * 30 * H
    assert "requeue" not in (rn["unknown"] or ""), "a lower bound is known, not unknown"


def test_no_estimate_without_a_victim_of_the_tier(scenario: Scenario) -> None:
    tiers = scenario.wh.query("SELECT DISTINCT tier FROM expected_requeue ORDER BY tier")
    assert tiers.equals(pl.DataFrame({"tier": ["low", "normal"]}))
    normal = estimate(scenario, "a", "8-31", "normal")
    assert (normal["expected_requeue_s"], normal["longest_wait_s"], normal["victims"], normal["restarted"]) == (
        None, 30 * H, 1, 0)
