"""Every dashboard page through Streamlit's AppTest, on the hand-made cluster whose figures are known."""

from __future__ import annotations

import json
import re
import shutil
from datetime import UTC, date, datetime, timedelta
from pathlib import Path

import fixture_cluster as fc
import pandas as pd
import polars as pl
import pytest
from streamlit.testing.v1 import AppTest

from preemptlens.reading import words
from preemptlens.warehouse import Warehouse

APP = str(Path(__file__).resolve().parents[2] / "dashboards" / "app.py")
W48 = (date(2026, 11, 23), date(2026, 11, 29))
CUSTOM = "Custom dates"


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


def ledger_truth(warehouse: Path) -> dict[str, float]:
    with Warehouse(warehouse, read_only=True) as wh:
        return wh.query(
            "SELECT sum(gain_gpu_s) / 3600 AS gain, sum(requeue_gpu_s) / 3600 AS waiting FROM preemption_ledger"
        ).row(0, named=True)


def test_overview_opens_on_the_answer(app: AppTest, cluster_warehouse: Path) -> None:
    """The verdict, the counterfactual headline, the net and the first fix come first, then the ledger's totals in
    both currencies, all above the first chart."""
    order = [node.type for node in app.main]
    first_chart = order.index("plotly_chart")
    verdict = app.warning[0].value
    assert verdict.startswith("c1: preemption should not be the main tool")
    assert order.index("warning") < order.index("markdown") < order.index("metric") < first_chart
    text = markdown(app)
    headline, net, fix = (text.index(s) for s in ("Against plain queueing, preemption saved",
                                                  "Net at the configured tier weights", "**Fix first:**"))
    assert headline < net < fix < text.index("Are GPUs scarce")
    # the fix the verdict names first, as the verdict line names it; the sentence ends with the best applicable
    # alternative (a setting or preemptlens's action, not the least-cost victim order) and its replayed net
    named, best = verdict.split("fix first: ")[1].split("; best applicable alternative: ")
    assert named in text[fix:].split("\n")[0]
    assert "replayed net " in best and "against plain queueing" in best and "least live cost" not in best
    truth = ledger_truth(cluster_warehouse)
    shown = metrics(app)
    assert shown["Wait saved, GPU-h"] == f"{truth['gain']:.1f}"
    assert shown["Victims' wait, GPU-h"] == f"{fc.WAITING_GPU_HOURS_TOTAL:.1f}"
    assert shown["Net wait saved, GPU-h"] == f"{truth['gain'] - fc.WAITING_GPU_HOURS_TOTAL:+.1f}"
    # no warm-ups in the fixture: the work thrown away is the lost progress; the waiting is kept apart
    assert shown["Work thrown away, GPU-h"] == f"{fc.LOST_GPU_HOURS_TOTAL:.1f}"
    assert order.count("metric") >= 10
    assert any("Set a price per GPU-hour" in c.value for c in app.caption)
    # The replay's answer and the ledger's figures are each labelled as what they are, one sentence says why they
    # differ, and the replay's work thrown away has its own label (one per definition).
    assert text.index("**Replayed:**") < text.index("**Recorded in this window**")
    assert any(c.value == words.RECORDED_VS_REPLAYED for c in app.caption)
    assert f"({words.THROWN_AWAY_DRAINED})" in text
    # the headline's waiting per tier, read against the window's capacity
    assert "whose queue time changed, by" in text and "The window's capacity: " in text


def team_table(at: AppTest) -> pd.DataFrame:
    """The per-team gain, cost and net table (the answer's per-tier table comes before it)."""
    (found,) = [d.value for d in at.dataframe if "net_value" in d.value.columns and "team" in d.value.columns]
    return found.set_index("team")


