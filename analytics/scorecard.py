"""The readiness scorecard in words: the one wording of an answer and of the verdict.

The CLI, the dashboard, the weekly report and the alerts all word the
scorecard through these functions, so a verdict reads the same everywhere.
An answer is three-valued: yes, no, or unknown with the missing inputs named.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from preemptlens.warehouse import Warehouse

# A measured no in words, by the measure that failed, where its name alone would not say why: Q3 tells a
# fleet that checkpoints rarely (measured) apart from one whose checkpoints were never collected (unknown).
NO_BECAUSE = {
    "checkpoint_coverage": "jobs checkpoint rarely",
    "loss_to_gain": "victims lose more work than their preemptors gain",
}
# The measures of a scorecard row's question that failed (comma-separated, for answer_text): a column every
# reader of readiness_scorecard (aliased `s`) selects.
FAILED_COLUMN = (
    "(SELECT string_agg(e.measure, ',' ORDER BY e.measure) FROM readiness_evidence AS e "
    "WHERE e.cluster = s.cluster AND e.question_no = s.question_no AND NOT e.passes) AS failed"
)
SCORECARD_SQL = f"SELECT s.*, {FAILED_COLUMN} FROM readiness_scorecard AS s ORDER BY cluster, question_no"  # noqa: S608 -- constants only


def answer_text(answer: bool | None, missing: str | None = None, failed: str | None = None) -> str:
    """'yes', 'no' (with why, when a failed measure of `failed` says more than its name), or
    'unknown (what is missing)'."""
    if answer is None:
        return f"unknown ({missing})" if missing else "unknown"
    if answer:
        return "yes"
    because = [NO_BECAUSE[m] for m in (failed or "").split(",") if m in NO_BECAUSE]
    return f"no ({'; '.join(because)})" if because else "no"


def verdict_text(row: Mapping[str, Any]) -> str:
    """The verdict of one cluster from any of its scorecard rows: counts only measured answers, names a fix
    only from a measured no, and says which questions it could not answer and what data would answer them."""
    text = f"{row['verdict']} ({row['yes_count']} yes, {row['no_count']} no, {row['unknown_count']} unknown of 4)"
    if row["fix_first"]:
        text += f"; fix first: {row['fix_first']}"
    if row["unanswered"]:
        text += f"; could not answer {row['unanswered']}"
    if row["collect"]:
        text += f" (missing: {row['collect']})"
    return text


def render(wh: Warehouse) -> str:
    card = wh.query(SCORECARD_SQL)
    if card.height == 0:
        return "readiness scorecard: no runs in the warehouse yet"
    lines: list[str] = []
    for cluster in card["cluster"].unique(maintain_order=True):
        rows = card.filter(card["cluster"] == cluster).to_dicts()
        lines.append(f"readiness scorecard for cluster {cluster}:")
        for r in rows:
            lines.append(f"  Q{r['question_no']} {r['question']} {answer_text(r['answer'], r['missing'], r['failed'])}")
            lines.append(f"     {r['evidence']}")
        lines.append(f"  verdict: {verdict_text(rows[0])}")
    return "\n".join(lines)
