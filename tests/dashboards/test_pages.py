"""Every dashboard page through Streamlit's AppTest, on the hand-made cluster whose figures are known."""

from __future__ import annotations

import json
import shutil
from datetime import date
from pathlib import Path

import fixture_cluster as fc
import polars as pl
import pytest
from streamlit.testing.v1 import AppTest

from preemptlens.warehouse import Warehouse

APP = str(Path(__file__).resolve().parents[2] / "dashboards" / "app.py")
W48 = (date(2026, 11, 23), date(2026, 11, 29))


def open_app(**filters: object) -> AppTest:
    """The app's first run with the sidebar filters set. Filters are given before that run:
    under st.navigation, AppTest (Streamlit 1.67) drops the entry script's sidebar on reruns."""
    at = AppTest.from_file(APP, default_timeout=120)
    for key, value in filters.items():
        at.session_state[key] = value
    at.run()
    assert not at.exception, at.exception
    return at


@pytest.fixture
def app(cluster_warehouse: Path, monkeypatch: pytest.MonkeyPatch) -> AppTest:
    monkeypatch.setenv("PREEMPTLENS_WAREHOUSE__PATH", str(cluster_warehouse))
    monkeypatch.delenv("PREEMPTLENS_CONFIG", raising=False)
    return open_app()


def metrics(at: AppTest) -> dict[str, str]:
    return {m.label: m.value for m in at.metric}


# Streamlit's AppTest does not expose the key of a dataframe, so tables are found by their order on the page.


def chart_specs(at: AppTest) -> list[dict]:
    return [json.loads(c.proto.spec) for c in at.get("plotly_chart")]


def markdown(at: AppTest) -> str:
    return "\n".join(m.value for m in at.markdown)


def switch(at: AppTest, page: str) -> AppTest:
    at.switch_page(f"app_pages/{page}.py").run()
    assert not at.exception, at.exception
    return at


def test_overview_headline_net_benefit_and_scorecard(app: AppTest) -> None:
    shown = metrics(app)
    assert shown["Preemptions"] == str(fc.PREEMPTIONS_TOTAL)
    # no warm-ups in the fixture: the work thrown away is the lost progress; the waiting is kept apart
    assert shown["Work thrown away GPU-hours"] == f"{fc.LOST_GPU_HOURS_TOTAL:.1f}"
    assert shown["Victim waiting GPU-hours"] == f"{fc.WAITING_GPU_HOURS_TOTAL:.1f}"
    assert shown["Hoarded GPU-hours"] == f"{fc.HOARDED_GPU_HOURS:.1f}"
    assert shown["Avoidable preemptions"] == str(fc.AVOIDABLE_W48)
    assert shown["Median requeue delay"] == "60 min"

    (net,) = chart_specs(app)
    gain, cost, line = net["data"]
    # Tier weights 4 (critical) .. 0.5 (low): W48's gains are 2 x 8 GPU-h by critical preemptors (batch-48 gained
    # nothing); its costs are finetune-48 (normal, 20 lost + 12 waiting), train-48b (low, 8 + 8), train-w2 (low, 4 + 8).
    assert gain["y"][-1] == pytest.approx(4 * 16)
    assert cost["y"][-1] == pytest.approx(-(1 * 32 + 0.5 * 16 + 0.5 * 12))
    assert line["y"][-1] == pytest.approx(64 - 46)

    (verdict,) = app.warning
    assert "c1: preemption should not be the main tool" in verdict.value
    scorecard = next(d.value for d in app.dataframe if "question" in d.value.columns)
    assert list(scorecard["question"].str[:20]) == [
        "Are GPUs scarce for ", "Are priorities clear", "Do victims recover c", "Are the rules visibl"
    ]


def test_filters_narrow_every_figure(app: AppTest) -> None:
    assert app.sidebar.date_input(key="window").value == (date(2026, 11, 9), date(2026, 11, 29))
    assert metrics(open_app(window=W48))["Preemptions"] == str(fc.PREEMPTIONS_W48)
    assert metrics(open_app(window=(date(2026, 11, 9), date(2026, 11, 15))))["Preemptions"] == "1"
    # nlp is the victim of finetune-48 only, and hoards on the same day
    shown = metrics(open_app(window=W48, teams=["nlp"]))
    assert shown["Preemptions"] == "1"
    assert shown["Work thrown away GPU-hours"] == f"{fc.WORST_W48_LOST_GPU_HOURS:.1f}"
    assert shown["Hoarded GPU-hours"] == f"{fc.HOARDED_GPU_HOURS:.1f}"
    shown = metrics(open_app(pools=["h100"]))
    assert shown["Preemptions"] == "1"
    assert shown["Hoarded GPU-hours"] == "0.0"
    # the tier filter matches either side: critical preemptors took three runs in a100
    assert metrics(open_app(tiers=["critical"]))["Preemptions"] == "4"


