"""The readiness scorecard as text: four answers with their evidence and the verdict."""

from __future__ import annotations

from preemptlens.warehouse import Warehouse


def render(wh: Warehouse) -> str:
    card = wh.query("SELECT * FROM readiness_scorecard ORDER BY cluster, question_no")
    if card.height == 0:
        return "readiness scorecard: no runs in the warehouse yet"
    lines: list[str] = []
    for cluster in card["cluster"].unique(maintain_order=True):
        rows = card.filter(card["cluster"] == cluster).to_dicts()
        lines.append(f"readiness scorecard for cluster {cluster}:")
        for r in rows:
            lines.append(f"  Q{r['question_no']} {r['question']} {'yes' if r['answer'] else 'no'}")
            lines.append(f"     {r['evidence']}")
        first = rows[0]
        verdict = f"  verdict ({first['yes_count']} of 4 yes): {first['verdict']}"
        if first["fix_first"]:
            verdict += f"; fix first: {first['fix_first']}"
        lines.append(verdict)
    return "\n".join(lines)
