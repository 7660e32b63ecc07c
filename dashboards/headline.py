"""The answer a reader meets first, on the Overview and at the top of the weekly report.

`answers` words the verdict per cluster, the counterfactual headline and the one action to take first;
`Net` is the net in both currencies. Both are plain data, so the dashboard and the report (HTML and
Markdown) show the same sentences. The verdict is the readiness scorecard's (analytics.whatif.scorecard); the
counterfactual headline reads the ledger's gain (the preemptors' wait without preemption) against what the
victims paid; the action is the first suggestion `preemptlens suggest` ranked (the Tuning page's #1), else
what the scorecard says to fix first.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

import polars as pl

from preemptlens.dashboards.formats import gpu_hours, money, number, plural


@dataclass(frozen=True)
class Answer:
    cluster: str
    verdict: str  # one sentence, capitalised, no trailing period
    why: str  # the answers behind it
    action: str | None  # the one action to take first
    tone: str  # "good" (every question yes), "bad" (a measured no) or "unknown"


def answers(card: pl.DataFrame, suggestions: pl.DataFrame | None) -> list[Answer]:
    """One answer per cluster of the readiness scorecard (`data.scorecard` rows), with the first of that
    cluster's stored suggestions (`data.suggestions`, in rank order) as its action."""
    found = []
    for cluster in card["cluster"].unique(maintain_order=True).to_list():
        rows = card.filter(pl.col("cluster") == cluster).sort("question_no").to_dicts()
        first = rows[0]
        noes = [f"“{r['question']}”" for r in rows if r["answer"] is False]
        unknown = [f"“{r['question']}”" for r in rows if r["answer"] is None]
        why = f"{first['yes_count']} of 4 readiness questions answered yes"
        if noes:
            why += "; no to " + ", ".join(noes)
        if unknown:
            why += "; unknown: " + ", ".join(unknown) + (f" (missing: {first['collect']})" if first["collect"] else "")
        tone = "good" if first["yes_count"] == 4 else "bad" if first["no_count"] else "unknown"
        found.append(Answer(str(cluster), str(first["verdict"])[:1].upper() + str(first["verdict"])[1:], why,
                            _action(cluster, first, suggestions), tone))
    return found


def _action(cluster: str, card_row: Mapping[str, Any], suggestions: pl.DataFrame | None) -> str | None:
    if suggestions is not None and suggestions.height:
        mine = suggestions.filter(pl.col("cluster") == cluster)
        if mine.height:
            s = mine.row(0, named=True)
            change = ("" if s["current_value"] is None and s["proposed_value"] is None
                      else f" ({s['setting']}: {s['current_value'] or 'none'} → {s['proposed_value'] or 'none'})")
            return f"{s['title']}{change}"
    if card_row["fix_first"]:
        return f"Fix first: {card_row['fix_first']}"
    return None


@dataclass(frozen=True)
class Net:
    """What preemption bought and cost in the window, in its two currencies of GPU-hours.

    Waiting: the preemptors' wait it saved (gain) against the waiting it put on the victims; work thrown away
    (lost progress plus warm-up) has nothing on the other side. `weighted` is the net benefit's tier-weighted
    net, which does add the two currencies (each GPU-hour times its tier's weight)."""

    gain: float
    waiting: float
    thrown_away: float
    weighted: float | None
    preemptions: int

    @classmethod
    def of(cls, head: Mapping[str, Any], net_daily: pl.DataFrame | None) -> Net:
        """From `data.headline` and `data.net_benefit` (None when it could not be read: the weighted net is then
        unknown; 0 in a window without preemptions)."""
        weighted = None if net_daily is None else float(net_daily["net_value"].sum())
        return cls(float(head["gain_gpu_hours"]), float(head["waiting_gpu_hours"]),
                   float(head["wasted_gpu_hours"]), weighted, int(head["preemptions"]))

    @property
    def waiting_net(self) -> float:
        return self.gain - self.waiting

    def counterfactual(self) -> str:
        """The headline in words: what the preemptors would have waited without preemption, against what the
        victims paid."""
        if not self.preemptions:
            return "No preemptions in this window."
        saved = "more" if self.waiting_net > 0 else "less"
        return (
            f"Without preemption, the preemptors would have waited {gpu_hours(self.gain)} longer; "
            f"their victims waited {gpu_hours(self.waiting)} and threw away {gpu_hours(self.thrown_away)} of work "
            f"({plural(self.preemptions, 'preemption')}). Preemption saved {saved} waiting than it caused."
        )

    def in_money(self, price: float, currency: str) -> str | None:
        """The same GPU-hours at a price per GPU-hour; None without a price."""
        if not price:
            return None
        thrown = money(self.thrown_away, price, currency)
        return (f"At {number(price, 2)} {currency} per GPU-hour: work thrown away {thrown} (compute paid for "
                f"twice); victims' waiting {money(self.waiting, price, currency)} against the preemptors' "
                f"{money(self.gain, price, currency)} saved (GPU-hours of waiting, priced the same).")