def test_preemptions_ledger_timeline_and_victim_story(app: AppTest) -> None:
    at = switch(app, "preemptions")
    assert metrics(at)["Preemptions"] == str(fc.PREEMPTIONS_TOTAL)
    ledger = at.dataframe[0].value
    assert len(ledger) == fc.PREEMPTIONS_TOTAL
    assert set(ledger["victim_job_id"]) == {"train-w0", "train-w1", "train-w2", "train-48b", fc.WORST_W48}
    timeline = chart_specs(at)[0]
    assert sum(len(trace["x"]) for trace in timeline["data"]) == fc.PREEMPTIONS_TOTAL

    # the victim with the most work thrown away comes first in the drill-down
    assert at.selectbox(key="victim").value.startswith(fc.WORST_W48)
    story = markdown(at)
    assert "preempted at 2026-11-25 14:00 UTC** in h100 by **batch-48**" in story
    assert "after running 5.0 h" in story
    assert "20.0 GPU-h = 4 GPUs × 5.0 h, the whole run since 2026-11-25 09:00 UTC (assumed" in story
    assert "as run 2 at 2026-11-25 17:00 UTC, 3.0 h after the preemption" in story
    assert "**Live cost at the preemption:** unknown (no live cost computed for this run before the preemption)" in (
        story)
    runs = at.dataframe[1].value
    assert list(runs["state"]) == ["preempted", "completed"]

    choice = next(o for o in at.selectbox(key="victim").options if o.startswith(fc.AVOIDABLE_VICTIM))
    at.selectbox(key="victim").set_value(choice).run()
    story = markdown(at)
    assert "by **serve-48b** (team infer, tier critical, 8 GPUs)" in story
    assert "since its last checkpoint at 2026-11-25 10:00 UTC (measured" in story
    assert "avoidable: 8 idle hoarded GPUs were in the pool" in story
    assert (f"**Live cost at the preemption:** {fc.AVOIDABLE_LIVE_COST_GPU_HOURS:.1f} GPU-h" in story
            and "computed 2026-11-25 10:30 UTC" in story)
    # the other jobs running in a100 then had 2 GPUs, fewer than its 8
    assert "No cheaper preemptible job of at least its GPUs was running in its pool." in story
    ledger = at.dataframe[0].value.set_index("victim_job_id")
    assert ledger.loc[fc.AVOIDABLE_VICTIM, "victim_live_cost_gpu_hours"] == fc.AVOIDABLE_LIVE_COST_GPU_HOURS
    assert not ledger.loc[fc.AVOIDABLE_VICTIM, "cheaper_victim_running"]


def test_hoarding_top_holders_idle_and_avoidable(app: AppTest) -> None:
    at = switch(app, "hoarding")
    assert metrics(at)["Hoarded GPU-hours"] == f"{fc.HOARDED_GPU_HOURS:.1f}"
    holders = at.dataframe[0].value
    assert list(holders["holder"]) == [fc.HOARDER_TEAM]
    assert holders["idle_gpu_hours"][0] == pytest.approx(fc.HOARDED_GPU_HOURS)
    at.radio(key="holder").set_value("job").run()
    assert list(at.dataframe[0].value["holder"]) == [fc.HOARDER_JOB]
    idle = chart_specs(at)[1]
    hoarded = next(t for t in idle["data"] if t["name"].startswith("hoarded"))
    assert sum(hoarded["y"]) == pytest.approx(fc.HOARDED_GPU_HOURS)
    avoidable = at.dataframe[1].value
    assert sorted(avoidable["victim_job_id"]) == sorted([fc.AVOIDABLE_VICTIM, "train-w2"])
    assert set(avoidable["idle_gpus_in_pool"]) == {8}


def test_scope_creep_shows_the_growing_team(app: AppTest) -> None:
    at = switch(app, "scope_creep")
    tiers, teams, slopes = chart_specs(at)
    infer = next(t for t in teams["data"] if t["name"] == fc.SCOPE_TEAM)
    assert infer["y"] == sorted(infer["y"]) and infer["y"][-1] == pytest.approx(1.0)
    assert {t["name"] for t in tiers["data"]} == {"critical", "high", "normal", "low"}
    for week in range(3):
        assert sum(t["y"][week] for t in tiers["data"]) == pytest.approx(1.0)
    table = at.dataframe[0].value
    assert table.iloc[0]["team"] == fc.SCOPE_TEAM and table.iloc[0]["pool"] == "h100"
    assert slopes["data"][0]["y"][0] == "h100/infer"
    assert metrics(at)["Fastest-growing team"] == "h100/infer"


