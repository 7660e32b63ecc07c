"""The dashboard's SQL page refuses the functions that run SQL they are given (the guard of
preemptlens.readonly, tests/people/test_sql_functions.py), typed into the page in headless Chromium."""

from __future__ import annotations

import json
import time
from pathlib import Path

import duckdb
from browser import Chromium, Dashboard

SERIALIZED = duckdb.connect().execute(
    "SELECT json_serialize_sql('SELECT count(*) AS n FROM jobs')").fetchall()[0][0]
QUERIES = [
    f"SELECT * FROM json_execute_serialized_sql('{SERIALIZED}')",
    "SELECT * FROM query('SELECT 1 AS smuggled')",
    "SELECT * FROM histogram_values('jobs', tier)",
]


def js(browser: Chromium, expression: str) -> object:
    return browser.call("Runtime.evaluate", {"expression": expression, "returnByValue": True})["result"].get("value")


def run_query(browser: Chromium, sql: str) -> str:
    """Type `sql` into the query box as a reader does, press Run, and return the page's text once it answered."""
    # As a reader types: focus the box, select all (Ctrl+A), type over it, leave it (Tab), which applies it.
    js(browser, "document.querySelector('textarea').focus()")
    for kind in ("keyDown", "keyUp"):
        browser.call("Input.dispatchKeyEvent", {"type": kind, "modifiers": 2, "key": "a", "code": "KeyA",
                                                "windowsVirtualKeyCode": 65})
    browser.call("Input.insertText", {"text": sql})
    for kind in ("keyDown", "keyUp"):
        browser.call("Input.dispatchKeyEvent", {"type": kind, "key": "Tab", "code": "Tab", "windowsVirtualKeyCode": 9})
    time.sleep(1.5)
    js(browser, "Array.from(document.querySelectorAll('button')).find(b => b.innerText.trim() === 'Run').click()")
    time.sleep(1.5)
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline:
        text = str(js(browser, "document.querySelector('[data-testid=\"stMain\"]').innerText"))
        state = browser.state()
        shown = str(js(browser, "document.querySelector('textarea').value"))
        if not state.running and shown == sql and ("not allowed" in text or " row" in text):
            return text
        time.sleep(0.2)
    raise AssertionError(f"no answer to {sql!r}: running {state.running}, {text[-400:]!r}")


def test_the_sql_page_refuses_sql_smuggled_in_a_function(cluster_warehouse: Path, tmp_path: Path) -> None:
    with Dashboard(cluster_warehouse, tmp_path / "streamlit.log") as dashboard, Chromium() as browser:
        browser.navigate(f"{dashboard.url}/sql")
        browser.wait_rendered(timeout_s=120, title="SQL")
        for sql in QUERIES:
            text = run_query(browser, sql)
            name = sql.split("FROM ", 1)[1].split("(", 1)[0]
            assert f"the function {name}() is not allowed in ad-hoc SQL" in text, (sql, text[-500:])
            assert "smuggled" not in text.split("Run", 1)[-1]
        answered = run_query(browser, "SELECT count(*) AS n FROM jobs")
        assert "not allowed" not in answered.split("Run", 1)[-1], json.dumps(answered[-300:])
