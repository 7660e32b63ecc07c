"""Who may see what: the one masking rule every outlet applies where rows leave for a reader.

A reader has a `Scope`: everything (an admin, the service's own commands and reports, or every reader while
`masking.show_other_teams_jobs` is on), or the job-level rows of some teams only. `mask` takes any frame to what a
reader of that scope may see: identifiers of another team's job (its id, name, user, host) become a numbered
"(another team #n)", free text that may name such a job (the scheduler's reason) loses every identifier in it and
the names the row hides, and any other text column of such a row not known to be public is masked too. A reader's
own team is never masked for them; team, pool, tier and cluster names are public, as are figures summed over jobs.

The dashboard's reader (dashboards/data.py) masks every query result for the logged-in reader; a victim notice
is masked for the team it goes to (analytics/alerts.py).
"""

from __future__ import annotations

import re
from dataclasses import dataclass

import polars as pl

from preemptlens.config import Config, section, setting


@section("masking", "Who may see which jobs: the dashboard's pages and the victim notices apply the same rule.")
@dataclass(frozen=True)
class MaskingSettings:
    show_other_teams_jobs: bool = setting(
        True,
        "Whether a reader who is not an admin sees the job ids, job names, users and hosts of other teams' "
        "jobs, on the dashboard and in victim notices (team, pool and cluster figures are shown to everyone; a "
        "reader's own team is never masked). Was dashboard.show_other_teams_jobs.",
    )


SETTINGS = MaskingSettings


@dataclass(frozen=True)
class Scope:
    """Whose job-level rows a reader sees: everyone's, or only those of `teams` (and their own jobs, which a
    query marks in its `own` column)."""

    everything: bool = True
    teams: tuple[str, ...] = ()


EVERYTHING = Scope()


def team_scope(config: Config, teams: tuple[str, ...]) -> Scope:
    """The scope of a reader who is no admin and belongs to `teams` (a team's webhook, a logged-in member)."""
    return EVERYTHING if config.of(MaskingSettings).show_other_teams_jobs else Scope(False, tuple(sorted(teams)))


# What an identifier of a job the reader may not see reads as (numbered within a result: "(another team #2)").
HIDDEN = "(another team)"
# Why a page hides something (Markdown), said where it does.
WHY_HIDDEN = "other teams' job ids, names and users are not shown to you (`masking.show_other_teams_jobs` is off)"
_SIDES = ("victim", "preemptor", "cheaper")
# Columns that name a job, a person or a machine: masked in a row whose owner the reader may not see.
_IDENTIFYING = re.compile(
    r"(?:^|_)(?:job_ids?|name|names|users?|user_name|email|hosts?|holder|nodes?|pods?|uid|namespace|workload)$"
)
# Free text that may quote identifiers (the scheduler's reason): every identifier-like word is taken out.
_FREE_TEXT = re.compile(r"(?:^|_)(?:reason|message|why|undo_why|note|details?)$")
# Text columns known to hold no identifier; any other text column of a masked row is masked too.
PUBLIC = frozenset({
    "cluster", "pool", "tier", "team", "state", "basis", "kind", "source", "priority_class", "unknown", "mode",
    "action", "scheduler", "period", "level", "victim_team", "preemptor_team", "cheaper_team", "victim_tier",
    "preemptor_tier", "cheaper_tier", "victim_cost_unknown", "hold_action", "hold_mode", "breakdown",
    "progress_source", "requeue_group", "requeue_size_class", "requeue_group_size_class",
})
_WORD = re.compile(r"[^\s,;()\[\]{}<>\"'`]+")


def is_hidden(column: str) -> pl.Expr:
    """Rows whose `column` was masked."""
    return pl.col(column).cast(pl.String).str.starts_with(HIDDEN[:-1])


def hides(value: object) -> bool:
    """Whether a value was masked."""
    return isinstance(value, str) and value.startswith(HIDDEN[:-1])


