"""The verdict: does preemption belong as a main tool here? One verdict from all the evidence, worded once.

The CLI, the dashboard, the weekly report, /metrics and the alerts all read the verdict that `refresh` stores
in `readiness_verdict` and word it through these functions, so it reads the same everywhere. Its evidence:

- the article's four questions (readiness_scorecard: yes, no, unknown, each borderline when a measure whose
  bootstrap interval over days holds its threshold could turn it);
- the counterfactual net (analytics/whatif/counterfactual.py): today's policy against no preemption on the same
  recorded jobs, tier-weighted, with its interval;
- the avoidable share: preemptions the ledger finds could have used idle-hoarded GPUs.

Preemption should not be the main tool when two or more questions answer no (the article: with only one or
two of four, not the main tool), when it clearly costs more than it saves at the configured tier weights, or
when clearly more of its preemptions than `analytics.avoidable_share_max` stood in for reclaiming idle GPUs.
Otherwise an unknown leaves it "cannot tell yet"; four yes and a net that pays make it a main tool, three yes
a main tool once the remaining no is fixed. The verdict is borderline when reading its borderline evidence the
other way would change it, and says what it rests on.

What to fix first is one list with `preemptlens suggest`: each failure maps to its own fixes (FIXES), and the
fixes are taken in suggest's ranking (its stored suggestions, where each failure has a fix of its own).
"""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field, replace
from datetime import UTC, datetime
from typing import Any

from preemptlens.analytics import scarcity
from preemptlens.analytics.actions import ACTIONS
from preemptlens.analytics.whatif import counterfactual
from preemptlens.analytics.whatif.replay import missed_labels, validation_text
from preemptlens.reading.words import (
    DURATION,
    GPU_H,
    RATIO,
    THROWN_AWAY_DRAINED,
    change,
    duration,
    gpu_hours,
    holds_zero,
    measure,
    measure_text,
    not_told_from_zero,
    pct,
    plural,
    quantity,
    uncertain_change,
    window,
)
from preemptlens.warehouse import Warehouse

# A measured no in words, by the measure that failed, where its name alone would not say why: Q3 tells a
# fleet that checkpoints rarely (measured) apart from one whose checkpoints were never collected (unknown).
NO_BECAUSE = {
    "checkpoint_coverage": "jobs checkpoint rarely",
    "loss_to_gain": "victims lose more work than their preemptors gain",
}
# The measures of a scorecard row's question that failed (comma-separated, for answer_text): a column every
# reader of readiness_scorecard (aliased `s`) selects. (Q1's no says why through its scarcity: question_text.)
FAILED_COLUMN = (
    "(SELECT string_agg(e.measure, ',' ORDER BY e.measure) FROM readiness_evidence AS e "
    "WHERE e.cluster = s.cluster AND e.question_no = s.question_no AND NOT e.passes) AS failed"
)
HOARDING_FLIPS = "busy_hours_share_with_idle"
# An info measure of evidence_text reads after these words (default: beside the question's own measures).
INFO_LEAD = {"jobs_never_fit": "left out"}
SCORECARD_SQL = f"SELECT s.*, {FAILED_COLUMN} FROM readiness_scorecard AS s ORDER BY cluster, question_no"  # noqa: S608 -- constants only

EVIDENCE_SQL = "SELECT * FROM readiness_evidence ORDER BY cluster, question_no, rule, measure"
VERDICT_SQL = "SELECT * FROM readiness_verdict ORDER BY cluster"
SUGGESTION_KINDS_SQL = """
WITH latest AS (SELECT cluster, max(window_end) AS window_end FROM suggestions GROUP BY cluster)
SELECT s.cluster, s.kind FROM suggestions AS s
INNER JOIN latest AS l ON l.cluster = s.cluster AND l.window_end = s.window_end
ORDER BY s.cluster, s.rank
"""

MAIN = "preemption can be a main tool"
ONCE_FIXED = "preemption can be a main tool once the remaining no is fixed"
NOT_MAIN = "preemption should not be the main tool"
CANNOT_TELL = "cannot tell yet"
VERDICTS = (MAIN, ONCE_FIXED, NOT_MAIN, CANNOT_TELL)

QUESTIONS = {
    1: "Are GPUs scarce for long stretches (not just at peaks)?",
    2: "Are priorities clear and narrow?",
    3: "Do victims recover cheaply?",
    4: "Are the rules visible?",
}

