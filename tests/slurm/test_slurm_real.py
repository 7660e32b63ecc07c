"""The Slurm collector against a real Slurm 22.05 with preemption.

The scenario (slurm_scenario.py) records what the jobs themselves saw: when
each run started and when it received SIGTERM, and which high job was the
only one that could have preempted it. The collector's rows are checked
against that, not against numbers written here.
"""

from __future__ import annotations

import json
import time
from datetime import UTC, datetime, timedelta
from pathlib import Path

import polars as pl
import pytest
from slurm_harness import CLUSTER, GPUS, SlurmCluster
from slurm_scenario import Observed, Scenario

from preemptlens.collectors.slurm import Options, SlurmCollector
from preemptlens.collectors.slurm.policy import Policy
from preemptlens.errors import SourceError
from preemptlens.warehouse import LoadReport, Warehouse

pytestmark = pytest.mark.slow
# Slurm's times are whole seconds, cut down, and what a job observes comes later
# by the signal's or the launch's own latency: an end recorded at :03 was seen
# at :04.010 in one CI run. Half a second of latency on top of the cut second.
END_TOLERANCE_S = 1.5
START_TOLERANCE_S = 1.5


# When this module's scenario began. The suite runs one Slurm for every module, and sacct's last hour holds the
# jobs earlier modules ran (some preempted, with job ids of their own): this module reads only its own.
_BEGAN: dict[int, datetime] = {}


@pytest.fixture(scope="module", autouse=True)
def _own_jobs_only(slurm_cluster: SlurmCluster) -> None:
    slurm_cluster._cancel_all()
    time.sleep(2)  # sacct's times are whole seconds: leftovers end before the window starts
    _BEGAN[id(slurm_cluster)] = datetime.now(UTC).replace(microsecond=0)


def _collector(cluster: SlurmCluster, **overrides: object) -> SlurmCollector:
    options = Options(
        cluster=CLUSTER,
        slurm_conf=str(cluster.conf),
        ctld_log=str(cluster.ctld_log),
        since=_BEGAN[id(cluster)],
        lookback=timedelta(hours=1),
        lag=timedelta(seconds=30),
        window=timedelta(hours=1),
        timeout_s=60,
        policy=Policy(),
    )
    for key, value in overrides.items():
        setattr(options, key, value)
    return SlurmCollector(options)


def _collect(wh: Warehouse, collector: SlurmCollector) -> list[LoadReport]:
    return [wh.load_batch(b) for b in collector.batches(wh.watermarks(collector.name))]


def _settled(cluster: SlurmCluster, obs: Observed) -> bool:
    """Accounting lags slurmctld: wait until every observed run is recorded and ended."""
    out = cluster.run("sacct", "-X", "--duplicates", "--allusers", "-n", "-P", "-S",
                      _BEGAN[id(cluster)].strftime("%Y-%m-%dT%H:%M:%S"),
                      "-o", "JobID,State,End", check=False).stdout
    rows = [line.split("|") for line in out.splitlines() if line]
    ended = [r for r in rows if r[2] not in ("Unknown", "")]
    return len(ended) == len(obs.starts) and len(rows) == len(obs.starts)


@pytest.fixture(scope="module")
def played(slurm_cluster: SlurmCluster, tmp_path_factory: pytest.TempPathFactory):  # type: ignore[no-untyped-def]
    wh = Warehouse(tmp_path_factory.mktemp("wh") / "slurm.duckdb")
    scenario = Scenario(slurm_cluster)
    midway: dict[str, object] = {}

    def collect_midway() -> None:
        time.sleep(3)  # let slurmdbd record the runs that started again
        midway["reports"] = _collect(wh, _collector(slurm_cluster))
        midway["running"] = wh.query("SELECT job_id, run FROM job_runs WHERE state = 'running'").rows()

    obs = scenario.play(midway=collect_midway)
    deadline = time.monotonic() + 60
    while not _settled(slurm_cluster, obs) and time.monotonic() < deadline:
        time.sleep(1)
    first = _collect(wh, _collector(slurm_cluster))
    yield wh, obs, scenario, midway, first
    wh.close()


def _differ(a: pl.DataFrame, b: pl.DataFrame) -> str:
    """The rows only one side has, for an assertion message."""
    return f"only before: {a.join(b, on=a.columns, how='anti', nulls_equal=True).rows()}; " \
           f"only after: {b.join(a, on=a.columns, how='anti', nulls_equal=True).rows()}"


def _epoch(value: object) -> float:
    return value.timestamp()  # type: ignore[attr-defined,no-any-return]


