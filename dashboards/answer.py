"""Does preemption pay here? The answer block the Overview's first screen and the weekly report show on top.

One builder (`build`, or `read` on a reader) takes the stored verdict (readiness_verdict) and
counterfactual (counterfactual_*) and words them through analytics.whatif.scorecard, the one wording the CLI
prints too; `show` draws the result on a Streamlit page and `markdown` writes it for the Markdown report
(the HTML report's template lays out the same fields); `Net` is the net in both currencies of GPU-hours beside
it. Nothing here computes a figure.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

import polars as pl

from preemptlens import escape
from preemptlens.analytics.whatif import counterfactual, scorecard
from preemptlens.dashboards import data
from preemptlens.reading.words import UNKNOWN, money, number

# How the verdict is coloured: good news, a warning, or not enough evidence (st.error stays for failures, such
# as a query that failed; a verdict against preemption is a finding).
LEVELS = {scorecard.MAIN: "success", scorecard.ONCE_FIXED: "warning", scorecard.NOT_MAIN: "warning",
          scorecard.CANNOT_TELL: "info"}


@dataclass(frozen=True)
class ClusterAnswer:
    cluster: str
    verdict: str  # the verdict in one line, as the CLI prints it
    level: str  # success | warning | info
    borderline: bool
    reasons: tuple[str, ...]
    fix_first: str | None
    adoption: str | None
    headline: str  # the counterfactual headline, or why there is none (each of these three a sentence)
    net: str | None
    replay: str | None
    reproduces: bool | None
    alternatives: tuple[str, ...] = ()
    tiers: tuple[dict[str, str], ...] = field(default_factory=tuple)
    # The headline's waiting per tier, in terms a reader can check (scorecard.tier_wait_lines).
    waits: tuple[str, ...] = ()

    @property
    def line(self) -> str:
        """The verdict as one line that names its cluster: what every reader shows and tests compare."""
        return f"{self.cluster}: {self.verdict}"


def read(r: data.Reader, f: data.Filters) -> list[ClusterAnswer]:
    """One answer per cluster the filters select (a page reads the same two queries through its cache and
    calls `build`)."""
    return build(data.scorecard(r, f), data.counterfactual(r, f))


def build(card: pl.DataFrame, cf: dict[str, pl.DataFrame]) -> list[ClusterAnswer]:
    """One answer per cluster of `card` (data.scorecard), from the stored verdict and counterfactual (`cf`,
    data.counterfactual)."""
    stored = counterfactual.answers(cf["runs"].to_dicts(), cf["scenarios"].to_dicts(), cf["figures"].to_dicts())
    return [_one(card.filter(pl.col("cluster") == cluster).row(0, named=True), stored.get(cluster))
            for cluster in card["cluster"].unique(maintain_order=True).to_list()]


def _one(row: dict, answer: counterfactual.Answer | None) -> ClusterAnswer:
    reasons: tuple[str, ...]
    if row["verdict"] is None:
        verdict, level, borderline, reasons = "not decided yet: run `preemptlens analyze`", "info", False, ()
    else:
        v = {**row, "borderline": row["verdict_borderline"]}
        verdict = scorecard.verdict_text(v, answer)
        borderline = bool(row["verdict_borderline"])
        level = "warning" if borderline and LEVELS[row["verdict"]] == "success" else LEVELS[row["verdict"]]
        reasons = tuple(scorecard.reasons_of(v))
    if answer is None:
        head = "No counterfactual: the recorded window could not be replayed (it needs pools and runs)."
        return ClusterAnswer(row["cluster"], verdict, level, borderline, reasons, row["fix_first"], row["adoption"],
                             head, None, None, None)
    return ClusterAnswer(
        cluster=row["cluster"], verdict=verdict, level=level, borderline=borderline, reasons=reasons,
        fix_first=row["fix_first"], adoption=row["adoption"],
        headline=_sentence(scorecard.headline_text(answer)),
        waits=tuple(_sentence(line) for line in scorecard.tier_wait_lines(answer)),
        net=_sentence(scorecard.net_text(answer)),
        replay=_sentence(scorecard.replay_error_text(answer.run)),
        reproduces=bool(answer.run["reproduces"]),
        alternatives=tuple(scorecard.alternatives_text(answer)),
        tiers=tuple(scorecard.tier_rows(answer)),
    )


def show(answers: list[ClusterAnswer]) -> None:
    """The answer block on a Streamlit page: per cluster the verdict, the headline, the net and the first fix,
    then the evidence behind them in an expander."""
    import streamlit as st

    if not answers:
        st.info("No runs in the warehouse yet: nothing to answer.")
    for a in answers:
        getattr(st, a.level)(a.line)
        st.markdown(f"**Replayed:** **{a.headline}**")
        if a.waits:
            st.markdown("\n".join(f"- {line}" for line in a.waits))
        if a.net:
            st.markdown(a.net)
        if a.fix_first:
            st.markdown(f"**Fix first:** {a.fix_first}.")
        if a.adoption:
            st.caption(f"Adoption order: {a.adoption}.")
        if a.replay:
            st.caption(a.replay + ("" if a.reproduces else " Read the replayed figures as rough."))
        with st.expander(f"Why: the verdict's evidence and the replayed figures per tier ({a.cluster})"):
            for reason in a.reasons:
                st.markdown(f"- {reason}")
            for line in a.alternatives:
                st.markdown(f"- {line}")
            if a.tiers:
                st.dataframe(pl.DataFrame(list(a.tiers)), hide_index=True, key=f"answer_tiers_{a.cluster}",
                             placeholder=UNKNOWN)


def markdown(a: ClusterAnswer) -> str:
    """The answer block in Markdown (the weekly report's first section), every text from the data escaped
    (preemptlens.escape): a cluster or team name never becomes markup."""
    e = escape.markdown
    lines = [f"**Verdict:** {e(a.line)}", "", f"**Replayed:** {e(a.headline)}"]
    if a.waits:
        lines += [""] + [f"- {e(line)}" for line in a.waits]
    if a.net:
        lines += ["", e(a.net)]
    if a.fix_first:
        lines += ["", f"**Fix first:** {e(a.fix_first)}."]
    if a.adoption:
        lines += ["", f"Adoption order: {e(a.adoption)}."]
    if a.replay:
        lines += ["", e(a.replay)]
    lines += [""] + [f"- {e(r)}" for r in (*a.reasons, *a.alternatives)]
    return "\n".join(lines).rstrip() + "\n"


def _sentence(text: str) -> str:
    text = text.strip()
    return (text[0].upper() + text[1:] + ("" if text.endswith(".") else ".")) if text else text


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

    def in_money(self, price: float, currency: str) -> str | None:
        """The same GPU-hours at a price per GPU-hour; None without a price."""
        if not price:
            return None
        thrown = money(self.thrown_away, price, currency)
        return (f"At {number(price, 2)} {currency} per GPU-hour: work thrown away {thrown} (compute paid for "
                f"twice); victims' waiting {money(self.waiting, price, currency)} against the preemptors' "
                f"{money(self.gain, price, currency)} saved (GPU-hours of waiting, priced the same).")