# What fixes each failure, as suggestion kinds (analytics/whatif/tuning.py); the article's remedies: Q1, GPUs not
# really scarce: reclaim idle GPUs and set quotas; Q2, priorities too broad: tier limits; Q3, costly recovery:
# checkpoints, near-completion protection, compensation (and the settings that throw less away); Q4, rules
# not visible: published rules and notices. A net loss is cut by throwing less away; avoidable preemptions by
# reclaiming the idle GPUs. Every fix is a scheduler setting or one of preemptlens's actions (its kind is the
# action's name): choosing victims by least live cost is no fix, since no scheduler offers it.
_ACTIONS = ("kai_protect", "slurm_protect", "kueue_boost")
_RECOVERY = ("checkpoint_interval", "near_completion", "repeat_victims", *_ACTIONS, "grace_time", "min_run_time")
FIXES: Mapping[str, tuple[str, ...]] = {
    "Q1": ("quotas", "idle_reclaim"),
    "Q2": ("tier_limits",),
    "Q3": _RECOVERY,
    "Q4": ("published_rules",),
    "net": ("near_completion", *_ACTIONS, "min_run_time", "grace_time", "checkpoint_interval", "repeat_victims"),
    "avoidable": ("idle_reclaim",),
    "hoarding": ("idle_reclaim",),
}
# Each fix in a few words, for fix_first.
FIX_NAMES: Mapping[str, str] = {
    "idle_reclaim": "reclaim idle GPUs",
    "quotas": "quotas and tiered pools",
    "tier_limits": "tier limits",
    "checkpoint_interval": "checkpoints",
    "near_completion": "holding victims near completion back (preemptlens's action)",
    "repeat_victims": "compensation for repeat victims",
    "kai_protect": f"holding costly victims back (preemptlens's {ACTIONS['kai_protect'].title})",
    "slurm_protect": f"holding costly victims back (preemptlens's {ACTIONS['slurm_protect'].title} for their next run)",
    "kueue_boost": f"boosting costly victims (preemptlens's {ACTIONS['kueue_boost'].title})",
    "grace_time": "a grace time for final checkpoints",
    "min_run_time": "a minimum run time",
    "published_rules": "published rules and victim notices",
}


def evidence_text(rows: Sequence[Mapping[str, Any]]) -> str:
    """A question's measures in words: the required ones, then 'and one of' the alternatives."""
    required = [measure_text(r) for r in rows if r["rule"] == "all"]
    options = [measure_text(r) for r in rows if r["rule"] == "any"]
    busy = next((r["value"] for r in rows if r["measure"] == "busy_hours_share"), None)
    # Q1's busy hours with idle-hoarded GPUs left in say something only where hoarding moves them
    info = [(INFO_LEAD.get(str(r["measure"]), "beside it"), measure_text(r)) for r in rows
            if r["rule"] == "info" and r["value"] and not (r["measure"] == HOARDING_FLIPS and r["value"] == busy)]
    parts = list(required)
    if options:
        parts.append("and one of: " + ", ".join(options))
    parts += [f"{lead}: {t}" for lead, t in info]
    return "; ".join(parts)


def answer_text(answer: bool | None, missing: str | None = None, borderline: bool = False,
                failed: str | None = None) -> str:
    """'yes', 'no', 'borderline no', or 'unknown (what is missing)'; a no says why when a failed measure of
    `failed` (comma-separated, FAILED_COLUMN) says more than its name."""
    if answer is None:
        return f"unknown ({missing})" if missing else "unknown"
    word = "yes" if answer else "no"
    because = [] if answer else [NO_BECAUSE[m] for m in (failed or "").split(",") if m in NO_BECAUSE]
    word = f"{word} ({'; '.join(because)})" if because else word
    return f"borderline {word}" if borderline else word


def question_text(row: Mapping[str, Any], evidence: Sequence[Mapping[str, Any]]) -> str:
    """A readiness_scorecard row's answer in words, as every outlet prints it (answer_text); Q1's, once known,
    followed by the cluster's scarcity, the word and figure the Pilot page prints too (analytics/scarcity.py).
    `evidence`: readiness_evidence rows (the cluster's are picked)."""
    said = answer_text(row["answer"], row["missing"], row["borderline"], row.get("failed"))
    if row["question_no"] != scarcity.Q1 or row["answer"] is None:
        return said
    return f"{said}: {_scarcity_words(scarcity.scarcity(row, evidence))}"


def _scarcity_words(found: scarcity.Scarcity) -> str:
    # the answer before it already says borderline
    return replace(found, borderline=False).words()


# -- the verdict ---------------------------------------------------------------------------------


@dataclass(frozen=True)
class Evidence:
    """Everything the verdict of one cluster reads."""

    cluster: str
    answers: Mapping[int, bool | None]
    borderline: Mapping[int, bool]
    evidence: Sequence[Mapping[str, Any]]
    net: Mapping[str, Any] | None  # counterfactual_runs row
    suggested: Sequence[str] = ()  # suggest's kinds, in its rank order; empty: suggest has not run
    structure: Mapping[str, Any] | None = None  # pool_structure row

    def measure(self, name: str) -> Mapping[str, Any] | None:
        return next((r for r in self.evidence if r["measure"] == name), None)


@dataclass(frozen=True)
class Verdict:
    cluster: str
    verdict: str
    borderline: bool
    reasons: tuple[str, ...]
    fix_kinds: tuple[str, ...]
    fixes_ranked: bool
    adoption_step: int | None
    adoption: str
    failures: tuple[str, ...] = field(default_factory=tuple)

    @property
    def fix_first(self) -> str | None:
        return ", ".join(FIX_NAMES.get(k, k) for k in self.fix_kinds) or None


def _net_state(net: Mapping[str, Any] | None) -> str | None:
    """pays | costs | borderline (interval holds 0) | None (unknown: no counterfactual, no preemption, or a replay
    that does not reproduce its window: its net is no evidence either way, so the verdict cannot be firm on it)."""
    if net is None or net.get("net_value") is None or not net["reproduces"]:
        return None
    low, high, value = net.get("net_low"), net.get("net_high"), net["net_value"]
    if low is None or high is None:
        return "pays" if value > 0 else "costs" if value < 0 else None
    if low > 0:
        return "pays"
    if high < 0:
        return "costs"
    if low == high == 0:
        return None  # nothing was preempted: nothing to weigh
    return "borderline"


