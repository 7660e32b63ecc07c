"""Every number a view gives names its unit in the column (`_gpu_h`, `_s`, `_share`, ...), so that a reader of
`preemptlens sql` knows what 1.69e8 is; and the command writes it out, never in e-notation."""

from __future__ import annotations

import re
from pathlib import Path

import polars as pl
from analytics_scenario import Scenario, analysed

from preemptlens.commands.sql import format_table

VIEWS = Path(__file__).resolve().parents[2] / "sql" / "views"
UNIT = re.compile(
    r"(_s|_gpu_s|_gpu_h|_gpu_hours|_hours|_h|_per_h|_days|_gpus|_share|_share_first|_share_last|_share_slope"
    r"|_per_job|_per_week)$|(^|_)share_of_"
)
# Columns whose unit is in another column of the same row: a readiness measure's value, its bounds and its
# threshold are in the measure's `unit` (preemptlens/reading/words.MEASURES), as are a day's numerator and
# denominator of it; a pilot candidate's checkpoint coverage is a share of its jobs.
UNIT_IN_ROW = {
    ("readiness_evidence", "value"), ("readiness_evidence", "low"), ("readiness_evidence", "high"),
    ("readiness_evidence", "threshold"), ("readiness_intervals", "low"), ("readiness_intervals", "high"),
    ("readiness_days", "num"), ("readiness_days", "den"), ("pilot_candidates", "checkpoint_coverage"),
}


def _build(sc: Scenario) -> None:
    sc.pool("a", 8)
    sc.job("V", "low", 8, "a", 0)
    sc.run("V", 1, 8, "a", 60, 3600, "preempted", preemptor_job_id="P")
    sc.job("P", "high", 8, "a", 0)
    sc.run("P", 1, 8, "a", 3600, 7200, "completed")


def test_every_number_of_a_view_names_its_unit(tmp_path: Path) -> None:
    views = sorted(p.stem for p in VIEWS.glob("*.sql"))
    with analysed(tmp_path, _build) as sc:
        columns = sc.wh.query(
            "SELECT table_name, column_name, data_type FROM information_schema.columns "
            "WHERE list_contains(CAST($v AS VARCHAR[]), table_name) "
            "AND (data_type IN ('DOUBLE', 'FLOAT', 'HUGEINT') OR data_type LIKE 'DECIMAL%')",
            {"v": views},
        ).rows()
    assert ("net_benefit", "net_weighted_gpu_s", "DOUBLE") in columns, "the views were built"
    unnamed = [(t, c) for t, c, _ in columns if not UNIT.search(c) and (t, c) not in UNIT_IN_ROW]
    assert unnamed == []


def test_sql_writes_numbers_out_without_e_notation() -> None:
    frame = pl.DataFrame({"net_weighted_gpu_s": [-169_194_000.4, 12.345678], "hazard_per_h": [1.2e-5, 0.5]})
    text = format_table(frame)
    assert "e+" not in text and "e-" not in text
    assert "-169194000" in text and "12.3457" in text and "0.000012" in text
