"""Loss coverage and goodput, worded once for the Overview page and the weekly report.

`coverage_summary`, `goodput_summary` and the `*_rows` functions turn the frames of `data.coverage` and
`data.goodput` (the total first, then per team or pool) into sentences and table rows with labels, units and
rounding; `overview_sections` draws both on a Streamlit page. An unknown figure reads "unknown" with what is
missing, never 0 (docs/figures.md, section 11).
"""

from __future__ import annotations

from typing import Any

import polars as pl

from preemptlens.dashboards.data import progress_level
from preemptlens.reading.words import UNKNOWN, number, pct

# The badput parts in the order they are shown: (column of data.goodput, label, table header).
BADPUT = (
    ("preemption_gpu_hours", "lost to preemption", "preempted, GPU-h"),
    ("warmup_gpu_hours", "warm-up after restarts", "warm-up, GPU-h"),
    ("checkpoint_save_gpu_hours", "checkpoint saves", "saves, GPU-h"),
    ("idle_gpu_hours", "idle hoarding", "idle, GPU-h"),
    ("failure_gpu_hours", "failed runs", "failed, GPU-h"),
)


def _split(frame: pl.DataFrame) -> tuple[dict[str, Any] | None, list[dict[str, Any]]]:
    """The total row (NULL cluster) and the others; no total when the selection is empty."""
    rows = frame.to_dicts()
    total = next((r for r in rows if r["cluster"] is None), None)
    return total, [r for r in rows if r["cluster"] is not None]


def coverage_summary(frame: pl.DataFrame) -> str:
    total, _ = _split(frame)
    if total is None or not total["preemptions"]:
        return "No preemptions in this window: nothing to measure."
    text = (
        f"Lost progress is measured for {pct(total['measured_share'])} of {total['preemptions']:,} preemptions "
        f"({total['checkpoint_preemptions']:,} from the victims' checkpoints, {total['rollback_preemptions']:,} "
        f"from the step they restarted from) and {pct(total['measured_lost_share'])} of their "
        f"{number(total['lost_gpu_hours'])} lost GPU-hours; {total['declared_preemptions']:,} rest on a declared "
        f"checkpoint interval and {total['assumed_preemptions']:,} assume everything since the run started."
    )
    if total["missing"]:
        text += f" Missing: {total['missing']}."
    return text


def _where(r: dict[str, Any], label: str, clusters: int) -> dict[str, str]:
    """The row's name, and its cluster where the selection spans several."""
    return {label: str(r["breakdown"]), **({"cluster": str(r["cluster"])} if clusters > 1 else {})}


def coverage_rows(frame: pl.DataFrame, label: str) -> list[dict[str, str]]:
    _, rows = _split(frame)
    clusters = len({r["cluster"] for r in rows})
    return [
        {
            **_where(r, label, clusters),
            "preemptions": f"{r['preemptions']:,}",
            "loss measured": f"{pct(r['measured_share'])} ({r['measured_preemptions']:,})",
            "lost, GPU-h": number(r["lost_gpu_hours"]),
            "of which measured": pct(r["measured_lost_share"]),
            "declared / assumed": f"{r['declared_preemptions']:,} / {r['assumed_preemptions']:,}",
        }
        for r in rows
    ]


def goodput_summary(frame: pl.DataFrame) -> str:
    total, _ = _split(frame)
    if total is None or not total["allocated_gpu_hours"]:
        return "No GPU-hours allocated in this window."
    parts = "; ".join(f"{label} {number(total[column])}" for column, label, _ in BADPUT)
    if total["goodput_gpu_hours"] is None:
        text = (
            f"Goodput between {_bounds(total)} of {number(total['allocated_gpu_hours'])} allocated GPU-hours: not "
            f"every part of the badput is measured, so the measured parts bound it. Badput GPU-hours: {parts}."
        )
    else:
        text = (
            f"Goodput {pct(total['goodput_share'])}: {number(total['goodput_gpu_hours'])} of "
            f"{number(total['allocated_gpu_hours'])} allocated GPU-hours advanced a job. Badput GPU-hours: {parts}."
        )
    if total["missing"]:
        text += f" Missing: {total['missing']}."
    return text


def _bounds(r: dict[str, Any]) -> str:
    """The interval of a goodput share with an unmeasured part: at least, at most."""
    return f"{pct(r['goodput_at_least_share'])} and {pct(r['goodput_at_most_share'])}"


def goodput_rows(frame: pl.DataFrame, label: str) -> list[dict[str, str]]:
    """Per row: allocated GPU-hours, the goodput share, each badput part in GPU-hours, and which are unknown."""
    _, rows = _split(frame)
    clusters = len({r["cluster"] for r in rows})
    return [
        {
            **_where(r, label, clusters),
            "allocated, GPU-h": number(r["allocated_gpu_hours"]),
            "goodput": pct(r["goodput_share"]) if r["goodput_share"] is not None else f"between {_bounds(r)}",
            # a part no source measures reads "unknown" in its own column; the summary above says why
            **{header: number(r[column]) for column, _, header in BADPUT},
        }
        for r in rows
    ]


COVERAGE_NOTE = (
    "A loss is measured when the victim's own checkpoints, or the step it restarted from, say what it lost "
    "(basis checkpoint or rollback); a declared checkpoint interval gives only an expectation, and without either "
    "everything since the run started is counted. `preemptlens collect checkpoints` reads checkpoint files, "
    "training logs, Prometheus metrics and Kubernetes annotations."
)
GOODPUT_NOTE = (
    "Goodput is the share of allocated GPU-hours that advanced a job (Meta's effective training time ratio, over "
    "allocated GPU-time); badput is split as in Google's ml-goodput-measurement: work lost to preemption and to "
    "failed runs (wasted progress), warm-up after restarts (initialization, startup, restore), checkpoint saves, "
    "and idle hoarding. A part no source measures is unknown, and the goodput is then an interval: at most "
    "allocated less the badput measured, at least that less the most the unknown parts can be (nothing is left "
    "of the lower bound where idle hoarding has no GPU samples or saves no checkpoint data)."
)


def report_context(coverage: pl.DataFrame, goodput: pl.DataFrame) -> dict[str, Any]:
    """The weekly report's sections (templates weekly_coverage.*.j2): per team over the report's week."""
    return {
        "coverage_summary": coverage_summary(coverage),
        "coverage_rows": coverage_rows(coverage, "team"),
        "coverage_note": COVERAGE_NOTE,
        "goodput_summary": goodput_summary(goodput),
        "goodput_rows": goodput_rows(goodput, "team"),
        "goodput_note": GOODPUT_NOTE,
    }


def overview_sections(ctx: Any) -> None:
    """The Overview's loss-coverage and goodput sections, below its first screen (`ctx`: views_common.Context)."""
    import streamlit as st

    f = ctx.filters
    label = progress_level(f)
    scope = (f"Per {label} (per pool when only pools are selected; a team's row covers every pool), over whole UTC "
             "days of the window; the tier filter does not apply.")
    sections = (
        ("Loss coverage", "coverage", coverage_summary, coverage_rows,
         f"{COVERAGE_NOTE} Preemptions count for their victim's team and pool."),
        ("Goodput", "goodput", goodput_summary, goodput_rows, GOODPUT_NOTE),
    )
    for title, query, summary, rows_of, note in sections:
        st.header(title)
        frame: pl.DataFrame = ctx.q(query, f)
        st.markdown(summary(frame))
        rows = rows_of(frame, label)
        if rows:
            st.dataframe(pl.DataFrame(rows), hide_index=True, key=f"{query}_table", placeholder=UNKNOWN)
        st.caption(f"{note} {scope}")
