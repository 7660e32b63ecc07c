"""Which of DuckDB's functions run SQL they are given: `python sql_probe.py` calls every table, scalar,
aggregate and macro function `duckdb_functions()` lists, each overload with arguments of its declared types,
once with a canary statement as text, once serialized (json_serialize_sql), once as the name of a view that
runs it, on a throwaway in-memory database with external access off; it prints, as JSON, the calls and
functions whose canary fired. Run in a child process: a call may crash or hang the engine."""

from __future__ import annotations

import json
import sys
import threading

import duckdb

CANARY = "canary-f1red"
# The canary's text appears only when the statement runs: an error that quotes the argument back (a file
# not found, a malformed value) holds its two halves apart.
STATEMENT = "SELECT error(concat('canary', '-', 'f1red'))"
VIEW = "canary_view"
SKIPPED_TYPES = ("pragma", "window")


def literal(text: str) -> str:
    return "'" + text.replace("'", "''") + "'"


def argument(kind: str, text: str) -> str:
    kind = (kind or "ANY").upper()
    if kind.endswith("[]"):
        return f"[{argument(kind[:-2], text)}]"
    if any(k in kind for k in ("VARCHAR", "ANY", "JSON", "BLOB")) or kind in ("T", "K", "V"):
        return literal(text)
    if any(k in kind for k in ("INT", "UBIGINT", "HUGEINT")):
        return "1"
    if any(k in kind for k in ("DOUBLE", "FLOAT", "DECIMAL", "REAL")):
        return "1.0"
    if "BOOL" in kind:
        return "true"
    if kind == "DATE":
        return "DATE '2026-01-01'"
    if "TIMESTAMP" in kind:
        return "TIMESTAMP '2026-01-01'"
    if "INTERVAL" in kind:
        return "INTERVAL 1 DAY"
    return "NULL"


def calls(con: duckdb.DuckDBPyConnection) -> list[tuple[str, str]]:
    serialized = con.execute("SELECT json_serialize_sql($s)", {"s": STATEMENT}).fetchall()[0][0]
    rows = con.execute(
        "SELECT DISTINCT function_name, function_type, parameter_types FROM duckdb_functions() "
        "WHERE function_type NOT IN ('pragma', 'window') AND function_name NOT LIKE '%\\_\\_%' ESCAPE '\\'"
    ).fetchall()
    found = []
    for name, kind, types in rows:
        for text in (STATEMENT, serialized, VIEW):
            args = ", ".join(argument(t, text) for t in (types or []))
            quoted = '"' + name.replace('"', '""') + '"'
            sql = f"SELECT * FROM {quoted}({args})" if kind in ("table", "table_macro") else \
                f"SELECT {quoted}({args})"
            found.append((name, sql))
    return found


def main() -> None:
    con = duckdb.connect(config={"enable_external_access": False, "autoload_known_extensions": False})
    con.execute(f"CREATE VIEW {VIEW} AS {STATEMENT}")
    con.execute("CREATE TABLE t AS SELECT 1 AS x")
    fired: dict[str, str] = {}
    probed = set()
    for name, sql in calls(con):
        probed.add(name)
        timer = threading.Timer(2.0, con.interrupt)
        timer.start()
        try:
            con.execute(sql).fetchall()
        except duckdb.Error as exc:
            if CANARY in str(exc):
                fired.setdefault(name.lower(), sql)
        finally:
            timer.cancel()
    json.dump({"probed": sorted(probed), "fired": fired}, sys.stdout)


if __name__ == "__main__":
    main()