def test_every_preemption_found_with_victim_preemptor_gpus_and_times(  # type: ignore[no-untyped-def]
    played, slurm_cluster: SlurmCluster
) -> None:
    wh, obs, _, _, _ = played
    assert obs.terms, "the scenario saw no preemption"
    runs = {(r["job_id"], r["run"]): r for r in wh.query("SELECT * FROM job_runs").iter_rows(named=True)}
    # The slurmctld log is read whole: links of earlier modules' jobs are there too, before this module began.
    began = _BEGAN[id(slurm_cluster)]
    links = [lk for lk in wh.query("SELECT * FROM preemption_links").iter_rows(named=True) if lk["time"] >= began]
    links_of: dict[str, list[dict[str, object]]] = {}
    for link in links:
        links_of.setdefault(link["victim_job_id"], []).append(link)
    for (job, run), term in obs.terms.items():
        row = runs[(job, run)]
        assert row["state"] == "preempted", (job, run, row)
        assert row["gpus"] == obs.gpus[job]
        assert abs(_epoch(row["end_time"]) - term) <= END_TOLERANCE_S, (job, run, row["end_time"], term)
        assert abs(_epoch(row["start_time"]) - obs.starts[(job, run)]) <= START_TOLERANCE_S
        matching = [lk for lk in links_of.get(job, []) if abs(_epoch(lk["time"]) - term) <= END_TOLERANCE_S]
        assert len(matching) == 1, (job, run, links_of.get(job))
        assert matching[0]["preemptor_job_id"] == obs.preemptor_of[(job, run)]
        assert matching[0]["reason"] == "requeued"
    preempted = {k for k, r in runs.items() if r["state"] == "preempted"}
    assert preempted == set(obs.terms)
    assert sum(len(v) for v in links_of.values()) == len(obs.terms)


def test_requeue_delay_and_attempts_per_victim(played) -> None:  # type: ignore[no-untyped-def]
    wh, obs, _, _, _ = played
    runs = wh.query("SELECT * FROM job_runs ORDER BY job_id, run")
    for (job, run), term in obs.terms.items():
        nxt = runs.filter((pl.col("job_id") == job) & (pl.col("run") == run + 1)).row(0, named=True)
        prev = runs.filter((pl.col("job_id") == job) & (pl.col("run") == run)).row(0, named=True)
        delay = _epoch(nxt["start_time"]) - _epoch(prev["end_time"])
        seen = obs.starts[(job, run + 1)] - term
        assert abs(delay - seen) <= END_TOLERANCE_S + START_TOLERANCE_S, (job, run, delay, seen)
        # cred_expire=10 holds a requeued job at least ~11 s, even with GPUs free.
        assert delay >= 10
        assert _epoch(nxt["submit_time"]) == pytest.approx(_epoch(prev["end_time"]), abs=1)
        assert _epoch(nxt["eligible_time"]) - _epoch(nxt["submit_time"]) >= 10
    attempts = dict(runs.group_by("job_id").agg(pl.col("run").max()).rows())
    seen_attempts: dict[str, int] = {}
    for job, run in obs.starts:
        seen_attempts[job] = max(seen_attempts.get(job, 0), run)
    assert attempts == seen_attempts
    assert max(attempts.values()) >= 3, "some job should have been preempted twice"
    final = dict(runs.sort("run").group_by("job_id").agg(pl.col("state").last()).rows())
    assert set(final.values()) == {"completed"}


def test_jobs_rows_tiers_and_teams(played) -> None:  # type: ignore[no-untyped-def]
    wh, obs, _, _, _ = played
    jobs = {r["job_id"]: r for r in wh.query("SELECT * FROM jobs").iter_rows(named=True)}
    assert set(jobs) == set(obs.gpus)
    for job, row in jobs.items():
        low = obs.partition[job] == "low"
        assert (row["priority_class"], row["tier"], row["preemptible"]) == (
            ("low", "low", True) if low else ("high", "high", False))
        assert row["gpus"] == obs.gpus[job]
        assert row["team"] == obs.account[job]
        first_start = min(t for (j, _), t in obs.starts.items() if j == job)
        assert _epoch(row["submit_time"]) <= first_start


def test_overlapping_partitions_are_one_pool_with_the_nodes_gpus(played) -> None:  # type: ignore[no-untyped-def]
    """low and high share the node, so high jobs preempt low ones within one pool of GPUS GPUs."""
    wh, obs, _, _, _ = played
    pools = wh.query("SELECT * FROM pools").rows(named=True)
    assert [(p["cluster"], p["pool"], p["gpus"], p["gpus_per_node"]) for p in pools] == [
        (CLUSTER, "high+low", GPUS, GPUS)]
    assert _epoch(pools[0]["valid_from"]) <= min(obs.starts.values())
    named = wh.query("SELECT DISTINCT pool FROM jobs UNION SELECT DISTINCT pool FROM job_runs")["pool"]
    assert named.to_list() == ["high+low"]


def test_midway_running_rows_are_replaced_when_they_end(played) -> None:  # type: ignore[no-untyped-def]
    wh, _, _, midway, _ = played
    assert midway["running"], "the midway collection saw no running run"
    for job, run in midway["running"]:
        row = wh.query("SELECT state, end_time FROM job_runs WHERE job_id = $j AND run = $r",
                       {"j": job, "r": run}).row(0, named=True)
        assert row["state"] != "running" and row["end_time"] is not None