def _decide(answers: Mapping[int, bool | None], net: str | None, avoidable: bool | None) -> str:
    """The verdict from the answers (True yes), the net state (pays/costs/None) and whether the avoidable share
    is too high (None unknown)."""
    noes = sum(1 for a in answers.values() if a is False)
    if noes >= 2 or net == "costs" or avoidable:
        return NOT_MAIN
    if any(a is None for a in answers.values()) or net is None:
        return CANNOT_TELL
    if noes == 0:
        return MAIN
    return ONCE_FIXED


def failing(ev: Evidence) -> tuple[str, ...]:
    """What failed: 'hoarding' (more allocated GPU-hours held idle than analytics.reclaim_idle_share: a fix, not
    a reason against preemption) and 'avoidable' first, since idle GPUs are the article's first suspect when GPUs
    look scarce; then 'Q1'..'Q4' answered no, and 'net' when preemption costs more than it saves (or leans so)."""
    found = []
    for item, name in (("hoarding", "hoarded_share_of_allocated"), ("avoidable", "avoidable_share")):
        row = ev.measure(name)
        if row is not None and row["passes"] is False:
            found.append(item)
    found += [f"Q{q}" for q in sorted(ev.answers) if ev.answers[q] is False]
    if _net_state(ev.net) == "costs" or (_net_state(ev.net) == "borderline" and ev.net and ev.net["net_value"] < 0):
        found.append("net")
    return tuple(found)


def addressed(failures: Sequence[str]) -> tuple[str, ...]:
    """The suggestion kinds that fix these failures, each once, in the order of the failures."""
    kinds: list[str] = []
    for item in failures:
        kinds += [k for k in FIXES.get(item, ()) if k not in kinds]
    return tuple(kinds)


def decide(ev: Evidence) -> Verdict:
    net_state = _net_state(ev.net)
    avoid = ev.measure("avoidable_share")
    too_avoidable = None if avoid is None or avoid["passes"] is None else not avoid["passes"]
    # a net whose interval holds 0 is read by its sign
    leaning = net_state
    if net_state == "borderline" and ev.net is not None:
        leaning = "pays" if ev.net["net_value"] >= 0 else "costs"
    point = _decide(ev.answers, leaning, too_avoidable)
    # The verdict with every borderline piece of evidence read the other way, all at once in each direction
    # (the verdict is monotone in each): borderline when the best and the worst case differ.
    best = {q: (True if ev.borderline.get(q) and a is not None else a) for q, a in ev.answers.items()}
    worst = {q: (False if ev.borderline.get(q) and a is not None else a) for q, a in ev.answers.items()}
    avoid_border = bool(avoid and avoid["borderline"])
    best_v = _decide(best, "pays" if net_state == "borderline" else net_state,
                     False if avoid_border else too_avoidable)
    worst_v = _decide(worst, "costs" if net_state == "borderline" else net_state,
                      True if avoid_border else too_avoidable)
    rests_on = [f"Q{q}" for q, b in sorted(ev.borderline.items()) if b and ev.answers.get(q) is not None]
    if net_state == "borderline":
        rests_on.append("the net")
    if avoid_border:
        rests_on.append("the avoidable share")
    borderline = best_v != worst_v
    reasons = _reasons(ev, net_state, too_avoidable)
    if borderline:
        reasons.insert(0, "borderline: it rests on " + ", ".join(rests_on)
                       + f" (read the other way: {worst_v if point != worst_v else best_v})")
    failures = failing(ev)
    wanted = addressed(failures)
    ranked = bool(ev.suggested)
    kinds = tuple(k for k in dict.fromkeys(ev.suggested) if k in wanted)
    # a failure no suggestion addresses (suggest has not run) names its own first fix, after the ranked ones
    kinds += _defaults([item for item in failures if not set(FIXES[item]) & set(kinds)])
    step, adoption = adoption_step(ev)
    return Verdict(ev.cluster, point, borderline, tuple(reasons), kinds, ranked, step, adoption, failures)


def _defaults(failures: Sequence[str]) -> tuple[str, ...]:
    """Each failure's first fix, in the order of the failures."""
    return tuple(dict.fromkeys(FIXES[item][0] for item in failures))


