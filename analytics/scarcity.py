"""Whether a cluster's GPUs are scarce: one definition, read by every outlet.

Scarcity is Q1 of the readiness scorecard (sql/views/readiness_evidence.sql, readiness_scorecard.sql): busy hours
without preemption net of the idle-hoarded GPUs (`busy_hours_share`, the figure), and work waiting for them. The
Pilot page used to call a pool scarce by a measure of its own (busy days on the recorded allocation, or a long
median wait), which could say "scarce" where Q1 said no; now `pilot_candidates.scarce` is Q1's answer, and Q1's
answer, the Pilot page, the weekly report and the CLI all word it with `Scarcity.words`
(preemptlens/reading/scarcity.py).
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import polars as pl

from preemptlens.reading.scarcity import scarcity_words

Query = Callable[[str, dict[str, object]], pl.DataFrame]

Q1 = 1
SQL = """
SELECT s.cluster, s.answer, s.borderline, s.missing, e.measure, e.value, e.threshold
FROM readiness_scorecard AS s
LEFT JOIN readiness_evidence AS e ON e.cluster = s.cluster AND e.question_no IN (0, 1)
WHERE s.question_no = 1
ORDER BY s.cluster, e.measure
"""


@dataclass(frozen=True)
class Scarcity:
    """A cluster's scarcity: Q1's answer (None: unknown) and the figures it is worded with."""

    cluster: str
    scarce: bool | None
    borderline: bool
    missing: str | None
    busy: float | None  # busy_hours_share
    threshold: float | None  # its threshold (analytics.scarce_hours_share)
    with_idle: float | None  # busy_hours_share_with_idle
    hoarded: float | None  # hoarded_share_of_allocated

    def words(self) -> str:
        return scarcity_words(self.scarce, self.busy, borderline=self.borderline, threshold=self.threshold,
                              with_idle=self.with_idle, hoarded=self.hoarded, missing=self.missing)


def scarcity(question: Mapping[str, Any], evidence: Sequence[Mapping[str, Any]]) -> Scarcity:
    """The scarcity of Q1's scorecard row `question` (cluster, answer, borderline, missing), from its cluster's
    readiness_evidence rows (any others are ignored)."""
    cluster = question["cluster"]
    mine = {r["measure"]: r for r in evidence if r["cluster"] == cluster and r["measure"] is not None}

    def value(name: str, column: str = "value") -> float | None:
        row = mine.get(name)
        return None if row is None else row.get(column)

    return Scarcity(cluster, question["answer"], bool(question.get("borderline")), question.get("missing"),
                    value("busy_hours_share"), value("busy_hours_share", "threshold"),
                    value("busy_hours_share_with_idle"), value("hoarded_share_of_allocated"))


def read(query: Query, clusters: Sequence[str] = ()) -> dict[str, Scarcity]:
    """Every cluster's scarcity (those of `clusters`, or all)."""
    rows = query(SQL, {}).to_dicts()
    found = {}
    for cluster in dict.fromkeys(r["cluster"] for r in rows):
        if clusters and cluster not in clusters:
            continue
        mine = [r for r in rows if r["cluster"] == cluster]
        found[cluster] = scarcity(mine[0], mine)
    return found
