"""Generated from the registry: every view runs, has its header and is documented."""

from __future__ import annotations

import re
from pathlib import Path

import pytest
from analytics_scenario import Scenario

from preemptlens.analytics.views import View, registry

FIGURES = Path(__file__).resolve().parents[2] / "docs" / "figures.md"
VIEWS = registry()


def test_views_are_ordered_after_what_they_read() -> None:
    seen: set[str] = set()
    for view in VIEWS:
        body = re.sub(r"--[^\n]*", "", view.sql)
        for other in VIEWS:
            if other.name != view.name and re.search(rf"\b{other.name}\b", body):
                assert other.name in seen, f"{view.name} reads {other.name} before it exists"
        seen.add(view.name)


@pytest.mark.parametrize("view", VIEWS, ids=[v.name for v in VIEWS])
def test_view_has_header_and_docs(view: View) -> None:
    assert len(view.header.split()) >= 8, f"{view.name}: the header should define the figure"
    assert f"`{view.name}`" in FIGURES.read_text(), f"{view.name} is not described in docs/figures.md"
    assert re.search(r"select \* from final\s*$", view.sql), f"{view.name}: end with `select * from final`"


def test_every_view_runs_on_an_empty_and_a_small_warehouse(sc: Scenario) -> None:
    sc.analyze()
    for view in VIEWS:
        assert sc.wh.query(f"SELECT count(*) AS n FROM {view.name}")["n"].item() == 0
    sc.pool("p", 8)
    sc.job("a", "high", 8, "p", 0)
    sc.run("a", 1, 8, "p", 10, 3600, "completed")
    sc.analyze()
    for view in VIEWS:
        sc.wh.query(f"SELECT * FROM {view.name}")


def test_named_queries_of_the_replay_and_tuning_are_files_each_used_once() -> None:
    """sql/replay, sql/tuning and sql/live hold the SQL of analytics/whatif/replay.py (and policy_in_force.py, the
    policy the replay runs), tuning.py and livecost.py: each file has its one-sentence header and is read by
    name, and every name read has its file."""
    root = Path(__file__).resolve().parents[2]
    for folder, modules in (("replay", ("whatif/replay", "whatif/policy_in_force")), ("tuning", ("whatif/tuning",)),
                            ("live", ("livecost",))):
        code = "".join((root / "analytics" / f"{module}.py").read_text() for module in modules)
        used = re.findall(rf'query_sql\("{folder}", "(\w+)"\)', code)
        files = sorted(p.stem for p in (root / "sql" / folder).glob("*.sql"))
        assert sorted(used) == files, folder
        for name in files:
            first = (root / "sql" / folder / f"{name}.sql").read_text().splitlines()[0]
            assert first.startswith("-- ") and first.endswith("."), f"sql/{folder}/{name}.sql: no header"
