"""`preemptlens sql`: read-only ad-hoc SQL over the warehouse.

`preemptlens sql "SELECT ..."` prints one query's result as a table (or CSV or
JSON with --format); `--query NAME` runs a named example from sql/queries/;
with no query it opens a prompt. Every statement reads the latest published
snapshot through the guard in preemptlens/readonly.py, so it never blocks a
collector and can neither touch files nor change data.
"""

from __future__ import annotations

import argparse
import json
import math
import sys
from dataclasses import replace
from datetime import date, datetime
from decimal import Decimal
from typing import TYPE_CHECKING, Any, TextIO

from preemptlens.config import Config, WarehouseSettings, number_argument
from preemptlens.errors import PreemptlensError
from preemptlens.escape import csv_text, text_value

if TYPE_CHECKING:
    import polars as pl

    from preemptlens.readonly import Limits, Result

# preemptlens.readonly (DuckDB, Arrow, polars) is imported where a command needs it: a query first starts the
# fork server its child comes from (preemptlens.queryserver), which then loads while this process does.

FORMATS = ("table", "csv", "json")
PROMPT = "preemptlens> "
CONTINUE = "        ...> "


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("sql", nargs="?", help="one SELECT statement; omit it for an interactive prompt")
    parser.add_argument("-q", "--query", metavar="NAME", help="run the named example query sql/queries/NAME.sql")
    parser.add_argument("--list", action="store_true", help="list the named example queries")
    parser.add_argument("-f", "--format", choices=FORMATS, default="table", help="output format (default: table)")
    parser.add_argument("--max-rows", type=number_argument(int, 1, 10_000_000),
                        help="row cap, at least 1 (default: sql.max_rows)")
    parser.add_argument("--timeout", type=number_argument(float, 0.1, 86_400),
                        help="seconds before the query is stopped (default: sql.timeout_s)")


def _cell(value: Any) -> str:
    if value is None:
        return "NULL"
    if isinstance(value, float):
        return _plain_number(value)
    return text_value(value)


def _plain_number(value: float) -> str:
    """Six significant digits, never in e-notation (a week's GPU-seconds run to 1e8, a rate per hour to 1e-5):
    every digit of a whole part of six or more, else rounded to six significant digits and written out."""
    if not math.isfinite(value):
        return str(value)
    if abs(value) >= 1e5:
        return f"{value:.0f}"
    return format(Decimal(f"{value:.6g}"), "f")


def format_table(frame: pl.DataFrame) -> str:
    header = frame.columns
    rows = [[_cell(v) for v in row] for row in frame.iter_rows()]
    numeric = [dtype.is_numeric() for dtype in frame.dtypes]
    widths = [max([len(h), *(len(r[i]) for r in rows)]) for i, h in enumerate(header)]

    def line(cells: list[str]) -> str:
        return " | ".join(c.rjust(w) if num else c.ljust(w) for c, w, num in zip(cells, widths, numeric, strict=True))

    out = [line(header), "-+-".join("-" * w for w in widths), *(line(r) for r in rows)]
    return "\n".join(s.rstrip() for s in out)


def render(result: Result, fmt: str) -> str:
    if fmt == "csv":
        return csv_text(result.frame)
    if fmt == "json":
        return json.dumps(result.frame.to_dicts(), default=_json_default)
    return format_table(result.frame)


def _json_default(value: object) -> str:
    if isinstance(value, datetime | date):
        return value.isoformat()
    return str(value)


def _print(result: Result, fmt: str, limits: Limits, out: TextIO) -> None:
    print(render(result, fmt), file=out)
    if result.truncated:
        print(f"(first {limits.max_rows} rows; raise --max-rows or sql.max_rows for more)", file=sys.stderr)
    elif fmt == "table":
        print(f"({result.frame.height} row{'s' if result.frame.height != 1 else ''})", file=out)


def _limits(args: argparse.Namespace, config: Config) -> Limits:
    from preemptlens.readonly import Limits

    # Only what the flags give is replaced: every other [sql] limit stays as configured.
    base = config.of(Limits)
    return replace(
        base,
        max_rows=args.max_rows if args.max_rows is not None else base.max_rows,
        timeout_s=args.timeout if args.timeout is not None else base.timeout_s,
    )


def run(args: argparse.Namespace, config: Config) -> int:
    if not args.list:
        from preemptlens import queryserver

        queryserver.start()
    from preemptlens.readonly import QueryError, named_queries, query

    limits = _limits(args, config)
    warehouse = config.of(WarehouseSettings).path
    if args.list:
        for name, (description, _) in named_queries().items():
            print(f"{name:28} {description}")
        return 0
    if args.query:
        queries = named_queries()
        if args.query not in queries:
            raise QueryError(f"no named query {args.query!r}", f"known: {', '.join(queries)}")
        text = queries[args.query][1]
    elif args.sql is not None:
        text = args.sql
    else:
        return prompt(warehouse, limits, args.format, sys.stdin, sys.stdout)
    _print(query(warehouse, text, limits), args.format, limits, sys.stdout)
    return 0


def prompt(warehouse: str, limits: Limits, fmt: str, stdin: TextIO, out: TextIO) -> int:
    """Read statements ending in `;` until EOF or `.quit`; an error does not end the session."""
    from preemptlens.readonly import named_queries, query

    interactive = stdin.isatty()
    if interactive:
        print("read-only SQL over the latest snapshot; end a statement with ';', .queries, .tables, .quit", file=out)
    pending: list[str] = []
    failed = False
    while True:
        if interactive:
            print(CONTINUE if pending else PROMPT, end="", file=out, flush=True)
        line = stdin.readline()
        if not line:
            break
        stripped = line.strip()
        if not pending and stripped in (".quit", ".exit"):
            break
        if not pending and stripped == ".queries":
            for name, (description, _) in named_queries().items():
                print(f"{name:28} {description}", file=out)
            continue
        if not pending and stripped == ".tables":
            stripped = "SELECT table_name, table_type FROM information_schema.tables ORDER BY table_name;"
        if not stripped and not pending:
            continue
        pending.append(stripped)
        if not stripped.endswith(";"):
            continue
        text = "\n".join(pending)
        pending = []
        try:
            _print(query(warehouse, text, limits), fmt, limits, out)
        except PreemptlensError as exc:
            failed = True
            print(f"error: {exc}", file=out if interactive else sys.stderr)
    # Piped statements are a script: a failed one makes the exit status say so.
    return 1 if failed and not interactive else 0
