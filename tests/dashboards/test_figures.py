"""Figure builders stay light on large ledgers."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

import polars as pl

from preemptlens.dashboards import figures


def test_timeline_keeps_the_worst_preemptions() -> None:
    n = figures.TIMELINE_MARKERS + 500
    t0 = datetime(2026, 11, 2, tzinfo=UTC)
    ledger = pl.DataFrame(
        {
            "time": [t0 + timedelta(minutes=i) for i in range(n)],
            "cluster": ["c"] * n,
            "pool": ["a100"] * n,
            "victim_tier": ["low", "normal"] * (n // 2),
            "victim_job_id": [str(i) for i in range(n)],
            "victim_run": [1] * n,
            "victim_team": ["t"] * n,
            "victim_gpus": [8] * n,
            "preemptor_job_id": ["p"] * n,
            "preemptor_tier": ["high"] * n,
            "wasted_gpu_hours": [float(i) for i in range(n)],
            "waiting_gpu_hours": [float(n - i) for i in range(n)],
            "lost_gpu_hours": [1.0] * n,
            "basis": ["checkpoint"] * n,
        }
    )
    fig = figures.preemption_timeline(ledger)
    markers = [t for t in fig.data if t.legend != "legend2"]
    # Gathered into hour bins per victim tier (about 33 hours of preemptions), each saying how many it holds.
    counts = [int(text.split(" preemption")[0].replace(",", "")) for t in markers for text in t.text]
    assert sum(counts) == figures.TIMELINE_MARKERS and len(counts) < 100
    assert "(60 min bins)" in fig.layout.title.text
    # The 500 that threw away the least work (minutes 0..499) are the ones left out, however long they waited:
    # the first bin is the hour of minute 500, holding the 40 from then to its end.
    first = min(x for t in markers for x in t.x)
    assert first == t0 + timedelta(hours=8, minutes=30)
    assert sum(c for t in markers for x, c in zip(t.x, [int(s.split(" ")[0]) for s in t.text], strict=True)
               if x == first) == 40
    assert f"{figures.TIMELINE_MARKERS:,} worst of {n:,}" in fig.layout.title.text
    # and a legend of marker sizes in round GPU-hours, the largest no more than the largest bin's
    steps = [float(t.name.removesuffix(" GPU-h").replace(",", "")) for t in fig.data if t.legend == "legend2"]
    largest = max(sum(float(w) for w in ledger.filter(pl.col("time").dt.truncate("1h") == hour)["wasted_gpu_hours"])
                  for hour in {x.replace(minute=0) for t in markers for x in t.x})
    assert len(steps) == 3 and steps == sorted(steps, reverse=True) and steps[0] <= largest < 10 * steps[0]
    assert all(f"{v:g}"[0] in "125" and set(f"{v:g}"[1:]) <= {"0"} for v in steps)


def test_week_ticks_are_the_iso_weeks_of_the_data() -> None:
    """Weeks start on Monday; plotly's own weekly ticks fall on Sundays and were labelled a week early."""
    weeks = [datetime(2026, 11, 9, tzinfo=UTC), datetime(2026, 11, 16, tzinfo=UTC), datetime(2026, 11, 23, tzinfo=UTC)]
    shares = pl.DataFrame({"week": weeks * 2, "tier": ["high"] * 3 + ["low"] * 3,
                           "gpu_hour_share": [0.2, 0.3, 0.4, 0.8, 0.7, 0.6]})
    fig = figures.tier_shares(shares)
    assert list(fig.layout.xaxis.ticktext) == ["2026-W46", "2026-W47", "2026-W48"]
    assert list(fig.layout.xaxis.tickvals) == weeks
    teams = figures.team_high_shares(pl.DataFrame({"week": weeks, "team": ["a"] * 3,
                                                   "high_gpu_hour_share": [0.1, 0.2, 0.3]}))
    assert list(teams.layout.xaxis.ticktext) == ["2026-W46", "2026-W47", "2026-W48"]