def _reasons(ev: Evidence, net_state: str | None, too_avoidable: bool | None) -> list[str]:
    reasons = []
    for q in sorted(ev.answers):
        a = ev.answers[q]
        if a is False:
            failed = [measure_text(r) for r in ev.evidence
                      if r["question_no"] == q and r["rule"] in ("all", "any") and r["passes"] is False]
            said = answer_text(a, borderline=ev.borderline.get(q, False), failed=",".join(
                str(r["measure"]) for r in ev.evidence if r["question_no"] == q and r["passes"] is False))
            if q == scarcity.Q1:
                # Q1's no is the cluster's scarcity, worded as every outlet words it (idle-hoarded GPUs named)
                said += ": " + _scarcity_words(scarcity.scarcity(
                    {"cluster": ev.cluster, "answer": a, "borderline": False, "missing": None}, ev.evidence))
                reasons.append(f"Q{q} {QUESTIONS[q][0].lower()}{QUESTIONS[q][1:-1]}? {said}")
                continue
            reasons.append(f"Q{q} {QUESTIONS[q][0].lower()}{QUESTIONS[q][1:-1]}? {said}: {', '.join(failed)}")
    net = ev.net
    weighed = "no net"
    if net is not None and net.get("net_value") is not None:
        weighed = f"net {net_words(net)}"
    if net is None:
        reasons.append("no counterfactual: the recorded window could not be replayed (it needs pools and runs)")
    elif not net["reproduces"]:
        missed = _missed(net)
        reasons.append(f"the net against plain queueing is not read ({weighed}): the replay behind it does not "
                       "reproduce the recorded window"
                       + (f" ({', '.join(missed)} off by more than the tolerance)" if missed else
                          " (no figure that differs between policies could be checked)")
                       + ", so the verdict cannot rest on it")
    elif net_state is None:
        reasons.append("nothing was preempted in the recorded window: nothing to weigh against plain queueing")
    elif net_state == "costs":
        reasons.append(f"against plain queueing, preemption cost more than it saved at the configured tier "
                       f"weights ({weighed}); {breakeven_text(net)}")
    elif net_state == "pays":
        reasons.append(f"against plain queueing, preemption saved more than it cost ({weighed})")
    else:
        reasons.append(f"against plain queueing, preemption's {weighed}: its interval holds 0")
    avoid = ev.measure("avoidable_share")
    if too_avoidable:
        assert avoid is not None
        reasons.append(f"{measure('avoidable_share', avoid['value'])} of preemptions could have used idle-hoarded "
                       f"GPUs instead (at most {measure('avoidable_share', avoid['threshold'])})")
    unknown = [f"Q{q}" for q, a in sorted(ev.answers.items()) if a is None]
    if unknown:
        reasons.append(f"could not answer {', '.join(unknown)}")
    return reasons


def breakeven_text(net: Mapping[str, Any]) -> str:
    """Where today's preemption breaks even against plain queueing, next to the weights in force."""
    weights = json.loads(net["tier_weights"]) if isinstance(net["tier_weights"], str) else net["tier_weights"]
    configured = ", ".join(f"{t} {weights[t]:g}" for t in ("critical", "high", "normal", "low") if t in weights)
    kind, factor = net["breakeven"], net.get("breakeven_factor")
    if kind == "never":
        return f"it does not pay at any weight: critical and high work gained no queue time (weights {configured})"
    if kind == "always":
        return ("it pays at any weight of critical and high work: at their weights the normal and low tiers lost "
                f"nothing on balance (weights {configured})")
    if kind != "factor" or factor is None:
        return "break-even unknown"
    crit, high = weights.get("critical", 0.0) * factor, weights.get("high", 0.0) * factor
    at = f"{factor:,.2f}x their configured weights (critical {crit:,.3g}, high {high:,.3g})"
    if factor <= 1:
        return (f"it pays at the configured weights ({configured}), and would still with critical and high work "
                f"weighted as low as {at}")
    return f"it breaks even only once critical and high work is worth {at}; configured: {configured}"


def adoption_step(ev: Evidence) -> tuple[int | None, str]:
    """Which step of the article's adoption order the cluster is on: the first not yet done.

    1 quotas, queues and tiered pools (read from the scheduler: pool_structure); 2 the work that truly needs
    time guarantees identified (Q2 yes); 3 preemption piloted on recoverable jobs (Q3 yes); 4 completion time,
    user experience and retry cost measured (the counterfactual reproduces the past and Q4 yes); 5 decide
    whether to widen (everything above done: the verdict says).
    """
    steps = [
        ("add quotas, queues and tiered pools", _structure_done(ev.structure)),
        ("identify the work that truly needs time guarantees (narrow, stable priorities)", ev.answers.get(2)),
        ("pilot preemption only on recoverable jobs", ev.answers.get(3)),
        ("measure completion time, user experience and retry cost",
         None if ev.net is None or ev.answers.get(4) is None else bool(ev.net["reproduces"] and ev.answers[4])),
    ]
    for number, (what, done) in enumerate(steps, start=1):
        if done is None:
            why = _structure_missing(ev.structure) if number == 1 else "its evidence is unknown"
            return None, f"cannot tell whether step {number} of 5 ({what}) is done: {why}"
        if not done:
            return number, f"step {number} of 5: {what}" + (_structure_text(ev.structure) if number == 1 else "")
    return 5, "step 5 of 5: decide whether to widen preemption" + _structure_text(ev.structure)


def _structure_done(structure: Mapping[str, Any] | None) -> bool | None:
    if structure is None:
        return None
    quotas, pools = structure.get("has_quotas"), structure.get("has_tiered_pools")
    if quotas is None or pools is None:
        return None
    return bool(quotas and pools)


def _structure_missing(structure: Mapping[str, Any] | None) -> str:
    if structure is None:
        return "no scheduler quotas or pools collected (Slurm QOS and partitions, Kueue ClusterQueues, KAI queues)"
    return str(structure.get("detail") or "quotas or pools unknown")