def test_tuning_without_and_with_suggestions(app: AppTest, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    at = switch(app, "tuning")
    assert "No suggestions" in at.info[0].value

    path = fc.build(tmp_path / "w.duckdb")
    with Warehouse(path) as wh:
        wh.con.execute(
            "INSERT INTO suggestions VALUES ('c1', TIMESTAMPTZ '2026-11-09 00:00+00', "
            "TIMESTAMPTZ '2026-11-30 00:00+00', "
            "1, 'min_run_time', '', 'Protect young runs', 'PreemptExemptTime', '0', '00:10:00', 'e1', 'f1', "
            "-12.5, 30.0, -1.0, 12.5, $snip, true, now())",
            {"snip": json.dumps({"slurm": "PreemptExemptTime=00:10:00"})},
        )
    monkeypatch.setenv("PREEMPTLENS_WAREHOUSE__PATH", str(path))
    at = switch(open_app(), "tuning")
    (expander,) = at.expander
    assert expander.label == "1. Protect young runs (c1)"
    assert {m.label: m.value for m in at.metric}["Expected saving"] == "12.5 GPU-h"
    assert [c.value for c in at.code] == ["PreemptExemptTime=00:10:00"]
    assert "**Evidence:** e1" in markdown(at)


def test_sql_page_runs_read_only_queries(app: AppTest, cluster_warehouse: Path) -> None:
    at = switch(app, "sql")
    catalog = at.dataframe[0].value
    ledger_row = catalog[catalog["name"] == "preemption_ledger"].iloc[0]
    assert ledger_row["kind"] == "view" and ledger_row["definition"].startswith("One row per preemption")

    at.text_area[0].set_value("SELECT victim_job_id FROM preemption_ledger ORDER BY victim_job_id").run()
    at.button(key="run").click().run()
    assert list(at.dataframe[1].value["victim_job_id"]) == sorted(
        ["train-w0", "train-w1", "train-w2", "train-48b", fc.WORST_W48]
    )
    assert at.get("download_button")

    at.text_area[0].set_value("DELETE FROM jobs").run()
    at.button(key="run").click().run()
    assert "only SELECT" in at.error[0].value
    with Warehouse(cluster_warehouse, read_only=True) as wh:
        assert wh.query("SELECT count(*) AS n FROM jobs")["n"][0] > 0


def test_sql_page_survives_a_runaway_query(cluster_warehouse: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("PREEMPTLENS_WAREHOUSE__PATH", str(cluster_warehouse))
    monkeypatch.delenv("PREEMPTLENS_CONFIG", raising=False)
    monkeypatch.setenv("PREEMPTLENS_SQL__TIMEOUT_S", "2")
    at = switch(open_app(), "sql")
    # One string past any memory limit, one scan past the deadline, one statement DuckDB's enum does not know.
    for runaway in ("SELECT length(repeat('x', 2500000000)) AS n",
                    "SELECT count(*) FROM range(1000000000000) a, range(1000) b", "UPDATE EXTENSIONS"):
        at.text_area[0].set_value(runaway).run()
        at.button(key="run").click().run()
        assert not at.exception, at.exception
        assert at.error and "\n" not in at.error[0].value.split("\n  hint:")[0]
    at.text_area[0].set_value("SELECT count(*) AS n FROM jobs").run()
    at.button(key="run").click().run()
    assert not at.error and at.dataframe[1].value["n"][0] > 0


def test_a_chart_whose_query_fails_says_so_in_its_place(
    cluster_warehouse: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    broken = tmp_path / "broken.duckdb"
    shutil.copyfile(cluster_warehouse, broken)
    with Warehouse(broken) as wh:  # closing publishes the snapshot the dashboard reads
        wh.con.execute("DROP TABLE net_benefit")
    monkeypatch.delenv("PREEMPTLENS_CONFIG", raising=False)
    monkeypatch.setenv("PREEMPTLENS_WAREHOUSE__PATH", str(broken))
    at = open_app()
    (error,) = at.error
    assert "net_benefit" in error.value
    # Where the chart would be, between the headline numbers and the scorecard, which still shows.
    order = [node.type for node in at.main]
    assert order.index("error") < order.index("header") and not at.get("plotly_chart")
    assert metrics(at)["Preemptions"] == str(fc.PREEMPTIONS_TOTAL) and len(at.dataframe) >= 1


def test_missing_or_unanalysed_warehouse_is_explained(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("PREEMPTLENS_CONFIG", raising=False)
    monkeypatch.setenv("PREEMPTLENS_WAREHOUSE__PATH", str(tmp_path / "nothing.duckdb"))
    at = open_app()
    assert "does not exist" in at.error[0].value and "preemptlens demo" in at.error[0].value

    fresh = tmp_path / "fresh.duckdb"
    with Warehouse(fresh) as wh:
        wh.load("pools", pl.DataFrame({"cluster": ["c1"], "pool": ["a"], "valid_from": ["2026-11-01"], "gpus": [8]}),
                "test")
    monkeypatch.setenv("PREEMPTLENS_WAREHOUSE__PATH", str(fresh))
    at = open_app()
    assert "run `preemptlens analyze`" in at.error[0].value
