"""The real dashboard served by Streamlit on localhost, opened in headless Chromium: every page renders,
its charts draw, a screenshot is kept, and the numbers match the simulator's ground truth."""

from __future__ import annotations

import re
import time
from collections.abc import Iterator
from pathlib import Path

import duckdb
import pytest
from browser import Chromium, Dashboard

# path, title, charts on the page
PAGES = (
    ("", "Preemption overview", 1),
    ("preemptions", "Preemptions", 3),  # the timeline, the risk by run age, the victim's runs
    ("hoarding", "Idle hoarding", 2),
    ("scope_creep", "Priority scope creep", 3),
    ("tuning", "Tuning suggestions", 0),
    ("sql", "SQL", 0),
)


@pytest.fixture(scope="module")
def served(sim_warehouse: Path, tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[Dashboard, Chromium]]:
    log = tmp_path_factory.mktemp("streamlit") / "streamlit.log"
    with Dashboard(sim_warehouse, log) as dashboard, Chromium() as browser:
        yield dashboard, browser


def truth(warehouse: Path, sql: str) -> object:
    con = duckdb.connect(str(warehouse), read_only=True)
    try:
        return con.execute(sql).fetchall()[0][0]
    finally:
        con.close()


@pytest.mark.parametrize(("path", "title", "charts"), PAGES, ids=[p[0] or "overview" for p in PAGES])
def test_page_renders_with_charts(
    served: tuple[Dashboard, Chromium], screenshots: Path, path: str, title: str, charts: int
) -> None:
    dashboard, browser = served
    browser.navigate(f"{dashboard.url}/{path}")
    state, seconds = browser.wait_rendered(timeout_s=120)
    browser.screenshot(screenshots / f"dashboard-{path or 'overview'}.png")
    assert state.exceptions == 0 and not state.errors, state.errors
    assert state.rendered, f"{path or 'overview'} did not finish rendering in {seconds:.1f} s"
    assert state.title == title
    assert state.charts == charts and state.drawn == charts
    # every chart drew marks (traces), not just an empty frame
    assert all(m > 0 for m in state.marks), state.marks
    assert (screenshots / f"dashboard-{path or 'overview'}.png").stat().st_size > 30_000


def test_overview_counts_match_the_simulators_truth(served: tuple[Dashboard, Chromium], sim_warehouse: Path) -> None:
    dashboard, browser = served
    browser.navigate(dashboard.url)
    state, _ = browser.wait_rendered(timeout_s=120)
    preemptions = truth(sim_warehouse, "SELECT count(*) FROM sim_truth_preemptions")
    lost = truth(sim_warehouse, "SELECT sum(lost_gpu_s) / 3600 FROM sim_truth_preemptions")
    shown = dict(re.findall(r"(Preemptions)\s*\n+\s*([\d,.]+)", state.text))
    shown.update(re.findall(r"(lost progress) ([\d,.]+) GPU-h", state.text))
    assert int(shown["Preemptions"].replace(",", "")) == preemptions
    # GPU-hours from 100 on are shown without decimals
    assert float(shown["lost progress"].replace(",", "")) == pytest.approx(float(lost), abs=0.5)


def test_sidebar_switches_pages_without_reload(served: tuple[Dashboard, Chromium]) -> None:
    dashboard, browser = served
    browser.navigate(dashboard.url)
    browser.wait_rendered(timeout_s=120, title="Preemption overview")
    for label, title in (("Idle hoarding", "Idle hoarding"), ("Preemptions", "Preemptions"), ("SQL", "SQL")):
        browser.click_nav(label)
        state, seconds = browser.wait_rendered(timeout_s=60, title=title)
        assert state.rendered and state.title == title, f"{label}: {state.title} after {seconds:.1f} s"
        assert state.drawn == state.charts


def test_a_page_url_opened_first_after_start_runs_the_app(sim_warehouse: Path, tmp_path: Path) -> None:
    """A bookmark of a page, opened before anyone opened the entry page, gets the page with its filters
    (the first page a session runs goes through the entry script, not straight to the page file)."""
    with Dashboard(sim_warehouse, tmp_path / "streamlit.log") as dashboard, Chromium() as browser:
        began = time.monotonic()
        browser.navigate(f"{dashboard.url}/preemptions")
        state, first, done = browser.wait_page(began, timeout_s=120, title="Preemptions", charts=3)
    assert state.exceptions == 0 and not state.errors, state.errors
    assert first is not None and done is not None and state.rendered, f"not rendered: {state.title}"
    assert state.charts == 3 and state.drawn == 3