def _structure_text(structure: Mapping[str, Any] | None) -> str:
    """What the scheduler showed, for step 1 (quotas and tiered pools)."""
    if structure is None:
        return ""
    quotas = "quotas yes" if structure["has_quotas"] else "no GPU quotas"
    pools = "tiered pools yes" if structure["has_tiered_pools"] else "no tiered pools"
    return f" ({quotas}, {pools}: {structure['detail']})"


# -- storage and reading ------------------------------------------------------------------------------


def gather(wh: Warehouse) -> list[Evidence]:
    card = wh.query(SCORECARD_SQL).to_dicts()
    evidence = wh.query(EVIDENCE_SQL).to_dicts()
    nets = {r["cluster"]: r for r in wh.query(counterfactual.READ_RUNS).to_dicts()}
    suggested: dict[str, list[str]] = {}
    if _has(wh, "suggestions"):
        for r in wh.query(SUGGESTION_KINDS_SQL).to_dicts():
            suggested.setdefault(r["cluster"], []).append(r["kind"])
    structure: dict[str, dict[str, Any]] = {}
    if _has(wh, "pool_structure"):
        structure = {r["cluster"]: r for r in wh.query("SELECT * FROM pool_structure").to_dicts()}
    found = []
    for cluster in dict.fromkeys(r["cluster"] for r in card):
        rows = [r for r in card if r["cluster"] == cluster]
        found.append(Evidence(
            cluster=cluster,
            answers={r["question_no"]: r["answer"] for r in rows},
            borderline={r["question_no"]: bool(r["borderline"]) for r in rows},
            evidence=[e for e in evidence if e["cluster"] == cluster],
            net=nets.get(cluster),
            suggested=tuple(suggested.get(cluster, ())),
            structure=structure.get(cluster),
        ))
    return found


def _has(wh: Warehouse, table: str) -> bool:
    return bool(wh.con.execute("SELECT count(*) FROM information_schema.tables WHERE table_name = $t",
                               {"t": table}).fetchall()[0][0])


def refresh(wh: Warehouse) -> list[Verdict]:
    """Decide every cluster's verdict and store it in readiness_verdict (replacing the previous ones)."""
    verdicts = [decide(ev) for ev in gather(wh)]
    now = datetime.now(UTC)
    with wh.transaction():
        wh.con.execute("DELETE FROM readiness_verdict")
        for v in verdicts:
            wh.con.execute(
                "INSERT INTO readiness_verdict VALUES "
                "($c, $v, $b, $reasons, $fix, $kinds, $ranked, $step, $adoption, $at)",
                {"c": v.cluster, "v": v.verdict, "b": v.borderline, "reasons": json.dumps(list(v.reasons)),
                 "fix": v.fix_first, "kinds": json.dumps(list(v.fix_kinds)), "ranked": v.fixes_ranked,
                 "step": v.adoption_step, "adoption": v.adoption, "at": now},
            )
    wh.mark_changed()
    return verdicts


def failures_of(wh: Warehouse, cluster: str) -> tuple[str, ...]:
    """What failed on a cluster (for suggest's ranking: the fixes of what failed come first)."""
    for ev in gather(wh):
        if ev.cluster == cluster:
            return failing(ev)
    return ()


# -- wording --------------------------------------------------------------------------------------------


def verdict_text(row: Mapping[str, Any], answer: counterfactual.Answer | None = None) -> str:
    """The verdict of one cluster in one line, from its readiness_verdict row (with the scorecard's tallies
    when given): the verdict, whether it is borderline, what to fix first, and (with the cluster's
    counterfactual) the best applicable alternative with its replayed net."""
    text = f"borderline: {row['verdict']}" if row["borderline"] else str(row["verdict"])
    if "yes_count" in row and row.get("yes_count") is not None:
        text += f" ({row['yes_count']} yes, {row['no_count']} no, {row['unknown_count']} unknown of 4)"
    if row.get("fix_first"):
        text += f"; fix first: {row['fix_first']}"
    best = None if answer is None else alternative_text(answer)
    return f"{text}; {best}" if best else text


def _net_words(s: Mapping[str, Any]) -> str:
    return f"net {net_words(s)} against plain queueing"


def alternative_text(answer: counterfactual.Answer) -> str | None:
    """The best applicable alternative (a scheduler setting or preemptlens's action, replayed as it acts) with its
    replayed net, beside today's; None when it was not replayed."""
    best = answer.scenario("best")
    if best is None or best["net_value"] is None:
        return None
    today = answer.scenario("today")
    beside = ("" if today is None or today["net_value"] is None
              else f" (today's policy: net {change(today['net_value'], GPU_H)})")
    return f"best applicable alternative: {best['label']}, replayed {_net_words(best)}{beside}"


def verdict_line(wh: Warehouse, cluster: str) -> str | None:
    """A cluster's stored verdict in one line, with the scorecard's tallies; None before `analyze`."""
    rows = wh.query(
        "SELECT v.*, s.yes_count, s.no_count, s.unknown_count FROM readiness_verdict AS v "
        "INNER JOIN (SELECT DISTINCT cluster, yes_count, no_count, unknown_count FROM readiness_scorecard) AS s "
        "ON s.cluster = v.cluster WHERE v.cluster = $c",
        {"c": cluster},
    ).to_dicts()
    return verdict_text(rows[0], counterfactual.read(wh).get(cluster)) if rows else None


