"""The registry of SQL views in sql/views and how they are materialised.

One view per file, the file name is the view name, and the first line is a
`-- ` comment defining the figure in one sentence. Views that read other
views are created after them (the order comes from the names they mention).
"""

from __future__ import annotations

import functools
import re
import time
from collections.abc import Collection, Iterable, Mapping
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path

from preemptlens.errors import SchemaError
from preemptlens.warehouse import SQL_DIR, Warehouse, quote

VIEWS_DIR = SQL_DIR / "views"
_NAME = re.compile(r"^[a-z][a-z0-9_]*$")


@dataclass(frozen=True)
class View:
    name: str
    path: Path
    header: str
    sql: str


def _header(path: Path, text: str) -> str:
    first = text.splitlines()[0] if text else ""
    if not first.startswith("-- ") or not first.rstrip().endswith("."):
        raise SchemaError(
            f"{path}: the first line must be a `-- ` comment defining the figure in one sentence",
            "start the file with e.g. `-- One row per preemption: ...`",
        )
    return first[3:].strip()


def registry(views_dir: Path = VIEWS_DIR) -> list[View]:
    """Every view, ordered so that each comes after the views it reads."""
    found: dict[str, View] = {}
    for path in sorted(views_dir.glob("*.sql")):
        if not _NAME.match(path.stem):
            raise SchemaError(f"{path}: a view file is named after its view (lower_snake_case.sql)")
        text = path.read_text()
        found[path.stem] = View(path.stem, path, _header(path, text), text)
    ordered: list[View] = []
    state: dict[str, str] = {}

    def visit(name: str, chain: tuple[str, ...]) -> None:
        if state.get(name) == "done":
            return
        if state.get(name) == "visiting":
            raise SchemaError(f"views depend on each other in a cycle: {' -> '.join((*chain, name))}")
        state[name] = "visiting"
        for other in mentions(found[name], found):
            visit(other, (*chain, name))
        state[name] = "done"
        ordered.append(found[name])

    for name in found:
        visit(name, ())
    return ordered


def _body(sql: str) -> str:
    """The SQL without comments, so that prose never creates a dependency."""
    return re.sub(r"--[^\n]*", "", sql)


def mentions(view: View, names: Iterable[str]) -> list[str]:
    """The names among `names` (tables, other views) that the view's SQL reads: a word of its text outside
    comments. A column or alias of the same name counts too, which errs on the side of reading more."""
    words = _words(view.sql)
    return sorted(n for n in names if n != view.name and n in words)


@functools.cache
def _words(sql: str) -> frozenset[str]:
    return frozenset(re.findall(r"\w+", _body(sql)))


# Tables analytics computes in Python from the views (analytics/whatif/counterfactual.py), which some views
# read in turn.
COMPUTED_TABLES = ("counterfactual_hours",)


def after_computed(views: list[View]) -> set[str]:
    """The views that read a computed table, directly or through another view: `analyze` builds them in a
    second pass, once the tables they read are computed from the first."""
    later: set[str] = set()
    for view in views:  # parents come first, so one pass sees every parent's mark
        body = _body(view.sql)
        if any(re.search(rf"\b{name}\b", body) for name in (*COMPUTED_TABLES, *later)):
            later.add(view.name)
    return later


def apply_views(
    wh: Warehouse,
    views_dir: Path = VIEWS_DIR,
    *,
    keep: Collection[str] = (),
    state: Mapping[str, str] | None = None,
    second: bool | None = None,
) -> dict[str, float]:
    """Materialise every figure as a table, parents before children, in one transaction.

    Readers (dashboard, report, alerts, ad-hoc SQL) then scan stored rows
    instead of re-running the ledger's joins on every query, and a snapshot
    published meanwhile holds the whole refresh or none of it. A view named in
    `keep` whose table exists is left as stored (its inputs did not change:
    analytics/refresh.py). `state` (name -> value) goes into analytics_state in
    the same transaction. `second`: only the views that read a computed table
    (True), only the others (False), or all. Returns the seconds each view
    built took, in order.
    """
    applied: dict[str, float] = {}
    views = registry(views_dir)
    if second is not None:
        later = after_computed(views)
        views = [v for v in views if (v.name in later) == second]
    with wh.transaction():
        kinds = dict(
            wh.con.execute(
                "SELECT table_name, table_type FROM information_schema.tables WHERE table_schema = 'main'"
            ).fetchall()
        )
        for view in views:
            if view.name in keep and kinds.get(view.name) == "BASE TABLE":
                continue
            if kinds.get(view.name) == "VIEW":
                wh.con.execute(f"DROP VIEW {quote(view.name)}")
            started = time.perf_counter()
            wh.con.execute(f"CREATE OR REPLACE TABLE {quote(view.name)} AS {_body(view.sql)}")
            applied[view.name] = time.perf_counter() - started
        now = datetime.now(UTC)
        for name, value in (state or {}).items():
            wh.con.execute(
                "INSERT INTO analytics_state VALUES ($n, $v, $t) ON CONFLICT (name) DO UPDATE SET "
                "value = excluded.value, updated_at = excluded.updated_at",
                {"n": name, "v": value, "t": now},
            )
    return applied