def mask(frame: pl.DataFrame, scope: Scope) -> pl.DataFrame:
    """`frame` as a reader of `scope` may see it: in each row whose job (victim, preemptor, cheaper victim, or
    the row's own `team`) belongs to a team not in scope, its identifiers and unknown text replaced by a
    numbered HIDDEN and identifiers taken out of its free text; a row marked `own` shows its victim side.
    An identifying column whose owner column is missing is masked whole: a new query cannot leak by
    forgetting to select its team."""
    if scope.everything or frame.is_empty():
        return frame
    columns = set(frame.columns)
    teams = list(scope.teams)
    visible: dict[str, pl.Expr] = {}
    for side in ("", *_SIDES):
        owner = f"{side}_team" if side else "team"
        if owner in columns:
            theirs = pl.col(owner).is_in(teams).fill_null(False)
            if side in ("", "victim") and "own" in columns:
                # A query of the reader's own jobs marks them, whichever team they ran for.
                theirs = theirs | pl.col("own").fill_null(False)
            visible[side] = theirs
    # A column of no side's belongs to every side the row has: shown only when all of them are.
    whole = pl.lit(False) if not visible else pl.all_horizontal(list(visible.values()))
    hidden_rows = frame.select(~whole).to_series() if visible else pl.Series([True] * frame.height)
    updates: dict[str, pl.Series] = {}
    free_text: list[str] = []
    for column in frame.columns:
        dtype = frame.schema[column]
        if column in PUBLIC or column == "own" or column.endswith("_team") or column == "team":
            continue
        side = next((s for s in _SIDES if column.startswith(f"{s}_")), "")
        shown: pl.Expr | None = visible.get(side) if side else visible.get("", whole if visible else None)
        if _FREE_TEXT.search(column) and dtype == pl.String:
            free_text.append(column)
            continue
        if not (_IDENTIFYING.search(column) or (dtype == pl.String and visible)):
            continue
        hide = pl.Series([True] * frame.height) if shown is None else frame.select(~shown).to_series()
        updates[column] = _numbered(frame[column], hide)
    for column in free_text:
        # The names this row hides come out of its free text too: a reason may quote a job's name ("serve-prod")
        # or user, words the generic scrub keeps.
        pairs = [(frame[c].to_list(), shown.to_list()) for c, shown in updates.items()]
        names = [[str(was[i]) for was, now in pairs if was[i] is not None and now[i] != was[i] and
                  now[i] != str(was[i])] for i in range(frame.height)]
        updates[column] = pl.Series(column, [
            _scrub(text, said) if hidden else text
            for text, hidden, said in zip(frame[column].to_list(), hidden_rows.to_list(), names, strict=True)
        ], dtype=pl.String)
    return frame.with_columns(list(updates.values())) if updates else frame


def _numbered(values: pl.Series, hide: pl.Series) -> pl.Series:
    """`values` with those where `hide` replaced by HIDDEN, numbered by the value they hide (nulls stay null)."""
    numbers: dict[object, int] = {}
    out: list[object] = []
    for value, hidden in zip(values.to_list(), hide.to_list(), strict=True):
        if value is None or not hidden:
            out.append(value)
            continue
        number = numbers.setdefault(value, len(numbers) + 1)
        out.append(f"{HIDDEN[:-1]} #{number})")
    if values.dtype != pl.String and any(h for h in hide.to_list()):
        return pl.Series(values.name, [None if v is None else str(v) for v in out], dtype=pl.String)
    return pl.Series(values.name, out, dtype=values.dtype)


def _scrub(text: str | None, names: list[str] | None = None) -> str | None:
    """Free text without the `names` its row hides nor any word that may identify a job, a person or a machine:
    one holding a digit, a slash, an @, an = or a colon inside it (JobId=123, ns/pod, 5f1c-..., user@host)."""
    if text is None:
        return None

    def word(m: re.Match[str]) -> str:
        token = m.group(0).rstrip(".:")
        if any(c.isdigit() for c in token) or any(c in token for c in "/@=:_"):
            return HIDDEN + m.group(0)[len(token):]
        return m.group(0)

    # Whole words first ("JobId=research-job-42" is one), then the plain names left.
    text = _WORD.sub(word, text)
    for name in sorted(names or (), key=len, reverse=True):
        if len(name) > 1:
            text = re.sub(rf"(?<![\w-]){re.escape(name)}(?![\w-])", HIDDEN, text)
    return text
