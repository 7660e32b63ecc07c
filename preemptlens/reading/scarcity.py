"""Whether GPUs are scarce, in one wording: the word and the figure every page, report and command prints.

Scarcity has one definition, Q1 of the readiness scorecard (analytics/scarcity.py reads it): busy hours without
preemption, net of the idle-hoarded GPUs, for long stretches, and work waiting for them. Q1's answer, the Pilot
page's candidates, the weekly report and the CLI all word it through `scarcity_words`, so a cluster reads "scarce"
or "not scarce" with the same figure everywhere.
"""

from __future__ import annotations

from preemptlens.reading.words import measure, measure_label

SCARCE = "scarce"
NOT_SCARCE = "not scarce"
# Q1's no where the busy hours pass only with the idle-hoarded GPUs counted as busy
IDLE_MAKES_IT_NO = "GPUs look scarce only while the idle-hoarded ones count as busy"
# Q1's no where the GPUs are busy but no work waits long for them
NOTHING_WAITS = "busy, but no work waits long for them"
FIGURE = "busy_hours_share"


def scarcity_words(scarce: bool | None, busy: float | None, *, borderline: bool = False,
                   threshold: float | None = None, with_idle: float | None = None, hoarded: float | None = None,
                   missing: str | None = None) -> str:
    """'scarce (busy hours without preemption 62%)', 'not scarce (busy hours without preemption 19%; 71% with the
    idle-hoarded GPUs counted as busy, 40% of allocated GPU-hours held idle: GPUs look scarce only while ...)', or
    'scarcity unknown (what is missing)'; 'borderline' before a word its interval could turn."""
    if scarce is None:
        return f"scarcity unknown ({missing or 'not measured'})"
    word = SCARCE if scarce else NOT_SCARCE
    text = f"{'borderline ' if borderline else ''}{word} ({measure_label(FIGURE)} {measure(FIGURE, busy)}"
    if not scarce and busy is not None and threshold is not None:
        if with_idle is not None and busy < threshold <= with_idle:
            held = "" if hoarded is None else (
                f", {measure('hoarded_share_of_allocated', hoarded)} of allocated GPU-hours held idle")
            text += (f"; {measure(FIGURE, with_idle)} with the idle-hoarded GPUs counted as busy{held}: "
                     f"{IDLE_MAKES_IT_NO}")
        elif busy >= threshold:
            text += f": {NOTHING_WAITS}"
    return text + ")"
