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
    shown = [x for trace in fig.data for x in trace.x]
    assert len(shown) == figures.TIMELINE_MARKERS
    # The 500 that threw away the least work (0..499) are the ones left out, however long they waited.
    assert min(t0 + timedelta(minutes=500), *shown) == t0 + timedelta(minutes=500)
    assert f"{figures.TIMELINE_MARKERS:,} worst of {n:,}" in fig.layout.title.text
