"""`preemptlens rename-cluster OLD NEW`: move every row loaded under one cluster name to another.

For rows that landed under the wrong name (before the source named the
cluster, data loaded as `demo` because nobody set `cluster.name`). Every
table with a `cluster` column moves in one transaction: raw tables, the
collectors' cursors (so the next collection continues where it stopped) and
the derived tables (so readers agree until the next `analyze`). Nothing moves
when a row of NEW already has the natural key a row of OLD would take in a
raw table. In a derived one (a whole cluster's counterfactual or verdict)
such a row of OLD is dropped: it summed up data that now belongs to NEW, and
the next `analyze` computes NEW's again. A
cursor that NEW has too is NEW's: it was written by the collection that names
the cluster right, and the rows OLD's cursor covered are moved anyway. The
rename is recorded in `_loads` (source `rename-cluster OLD -> NEW`, `loaded` =
rows moved).
"""

from __future__ import annotations

import argparse
import uuid
from datetime import UTC, datetime

from preemptlens.config import Config, WarehouseSettings
from preemptlens.contract import RULES
from preemptlens.errors import ConfigError
from preemptlens.warehouse import Warehouse, quote

_CURSORS = "_watermarks"


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("old", help="the cluster name the rows carry now")
    parser.add_argument("new", help="the name they should carry")


def _tables(wh: Warehouse) -> list[str]:
    return [r[0] for r in wh.con.execute(
        "SELECT c.table_name FROM information_schema.columns AS c "
        "JOIN information_schema.tables AS t ON t.table_schema = c.table_schema AND t.table_name = c.table_name "
        "WHERE c.table_schema = 'main' AND c.column_name = 'cluster' AND t.table_type = 'BASE TABLE' "
        "ORDER BY c.table_name"
    ).fetchall()]


def _key(wh: Warehouse, table: str) -> tuple[str, ...]:
    """The natural key: the load contract's, else the table's primary key; () when it has none."""
    if table in RULES:
        return RULES[table].key
    found = wh.con.execute(
        "SELECT constraint_column_names FROM duckdb_constraints() "
        "WHERE schema_name = 'main' AND table_name = $t AND constraint_type = 'PRIMARY KEY'",
        {"t": table},
    ).fetchone()
    return tuple(found[0]) if found else ()


def _same_key(wh: Warehouse, table: str) -> str | None:
    """The condition that a row o of OLD has the natural key of a row n of NEW; None when the key has no cluster."""
    if "cluster" not in _key(wh, table) or table == _CURSORS:
        return None
    return "".join(f" AND n.{quote(c)} IS NOT DISTINCT FROM o.{quote(c)}" for c in _key(wh, table) if c != "cluster")


def collisions(wh: Warehouse, old: str, new: str, *, raw: bool = True) -> dict[str, int]:
    """Per raw table (or, with raw=False, per derived table), the rows of OLD whose natural key NEW holds."""
    found: dict[str, int] = {}
    for table in _tables(wh):
        same = _same_key(wh, table)
        if same is None or (table in RULES) != raw:
            continue
        count = wh.con.execute(
            f"SELECT count(*) FROM {quote(table)} AS o JOIN {quote(table)} AS n "  # noqa: S608 -- quoted identifiers
            f"ON o.cluster = $old AND n.cluster = $new{same}",
            {"old": old, "new": new},
        ).fetchone()
        if count and count[0]:
            found[table] = int(count[0])
    return found


def rename(wh: Warehouse, old: str, new: str) -> dict[str, int]:
    """Rows moved per table; raises ConfigError and moves nothing when NEW's keys collide."""
    if not new.strip() or old == new:
        raise ConfigError(f"rename-cluster: cannot rename {old!r} to {new!r}", "give two different, non-empty names")
    clash = collisions(wh, old, new)
    if clash:
        detail = ", ".join(f"{table} ({n} rows)" for table, n in clash.items())
        raise ConfigError(
            f"rename-cluster: {new!r} already holds rows with the keys of {old!r}'s rows in {detail}; nothing moved",
            f"the same records were loaded under both names: delete one copy, or rename {old!r} to another name",
        )
    moved: dict[str, int] = {}
    started = datetime.now(UTC)
    with wh.transaction():
        wh.con.execute(
            "DELETE FROM _watermarks AS o WHERE o.cluster = $old AND EXISTS (SELECT 1 FROM _watermarks AS n "
            "WHERE n.cluster = $new AND n.collector = o.collector AND n.stream = o.stream)",
            {"old": old, "new": new},
        )
        for table in collisions(wh, old, new, raw=False):
            wh.con.execute(
                f"DELETE FROM {quote(table)} AS o WHERE o.cluster = $old AND EXISTS "  # noqa: S608 -- quoted
                f"(SELECT 1 FROM {quote(table)} AS n WHERE n.cluster = $new{_same_key(wh, table)})",
                {"old": old, "new": new},
            )
        for table in _tables(wh):
            done = wh.con.execute(
                f"UPDATE {quote(table)} SET cluster = $new WHERE cluster = $old",  # noqa: S608 -- quoted identifier
                {"old": old, "new": new},
            ).fetchone()
            if done and done[0]:
                moved[table] = int(done[0])
        if not moved:
            raise ConfigError(f"rename-cluster: no rows carry the cluster name {old!r}",
                              "see SELECT DISTINCT cluster FROM jobs")
        wh.con.execute(
            "INSERT INTO _loads (load_id, source, started_at, finished_at, loaded, unchanged, quarantined) "
            "VALUES ($id, $source, $started, $finished, $loaded, 0, 0)",
            {"id": f"rename-{uuid.uuid4().hex}", "source": f"rename-cluster {old} -> {new}", "started": started,
             "finished": datetime.now(UTC), "loaded": sum(moved.values())},
        )
    wh.mark_changed()
    return moved


def run(args: argparse.Namespace, config: Config) -> int:
    with Warehouse(config.of(WarehouseSettings).path) as wh:
        moved = rename(wh, args.old, args.new)
    for table, n in sorted(moved.items()):
        print(f"{table}: {n} rows moved from {args.old} to {args.new}")
    print("recorded in _loads; run `preemptlens analyze` to recompute the figures under the new name")
    return 0