def test_overview_headline_net_benefit_and_scorecard(app: AppTest) -> None:
    shown = metrics(app)
    assert shown["Preemptions"] == str(fc.PREEMPTIONS_TOTAL)
    assert shown["Hoarded, GPU-h"] == f"{fc.HOARDED_GPU_HOURS:.1f}"
    assert shown["Avoidable preemptions"] == str(fc.AVOIDABLE_W48)
    assert shown["Median requeue delay"] == "60 min"

    (net,) = chart_specs(app)
    gain, cost, line = net["data"]
    # Tier weights 4 (critical) .. 0.5 (low): W48's gains are 2 x 8 GPU-h by critical preemptors (batch-48 gained
    # nothing); its costs are finetune-48 (normal, 20 lost + 12 waiting), train-48b (low, 8 + 8), train-w2 (low, 4 + 8).
    assert gain["y"][-1] == pytest.approx(4 * 16)
    assert cost["y"][-1] == pytest.approx(-(1 * 32 + 0.5 * 16 + 0.5 * 12))
    assert line["y"][-1] == pytest.approx(64 - 46)
    # GPU-hours from 100 on without decimals
    assert shown["Weighted net, GPU-h"] == f"{sum(line['y']):+,.0f}" and abs(sum(line["y"])) >= 100

    # Per team: nlp was preempted once (finetune-48: 20 lost + 12 waiting), infer preempted and gained; a total row.
    teams = team_table(app)
    assert teams.loc["nlp", "preemptions"] == 1 and teams.loc["nlp", "wasted_gpu_hours"] == pytest.approx(20.0)
    assert teams.loc["Total", "preemptions"] == fc.PREEMPTIONS_TOTAL
    assert teams.loc["Total", "net_value"] == pytest.approx(sum(line["y"]), abs=0.1)

    (verdict,) = [w for w in app.warning if w.value.startswith("c1: ")]
    assert "c1: preemption should not be the main tool" in verdict.value
    scorecard = markdown(app)
    assert "**c1:** preemption should not be the main tool" in scorecard
    for question in ("Are GPUs scarce for", "Are priorities clear", "Do victims recover", "Are the rules visibl"):
        assert f"**{question}" in scorecard
    # no raw column name; preemptlens's actions are named as their settings' sections are, for the reader to set
    assert "_" not in re.sub(r"\b(kai_protect|slurm_protect|kueue_boost)\b", "", scorecard.split("Readiness")[-1])


