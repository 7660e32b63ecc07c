"""The dashboard's Pilot page through Streamlit's AppTest, on the simulated harmful pilot."""

from __future__ import annotations

from pathlib import Path

import pytest
from streamlit.testing.v1 import AppTest

APP = str(Path(__file__).resolve().parents[2] / "dashboards" / "app.py")
PILOT = """
[pilot.pilots.trial]
cluster = "pilot"
pools = ["p1", "p2", "p3", "p4"]
control = ["c1", "c2", "c3", "c4"]
start = "2026-01-19T00:00:00Z"
what = "preemption on"
"""


def test_pilot_page_shows_the_verdict_figures_and_candidates(
    harmful_warehouse: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    config = tmp_path / "preemptlens.toml"
    config.write_text(PILOT)
    monkeypatch.setenv("PREEMPTLENS_CONFIG", str(config))
    monkeypatch.setenv("PREEMPTLENS_WAREHOUSE__PATH", str(harmful_warehouse))
    at = AppTest.from_file(APP, default_timeout=120)
    at.run()
    assert not at.exception, at.exception
    at.switch_page("app_pages/pilot.py").run()
    assert not at.exception, at.exception
    assert not at.error
    # Besides the verdict, only the staleness warning every page shows for this old warehouse.
    (verdict,) = [w.value for w in at.warning if not w.value.startswith("The newest record is from ")]
    assert verdict.startswith("**Verdict: roll back**")
    assert "costs clearly exceed gains" in "\n".join(m.value for m in at.markdown)
    figures, candidates = (d.value.set_index(d.value.columns[0]) for d in at.dataframe)  # pandas frames
    waits = figures.loc["critical+high queue wait, median"]
    assert waits["n"].count("/") == 3 and waits["n"].endswith(" runs")
    # A figure with no data reads "unknown (the missing input)", never a zero.
    busy = figures.loc["busy GPU-hours per capacity GPU-hour (allocated, not idle-hoarded)", "did"]
    assert busy.startswith("unknown (") and len(busy) > len("unknown ()")
    # Victims never checkpoint in this cluster: no pool and tier is recoverable, so none is a candidate.
    assert len(candidates) > 0 and not candidates["recoverable"].any()