def reasons_of(row: Mapping[str, Any]) -> list[str]:
    reasons = row.get("reasons")
    if isinstance(reasons, str):
        return [str(r) for r in json.loads(reasons)]
    return list(reasons or [])


def headline_text(answer: counterfactual.Answer) -> str:
    """The counterfactual headline in one sentence: today's policy against plain queueing."""
    run = answer.run
    if run["thrown_away_gpu_h"] == 0 and run["high_wait_saved_gpu_h"] == 0 and run["lower_wait_added_gpu_h"] == 0:
        return ("nothing was preempted in the recorded window: today's policy and plain queueing replay the same "
                f"({run['jobs']:,} jobs, {_window(run)})")
    saved, lower = run["high_wait_saved_gpu_h"], run["lower_wait_added_gpu_h"]
    # Queue time is GPUs asked for x hours waiting, a different currency from compute: each is named as such.
    upper = (f"saved critical+high work {gpu_hours(saved)}{_term(run, 'high_wait_saved_gpu_h')} of queue time"
             if saved >= 0 else
             f"cost critical+high work {gpu_hours(-saved)}{_term(run, 'high_wait_saved_gpu_h')} of extra queue time")
    thrown = (f"{gpu_hours(run['thrown_away_gpu_h'])}{_term(run, 'thrown_away_gpu_h')} "
              f"({THROWN_AWAY_DRAINED})")
    added = f"{gpu_hours(abs(lower))}{_term(run, 'lower_wait_added_gpu_h')}"
    cost = (f"it cost {thrown} and {added} of lower-tier queue time" if lower >= 0
            else f"it cost {thrown}, and lower tiers queued {added} less too")
    return (f"against plain queueing, preemption {upper}; {cost} (replayed on {run['jobs']:,} jobs submitted "
            f"{_window(run)}, each run to completion)")


def _term(run: Mapping[str, Any], column: str) -> str:
    """A headline term's interval (counterfactual_runs, `_interval_of`; term_intervals) in the direction
    its sentence words it (a cost of -x reads x): ' [a to b]'; one that holds 0 reads as every such figure does
    (words.not_told_from_zero)."""
    low, high = _interval_of(run, column)
    if low is None or high is None:
        return " (interval unknown)"
    if holds_zero(low, high):
        return f" [{not_told_from_zero(low, high, GPU_H)}]"
    near, far = sorted((abs(low), abs(high)))
    return f" [{gpu_hours(near)} to {gpu_hours(far)}]"


def _scenario_key(answer: counterfactual.Answer) -> str:
    """The scenario the headline weighs against no preemption: today's policy, or preemption turned on where the
    cluster does not preempt."""
    return "on" if answer.scenario("on") is not None else "today"


def capacity_text(run: Mapping[str, Any]) -> str | None:
    """The window's capacity in GPU-hours and how it is made; None before it was stored."""
    capacity = run.get("capacity_gpu_h")
    if capacity is None:
        return None
    hours = (run["window_end"] - run["window_start"]).total_seconds() / 3600.0
    gpus = round(capacity / hours) if hours > 0 else 0
    return f"the window's capacity: {gpu_hours(capacity)} ({gpus:,} GPUs × {quantity(hours, 'h')})"


def _share(part: float, whole: float) -> str:
    """A share that is not rounded to nothing: 0%, <0.1%, 3.3%, 36%."""
    share = part / whole
    return "<0.1%" if 0 < share < 0.0005 else pct(share)


def _against_capacity(gpu_h: float | None, capacity: float | None) -> str:
    if gpu_h is None or not capacity:
        return "unknown"
    share = gpu_h / capacity
    return f"{quantity(share, RATIO)} capacity" if share >= 1 else f"{_share(gpu_h, capacity)} of capacity"


def _interval_of(row: Mapping[str, Any], column: str) -> tuple[Any, Any]:
    """A stored figure's interval (counterfactual_figures or _runs: `<figure>_low`/`_high`, a duration's before its
    `_s`); (None, None) where it was not made."""
    low, high = counterfactual.interval_columns(column)
    return row.get(low), row.get(high)


def _bounds(row: Mapping[str, Any], column: str, unit: str) -> str:
    """' [low, high]' of a figure that has no sign to give (a count, queue GPU-hours), or ' (interval unknown)'."""
    low, high = _interval_of(row, column)
    if low is None or high is None:
        return " (interval unknown)"
    if low == high:
        return ""  # the same in every replicate: a range of one value says nothing more
    if unit == "jobs":
        return f" [{round(low):,} to {round(high):,}]"
    return f" [{quantity(low, unit)} to {quantity(high, unit)}]"


def _signed(row: Mapping[str, Any], column: str) -> str:
    """A signed extra queue time with its interval; one whose interval holds 0 gets no sign
    (words.uncertain_change)."""
    low, high = _interval_of(row, column)
    if low is None or high is None:
        return f"{change(row[column], DURATION)} (interval unknown)"
    return uncertain_change(row[column], low, high, DURATION)


