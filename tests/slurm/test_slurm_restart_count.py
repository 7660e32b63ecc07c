"""Slurm's own count of a job's restarts (accounting `restart_cnt`, 24.11 on) reaches job_runs.restarts_before,
and the restarts it counts that no record shows reach run_ends and restart_causes.

Facts (SchedMD/slurm): the accounting job record (`PARSER_ARRAY(JOB)`, slurmdb_job_rec_t) gains `restart_cnt` in
data_parser v0.0.42 (src/plugins/data_parser/v0.0.42/parsers.c, slurm-24-11-0-1, commit 85c982ed40 "Add the
number of times a job has been requeued/restarted to the database"); 24.05's v0.0.41 record has none
(slurm-24-05-8-1). slurmctld raises the count after writing the ending run's record, on every requeue, preemption
requeue and node-failure requeue (src/slurmctld/job_mgr.c, slurm-25-11-7-1), and slurmdbd stores it on the next
run's record (as_mysql_job.c): the k-th run's record carries k - 1. Without --duplicates sacct prints a job's
newest record only, so a requeued job's earlier runs go unseen but for that count.
"""

from __future__ import annotations

import io
import json
from pathlib import Path
from typing import Any

import pytest

from preemptlens.analytics.params import AnalyticsSettings
from preemptlens.analytics.refresh import analyze
from preemptlens.collectors.slurm import build_batch, read_document
from preemptlens.collectors.slurm.policy import Partition, Policy
from preemptlens.warehouse import Warehouse

CASES = Path(__file__).resolve().parent.parent / "cases" / "sacct"
POLICY = Policy(
    preempt_type="partition_prio",
    global_mode="REQUEUE",
    partitions={"low": Partition("low", 1, "REQUEUE"), "high": Partition("high", 10, "OFF")},
)


def _load(doc: dict[str, Any], wh: Warehouse) -> None:
    read = read_document(io.BytesIO(json.dumps(doc).encode()), "json", "doc")
    assert not read.rejects
    wh.load_batch(build_batch("c1", read, POLICY))


def _newest_only(doc: dict[str, Any]) -> dict[str, Any]:
    """The document sacct prints without --duplicates: each job's newest record alone, where its first was."""
    newest: dict[Any, dict[str, Any]] = {}
    for job in doc["jobs"]:
        newest[job["job_id"]] = job
    return {**doc, "jobs": list(newest.values())}


def test_the_count_is_read_as_slurm_wrote_it() -> None:
    wh = Warehouse(":memory:")
    _load(json.loads((CASES / "mixed_24_11.json").read_text()), wh)
    got = wh.query("SELECT job_id, run, restarts_before FROM job_runs ORDER BY job_id, run").rows()
    assert got == [("100", 1, 0), ("100", 2, 1), ("101", 1, 0), ("102_3", 1, 0), ("102_3", 2, 1),
                   ("103+1", 1, 0), ("105", 1, 0)]
    # before 24.11 (and in text) nothing is counted: unknown, not 0
    old = Warehouse(":memory:")
    _load(json.loads((CASES / "mixed_23_11.json").read_text()), old)
    assert set(old.query("SELECT restarts_before FROM job_runs")["restarts_before"].to_list()) == {None}


@pytest.mark.parametrize("value", [-1, 2**16, 1.5, {"set": True, "infinite": False, "number": -3}])
def test_a_count_slurm_cannot_write_costs_its_record(value: Any) -> None:
    doc = json.loads((CASES / "mixed_24_11.json").read_text())
    doc["jobs"][1]["restart_cnt"] = value
    read = read_document(io.BytesIO(json.dumps(doc).encode()), "json", "doc")
    assert [(r.field, r.reason.split(":")[0]) for r in read.rejects] == [("restart_cnt",
                                                                         "not a count from 0 to 65535")]
    assert read.count() == len(doc["jobs"]) - 1


def test_restarts_no_record_shows_are_counted_once_of_unknown_cause(tmp_path: Path) -> None:
    """Job 100 was preempted and ran again; job 102_3 (array task 110) was requeued and runs again. Read without
    --duplicates, each is one run whose count says one run came before it."""
    doc = _newest_only(json.loads((CASES / "mixed_24_11.json").read_text()))
    with Warehouse(tmp_path / "w.duckdb") as wh:
        _load(doc, wh)
        # a second read of the same records (the collector's lag re-reads a window) counts nothing twice
        _load(doc, wh)
        analyze(wh, AnalyticsSettings())
        hidden = dict(wh.query("SELECT job_id, restarts_hidden FROM run_ends WHERE run = 1").rows())
        assert hidden == {"100": 1, "101": 0, "102_3": 1, "103+1": 0}
        causes = wh.query("SELECT team, cause, cause_by, runs, restarts, run_gpu_h FROM restart_causes "
                          "WHERE level = 'team' ORDER BY team, cause").rows()
        teams = dict(wh.query("SELECT job_id, team FROM jobs").rows())
        unknown = sorted(r for r in causes if r[1] == "unknown")
        expected = sorted({(teams["100"], 1), (teams["102_3"], 1)} if teams["100"] != teams["102_3"]
                          else {(teams["100"], 2)})
        assert [(t, runs) for t, _, _, runs, _, _ in unknown] == expected
        assert all(restarts == runs and gpu_h is None and by is None for _, _, by, runs, restarts, gpu_h in unknown)


def test_every_run_recorded_hides_nothing(tmp_path: Path) -> None:
    with Warehouse(tmp_path / "w.duckdb") as wh:
        _load(json.loads((CASES / "mixed_24_11.json").read_text()), wh)
        analyze(wh, AnalyticsSettings())
        assert set(wh.query("SELECT restarts_hidden FROM run_ends")["restarts_hidden"].to_list()) == {0}
        assert wh.query("SELECT count(*) FROM restart_causes WHERE cause = 'unknown'").item() == 0