def test_collecting_again_changes_nothing(played, slurm_cluster: SlurmCluster) -> None:  # type: ignore[no-untyped-def]
    wh, obs, _, _, _ = played
    before = {t: wh.query(f"SELECT * EXCLUDE (_load_id) FROM {t} ORDER BY ALL") for t in
              ("pools", "jobs", "job_runs", "preemption_links")}
    again = _collect(wh, _collector(slurm_cluster))
    for table, frame in before.items():
        now = wh.query(f"SELECT * EXCLUDE (_load_id) FROM {table} ORDER BY ALL")
        assert now.equals(frame), (table, _differ(frame, now))
    assert sum(r.loaded for r in again) == 0
    # A window that starts after a job's first runs: its history is read whole
    # and the run numbers stay what they were.
    since = min(obs.terms.values()) + 2
    shifted = _collect(wh, _collector(slurm_cluster, since=datetime.fromtimestamp(since, UTC)))
    assert sum(r.loaded for r in shifted) == 0
    assert sum(r.unchanged for r in shifted) > 0
    for table, frame in before.items():
        assert wh.query(f"SELECT * EXCLUDE (_load_id) FROM {table} ORDER BY ALL").equals(frame), table
    assert wh.query("SELECT count(*) AS n FROM quarantine")["n"][0] == 0


def test_windows_starting_around_a_requeue_change_nothing(played, slurm_cluster: SlurmCluster) -> None:  # type: ignore[no-untyped-def]
    """A requeued run's record may be submitted a second or more after the run
    before it ended: a window starting in between holds only the later run,
    whose number must still count the earlier one."""
    wh, _, _, _, _ = played
    tables = ("jobs", "job_runs", "job_aliases")
    before = {t: wh.query(f"SELECT * EXCLUDE (_load_id) FROM {t} ORDER BY ALL") for t in tables}
    requeues = wh.query("SELECT epoch(submit_time)::BIGINT AS t FROM job_runs WHERE run > 1")["t"].unique()
    assert len(requeues) > 0
    for submitted in requeues.sort():
        for since in range(submitted - 2, submitted + 2):
            report = _collect(wh, _collector(slurm_cluster, ctld_log="", since=datetime.fromtimestamp(since, UTC)))
            for table, frame in before.items():
                now = wh.query(f"SELECT * EXCLUDE (_load_id) FROM {table} ORDER BY ALL")
                assert now.equals(frame), (since - submitted, table, _differ(frame, now))
            assert sum(r.loaded for r in report) == 0


def test_text_output_gives_the_same_runs(played, slurm_cluster: SlurmCluster, tmp_path: Path) -> None:  # type: ignore[no-untyped-def]
    wh, _, _, _, _ = played
    text_wh = Warehouse(tmp_path / "text.duckdb")
    _collect(text_wh, _collector(slurm_cluster, format="parsable2", ctld_log=""))
    query = "SELECT * EXCLUDE (_load_id) FROM job_runs ORDER BY job_id, run"
    text, json_runs = text_wh.query(query), wh.query(query)
    assert text.equals(json_runs), _differ(json_runs, text)
    text_wh.close()


def test_checkpoints_written_by_the_jobs_load(played) -> None:  # type: ignore[no-untyped-def]
    wh, _, scenario, _, _ = played
    lines = [json.loads(x) for x in scenario.checkpoints.read_text().splitlines()]
    frame = pl.DataFrame(lines).with_columns(
        pl.from_epoch((pl.col("time") * 1e6).cast(pl.Int64), time_unit="us").dt.replace_time_zone("UTC"))
    report = wh.load("checkpoints", frame, "scenario")
    assert report.loaded == len(lines) and report.quarantined == 0
    # Every preempted checkpointing run lost less than one checkpoint interval (1 s) plus
    # Slurm's second rounding: the last checkpoint before the preemption is that recent.
    lost = wh.query(
        "SELECT r.job_id, r.run, epoch(r.end_time) - epoch(max(c.time)) AS since_ckpt "
        "FROM job_runs r JOIN checkpoints c ON c.job_id = r.job_id AND c.run = r.run "
        "WHERE r.state = 'preempted' GROUP BY r.job_id, r.run, r.end_time"
    )
    assert lost.height > 0
    assert lost["since_ckpt"].max() <= 2.0  # type: ignore[operator]


def test_source_errors_say_why(slurm_cluster: SlurmCluster, tmp_path: Path) -> None:
    empty = tmp_path / "bin"
    empty.mkdir()
    with pytest.raises(SourceError, match="sacct not found"):
        list(_collector(slurm_cluster, bin_dir=str(empty), ctld_log="").batches({}))
    # slurmdbd unreachable: the same cluster with a port nobody listens on.
    conf = tmp_path / "slurm.conf"
    text = slurm_cluster.conf.read_text()
    port = slurm_cluster.ports["dbd"]
    conf.write_text(text.replace(f"AccountingStoragePort={port}", "AccountingStoragePort=1"))
    with pytest.raises(SourceError) as info:
        list(_collector(slurm_cluster, slurm_conf=str(conf), ctld_log="", read_policy=False).batches({}))
    assert "sacct" in str(info.value)
