"""The readiness scorecard in words: the one wording of an answer and of the verdict.

The CLI, the dashboard, the weekly report and the alerts all word the
scorecard through these functions, so a verdict reads the same everywhere.
An answer is three-valued: yes, no, or unknown with the missing inputs named.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from preemptlens.warehouse import Warehouse

SCORECARD_SQL = "SELECT * FROM readiness_scorecard ORDER BY cluster, question_no"


def answer_text(answer: bool | None, missing: str | None = None) -> str:
    """'yes', 'no', or 'unknown (what is missing)'."""
    if answer is None:
        return f"unknown ({missing})" if missing else "unknown"
    return "yes" if answer else "no"


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
            lines.append(f"  Q{r['question_no']} {r['question']} {answer_text(r['answer'], r['missing'])}")
            lines.append(f"     {r['evidence']}")
        lines.append(f"  verdict: {verdict_text(rows[0])}")
    return "\n".join(lines)