def test_a_price_per_gpu_hour_gives_money(cluster_warehouse: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("PREEMPTLENS_WAREHOUSE__PATH", str(cluster_warehouse))
    monkeypatch.delenv("PREEMPTLENS_CONFIG", raising=False)
    monkeypatch.setenv("PREEMPTLENS_DASHBOARD__GPU_HOUR_PRICE", "2.5")
    monkeypatch.setenv("PREEMPTLENS_DASHBOARD__CURRENCY", "EUR")
    at = open_app()
    thrown = next(m for m in at.metric if m.label == "Work thrown away, GPU-h")
    assert thrown.value == f"{fc.LOST_GPU_HOURS_TOTAL:.1f}"
    assert thrown.proto.delta == f"{fc.LOST_GPU_HOURS_TOTAL * 2.5:,.0f} EUR"
    teams = team_table(at)
    assert teams.loc["Total", "net_money"] == pytest.approx(round(teams.loc["Total", "net_value"] * 2.5))


def test_relative_ranges_end_at_the_newest_data(cluster_warehouse: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("PREEMPTLENS_WAREHOUSE__PATH", str(cluster_warehouse))
    monkeypatch.delenv("PREEMPTLENS_CONFIG", raising=False)
    # The fixture's data ends on Sunday 2026-11-29 (W48): its last 7 days are W48, whatever the wall clock says.
    at = open_app(range="Last 7 days")
    assert metrics(at)["Preemptions"] == str(fc.PREEMPTIONS_W48)
    assert at.caption[0].value.startswith("2026-11-23 to 2026-11-29 UTC")
    # A range longer than the data starts where the data does.
    assert open_app(range="Last 90 days").caption[0].value.startswith("2026-11-09 to 2026-11-29 UTC")
    # and the sidebar says how old the newest record is
    assert any("The newest record is from 2026-11-29" in w.value for w in at.sidebar.warning)
    # auto-refresh watches for a new snapshot in a fragment of its own; the page runs as before
    assert metrics(open_app(range="Last 7 days", refresh="Every minute"))["Preemptions"] == str(fc.PREEMPTIONS_W48)


def test_preemptions_ledger_timeline_and_victim_story(app: AppTest) -> None:
    at = switch(app, "preemptions")
    assert metrics(at)["Preemptions"] == str(fc.PREEMPTIONS_TOTAL)
    ledger = at.dataframe[0].value
    assert len(ledger) == fc.PREEMPTIONS_TOTAL
    assert set(ledger["victim_job_id"]) == {"train-w0", "train-w1", "train-w2", "train-48b", fc.WORST_W48}
    timeline = chart_specs(at)[0]
    # one marker per preemption; the size legend's traces have no points
    assert sum(len(t["x"]) for t in timeline["data"] if t.get("legend") != "legend2") == fc.PREEMPTIONS_TOTAL
    assert [t["name"] for t in timeline["data"] if t.get("legend") == "legend2"] == ["20 GPU-h", "5 GPU-h", "1 GPU-h"]

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
    assert ("since its last checkpoint at 2026-11-25 10:00 UTC (checkpoint: from the job's own checkpoints, "
            "measured from") in story
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
    assert metrics(at)["Hoarded, GPU-h"] == f"{fc.HOARDED_GPU_HOURS:.1f}"
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
        # a change the replay found moves nothing: its wait is 0 s both ways, no victim and nothing saved
        wh.con.execute(
            "INSERT INTO suggestions VALUES ('c1', TIMESTAMPTZ '2026-11-09 00:00+00', "
            "TIMESTAMPTZ '2026-11-30 00:00+00', "
            "2, 'grace_time', '', 'Longer grace', 'GraceTime', '0', '60', 'e2', 'f2', "
            "0.0, 0.0, 0.0, 0.0, '{}', true, now())",
        )
    monkeypatch.setenv("PREEMPTLENS_WAREHOUSE__PATH", str(path))
    at = switch(open_app(), "tuning")
    expander, unmoved = at.expander
    assert expander.label == "1. Protect young runs (c1)"
    # no large figure says "no change" or "none": a figure the same under either setting is not shown
    assert len(expander.metric) == 3 and len(unmoved.metric) == 0 and "**Expected effect:** f2" in markdown(at)
    shown = {m.label: m for m in at.metric}
    assert shown["Lost progress saved"].value == "12.5 GPU-h"
    # 30 s more wait for the high tiers is a rise, shown red (inverse colours); one victim a week fewer is a fall.
    wait = shown["Critical + high median wait"]
    assert wait.value == "30 s longer" and wait.proto.delta == "+30 s"
    assert (wait.proto.direction, wait.proto.color) == (1, 0)  # up, red
    victims = shown["Victims per week"]
    assert victims.value == "1.0 fewer" and victims.proto.delta == "-1.0"
    assert (victims.proto.direction, victims.proto.color) == (0, 1)  # down, green
    assert "**Change:** PreemptExemptTime: **0** → **00:10:00**" in markdown(at)
    assert [c.value for c in at.code] == ["PreemptExemptTime=00:10:00"]
    assert "**Evidence:** e1" in markdown(at)


def test_sql_page_runs_read_only_queries(app: AppTest, cluster_warehouse: Path) -> None:
    at = switch(app, "sql")
    catalog = at.dataframe[0].value
    ledger_row = catalog[catalog["name"] == "preemption_ledger"].iloc[0]
    assert ledger_row["kind"] == "view"
    # a definition is read whole under the grid, not cut in a cell
    at.selectbox(key="definition").set_value("preemption_ledger").run()
    assert any(c.value.startswith("One row per preemption") for c in at.caption)

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
    # the shortest deadline sql.timeout_s allows (5 s: a loaded machine's first query can take seconds)
    monkeypatch.setenv("PREEMPTLENS_SQL__TIMEOUT_S", "5")
    at = switch(open_app(), "sql")
    # One string past any memory limit, one scan past the deadline, one statement DuckDB's enum does not know.
    for runaway in ("SELECT length(repeat('x', 2500000000)) AS n",
                    "SELECT count(*) FROM range(1000000000000) a, range(1000) b", "UPDATE EXTENSIONS"):
        at.text_area[0].set_value(runaway).run()
        # the page waits for the query's own deadline: the test waits longer than that
        at.button(key="run").click().run(timeout=120)
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
    assert at.error and all("net_benefit" in e.value for e in at.error)
    # Where the chart would be, below the headline numbers and above the scorecard, which still shows; the
    # tier-weighted net is unknown.
    order = [node.type for node in at.main]
    assert order.index("error") < order.index("header") and not at.get("plotly_chart")
    assert metrics(at)["Preemptions"] == str(fc.PREEMPTIONS_TOTAL) and metrics(at)["Weighted net, GPU-h"] == "unknown"
    assert "Readiness scorecard" in [h.value for h in at.header]


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


def test_operations_says_how_fresh_each_source_is(
    cluster_warehouse: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Per source: its newest record and its last load. The fixture's rows loaded now but end in November 2026
    (lagging, once that is more than dashboard.stale_after_s ago); a Slurm load that started three hours ago and
    never finished is failing; Prometheus, last loaded two days ago with samples as old, is stale."""
    path = tmp_path / "w.duckdb"
    shutil.copyfile(cluster_warehouse, path)
    now = datetime.now(UTC)
    with Warehouse(path) as wh:
        wh.con.execute("INSERT INTO _loads (load_id, source, started_at, finished_at) VALUES "
                       "('l1', 'slurm', $a, NULL), ('l2', 'prometheus', $b, $b)",
                       {"a": now - timedelta(hours=3), "b": now - timedelta(days=2)})
        wh.con.execute("UPDATE gpu_samples SET source = 'prometheus', time = $t "
                       "WHERE rowid = (SELECT min(rowid) FROM gpu_samples)", {"t": now - timedelta(days=2, hours=1)})
        truth = wh.query(
            "SELECT max(t) AS t FROM (SELECT max(greatest(submit_time, start_time, end_time)) AS t FROM job_runs "
            "WHERE source = 'fixture' UNION ALL SELECT max(time) FROM gpu_samples WHERE source = 'fixture' "
            "UNION ALL SELECT max(time) FROM checkpoints UNION ALL SELECT max(submit_time) FROM jobs)")["t"][0]
        wh.mark_changed()
    monkeypatch.setenv("PREEMPTLENS_WAREHOUSE__PATH", str(path))
    monkeypatch.delenv("PREEMPTLENS_CONFIG", raising=False)
    at = switch(open_app(), "operations")
    fresh = at.dataframe[0].value.set_index("name")
    # times read in UTC to the minute ("2026-11-29 20:10"), a missing one a dash
    newest = datetime.fromisoformat(str(fresh.loc["fixture", "newest_record"])).replace(tzinfo=UTC)
    assert newest == truth.replace(second=0, microsecond=0) and newest.date().isoformat() == "2026-11-29"
    lagging = (now - newest).total_seconds() > 3600
    assert fresh.loc["fixture", "state"] == ("lagging" if lagging else "fresh")
    assert fresh.loc["Slurm (sacct and slurmctld log)", "state"] == "failing"
    assert "did not finish" in fresh.loc["Slurm (sacct and slurmctld log)", "why"]
    assert fresh.loc["Prometheus (GPU samples)", "state"] == "stale"
    assert fresh.loc["Prometheus (GPU samples)", "load_age_s"] == "2.0 days"
    assert "failing" in at.warning[0].value and "stale" in at.warning[0].value