def tier_wait_lines(answer: counterfactual.Answer) -> list[str]:
    """The headline's waiting per tier, in terms a reader can check: the jobs whose queue time changed against no
    preemption, their extra queue time per job (mean and median), the tier's queue GPU-hours against the window's
    capacity, the share of them after the window's end, and the jobs that cannot drain; each figure with its
    interval (counterfactual.figure_intervals), 'interval unknown' where none could be made."""
    run = answer.run
    key = _scenario_key(answer)
    capacity = run.get("capacity_gpu_h")
    lines = []
    for tier in ("critical", "high", "normal", "low"):
        other, base = answer.figure(key, tier), answer.figure("none", tier)
        if other is None or base is None or other.get("affected_jobs") is None:
            continue
        if other["affected_jobs"]:
            moved = (f"{plural(int(other['affected_jobs']), 'job')}{_bounds(other, 'affected_jobs', 'jobs')} whose "
                     f"queue time changed, by {_signed(other, 'extra_wait_mean_s')} a job on average "
                     f"(median {_signed(other, 'extra_wait_p50_s')})")
        else:
            moved = "no job's queue time changed"
        queued = other["waiting_gpu_h"]
        late = other.get("late_waiting_gpu_h")
        after = ("" if late is None or not queued
                 else ", none of it after the window's end" if not late
                 else f", {_share(late, queued)} of it after the window's end")
        line = (f"{tier}: {moved}; queue time {gpu_hours(queued)}{_bounds(other, 'waiting_gpu_h', GPU_H)} with "
                f"preemption ({_against_capacity(queued, capacity)}){after}, against "
                f"{gpu_hours(base['waiting_gpu_h'])}{_bounds(base, 'waiting_gpu_h', GPU_H)} without "
                f"({_against_capacity(base['waiting_gpu_h'], capacity)})")
        undrained = max(int(other.get("undrained_jobs") or 0), int(base.get("undrained_jobs") or 0))
        if undrained:
            line += (f"; {plural(undrained, 'job')} cannot drain (a run never started, even with nothing arriving "
                     "after the window): left out of these figures and the net")
        lines.append(line)
    shown = capacity_text(run)
    if lines and shown is not None:
        lines.append(f"{shown}; queue time is GPUs asked for × hours waiting, so it exceeds capacity when more "
                     "GPUs wait than the cluster has; the part after the window's end is what a replay cut there "
                     "would miss; a negative change per job is less queue time with preemption"
                     + (f"; the ranges are each figure's {run['interval_covers']}, as the net's"
                        if run.get("interval_covers") else ""))
    return lines


def _window(run: Mapping[str, Any]) -> str:
    return window(run["window_start"], run["window_end"])


def _validation(run: Mapping[str, Any]) -> tuple[float, list[dict[str, Any]]] | None:
    """The stored validation (counterfactual_runs.validation): its tolerance and checks; None before `analyze`."""
    stored = run.get("validation")
    if not stored:
        return None
    found = json.loads(stored) if isinstance(stored, str) else stored
    return float(found["tolerance"]), list(found["checks"])


def _missed(run: Mapping[str, Any]) -> list[str]:
    stored = _validation(run)
    return [] if stored is None else missed_labels(stored[1], stored[0])


def replay_error_text(run: Mapping[str, Any]) -> str:
    """The replay's validation under today's policy, on the figures that decide the net (replay.Validation)."""
    stored = _validation(run)
    if stored is None:
        return "the replay under today's policy is not validated yet: run `preemptlens analyze`"
    return validation_text(stored[1], stored[0])


def net_words(row: Mapping[str, Any]) -> str:
    """A stored net (a counterfactual_runs or counterfactual_scenarios row) with its interval, in tier-weighted
    GPU-hours; a net whose interval holds 0 gets no sign (words.uncertain_change)."""
    return f"{uncertain_change(row['net_value'], row['net_low'], row['net_high'], GPU_H)} tier-weighted"


def net_text(answer: counterfactual.Answer) -> str:
    run = answer.run
    covers = f" ({run['interval_covers']})" if run.get("interval_covers") else ""
    return (f"net at the configured tier weights: {net_words(run)}{covers} (each job's queue time saved less its "
            "work thrown away, in GPU-hours times its tier's weight; jobs that cannot drain left out); "
            + breakeven_text(run))


def sweep_texts(answer: counterfactual.Answer) -> list[str]:
    """The sweeps whose net is not monotone, each saying so and why (counterfactual.sweep_notes)."""
    stored = answer.run.get("sweeps")
    return list(json.loads(stored).values()) if stored else []


def alternatives_text(answer: counterfactual.Answer) -> list[str]:
    """The trigger thresholds, the best applicable alternative and the bound of choosing victims by least live
    cost (labelled as a bound, never a fix), each with its net against plain queueing, then the sweeps that are
    not monotone."""
    lines = []
    for s in answer.scenarios:
        if s["scenario"] in ("none", "today"):
            continue
        label = f"best applicable alternative: {s['label']}" if s["scenario"] == "best" else s["label"]
        lines.append(f"{label}: {_net_words(s)}, {s['preemptions']:,} preemptions")
    return lines + sweep_texts(answer)


TIER_COLUMNS = (
    ("wait_p50_s", "first-start wait, median", "duration"),
    ("wait_p90_s", "first-start wait, p90", "duration"),
    ("completion_p50_s", "completion time, median", "duration"),
    ("affected_jobs", "jobs whose queue time changed against no preemption", "jobs"),
    ("extra_wait_mean_s", "extra queue time per changed job, mean", "change"),
    ("extra_wait_p50_s", "extra queue time per changed job, median", "change"),
    ("thrown_away_gpu_h", THROWN_AWAY_DRAINED, "gpu_h"),
    ("victim_waiting_gpu_h", "victims' waiting", "gpu_h"),
    ("waiting_gpu_h", "all queue time", "gpu_h"),
    ("late_waiting_gpu_h", "of which after the window's end", "gpu_h"),
    ("undrained_jobs", "jobs that cannot drain (left out)", "jobs"),
    ("busy_gpu_h", "busy", "gpu_h"),
)


def _cell(value: Any, unit: str) -> str:
    if unit == "duration":
        return duration(value)
    if unit == "change":
        return change(value, DURATION)
    if unit == "jobs":
        return "unknown" if value is None else f"{int(value):,}"
    return gpu_hours(value)


def tier_rows(answer: counterfactual.Answer, scenarios: Sequence[str] = ("none", "today", "best")
              ) -> list[dict[str, str]]:
    """Per tier, each figure under the given scenarios side by side, worded with units."""
    rows = []
    best_trigger = answer.best_trigger()
    keys = list(scenarios)
    if best_trigger is not None and best_trigger["scenario"] not in keys:
        keys.insert(2, best_trigger["scenario"])
    labels = {"none": "no preemption", "today": "today", "best": "best alternative"}
    for tier in ("critical", "high", "normal", "low", "all"):
        for column, name, unit in TIER_COLUMNS:
            row = {"tier": tier, "figure": name}
            for key in keys:
                f = answer.figure(key, tier)
                value = None if f is None else f.get(column)
                label = labels.get(key) or _trigger_label(key)
                # against itself, no preemption changes no job's queue time
                row[label] = "-" if key == "none" and column.startswith(("affected", "extra")) else _cell(value, unit)
                # each figure with its interval (counterfactual.figure_intervals), as tier_wait_lines prints them
                if f is not None and value is not None and column in _WITH_INTERVAL and row[label] != "-":
                    row[label] = (_signed(f, column) if unit == "change"
                                  else row[label] + _bounds(f, column, _UNITS[unit]))
            rows.append(row)
    return rows


# The per-tier figures that carry an interval (counterfactual.figure_intervals): all but the count of jobs that
# cannot drain, which the replay gives whole or not at all.
_WITH_INTERVAL = tuple(column for column, _, _ in TIER_COLUMNS if column != "undrained_jobs")
_UNITS = {"duration": DURATION, "jobs": "jobs", "gpu_h": GPU_H}


def _trigger_label(key: str) -> str:
    return f"trigger {duration(float(key.removeprefix('trigger_')))}"


def render(wh: Warehouse) -> str:
    """What `analyze` and `demo` print: per cluster the counterfactual headline first, then the verdict, then
    the four questions with their evidence in words."""
    card = wh.query(SCORECARD_SQL)
    if card.height == 0:
        return "readiness scorecard: no runs in the warehouse yet"
    verdicts = {r["cluster"]: r for r in wh.query(VERDICT_SQL).to_dicts()}
    answers = counterfactual.read(wh)
    evidence = wh.query(EVIDENCE_SQL).to_dicts()
    lines: list[str] = []
    for cluster in card["cluster"].unique(maintain_order=True):
        rows = card.filter(card["cluster"] == cluster).to_dicts()
        lines.append(f"does preemption pay on cluster {cluster}?")
        answer = answers.get(cluster)
        if answer is not None:
            lines.append(f"  {headline_text(answer)}")
            lines += [f"    {line}" for line in tier_wait_lines(answer)]
            lines.append(f"  {net_text(answer)}")
            lines.append(f"  {replay_error_text(answer.run)}")
            best = answer.best_trigger()
            if best is not None:
                lines.append(f"  best trigger threshold: {best['label']}: net {net_words(best)}")
            lines += [f"  {text}" for text in sweep_texts(answer)]
        else:
            lines.append("  no counterfactual: the recorded window could not be replayed (it needs pools and runs)")
        v = verdicts.get(cluster)
        if v is not None:
            # the verdict's own fields (its borderline, not the first question's), the scorecard's tallies
            lines.append(f"  verdict: {verdict_text({**rows[0], **v}, answer)}")
            lines += [f"    - {r}" for r in reasons_of(v)]
            lines.append(f"  adoption: {v['adoption']}")
        lines.append("  readiness scorecard:")
        for r in rows:
            lines.append(f"  Q{r['question_no']} {r['question']} {question_text(r, evidence)}")
            mine = [e for e in evidence if e["cluster"] == cluster and e["question_no"] == r["question_no"]]
            lines.append(f"     {evidence_text(mine)}")
        other = [e for e in evidence if e["cluster"] == cluster and e["question_no"] == 0]
        if other:
            lines.append(f"  also read by the verdict: {'; '.join(measure_text(e) for e in other)}")
        if rows[0]["collect"]:
            lines.append(f"  to answer the rest, collect: {rows[0]['collect']}")
    return "\n".join(lines)
