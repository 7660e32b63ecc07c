"""The ledger on a real Slurm when requeued victims end soon after, and when an
admin requeues a job: one ledger row per real preemption, none for the runs
that follow it, none for `scontrol requeue`.

One scenario (about 45 s) serves every assertion: low jobs A, B and C (2 GPUs
each) are preempted together by the 8-GPU high job H; after Slurm's requeue
hold (cred_expire=10 holds a requeued job about 11 s) A's second run
completes, B's fails and C's is cancelled by the test, all within the 120 s
link tolerance of the preemption. Before that, job D was requeued by the
admin (`scontrol requeue`) and then completed: no preemption.

This module reads only the jobs it submitted (`since` = its own start), so it
does not disturb test_slurm_real, which pytest runs before it.
"""

from __future__ import annotations

import json
import time
from datetime import UTC, datetime, timedelta
from typing import Any

import pytest
from slurm_harness import CLUSTER, SlurmCluster, wait_until

from preemptlens.analytics.params import AnalyticsSettings
from preemptlens.analytics.refresh import analyze
from preemptlens.collectors.slurm import Options, SlurmCollector
from preemptlens.collectors.slurm.policy import Policy
from preemptlens.warehouse import Warehouse

pytestmark = pytest.mark.slow

# Run 1 works `first` seconds (the low jobs: until they are preempted or
# requeued); a later run works `after` seconds and exits with `code`.
_SCRIPT = r"""#!/bin/bash
run=$(( ${{SLURM_RESTART_COUNT:-0}} + 1 ))
echo "{{\"job_id\":\"$SLURM_JOB_ID\",\"run\":$run,\"event\":\"start\",\"t\":$(date +%s.%N)}}" >> {events}
if [ "$run" -ge 2 ]; then
  sleep {after}
  echo "{{\"job_id\":\"$SLURM_JOB_ID\",\"run\":$run,\"event\":\"end\",\"t\":$(date +%s.%N)}}" >> {events}
  exit {code}
fi
sleep {first} & wait $!
"""


class Jobs:
    def __init__(self, cluster: SlurmCluster) -> None:
        self.cluster = cluster
        self.dir = cluster.root / "requeue"
        self.dir.mkdir(exist_ok=True)
        self.events = self.dir / "events.jsonl"

    def submit(self, name: str, partition: str, gpus: int, after: int = 1, code: int = 0, first: int = 600) -> str:
        path = self.dir / f"{name}.sh"
        path.write_text(_SCRIPT.format(events=self.events, after=after, code=code, first=first))
        return self.cluster.run(
            "sbatch", "--parsable", "-J", name, "-p", partition, f"--gres=gpu:{gpus}", "-A", "vision", "-c", "1",
            "--mem=100M", "-o", str(self.dir / f"{name}.out"), str(path),
        ).stdout.strip().split(";")[0]

    def seen(self, job: str, run: int, event: str = "start") -> bool:
        if not self.events.exists():
            return False
        return any(e["job_id"] == job and e["run"] == run and e["event"] == event
                   for e in map(json.loads, self.events.read_text().splitlines()))

    def wait(self, what: str, ok: Any, timeout: float = 60) -> None:
        wait_until(what, ok, timeout, lambda: f": {self.events.read_text()}")

    def sacct(self, ids: list[str]) -> list[dict[str, Any]]:
        """Every run of these jobs as sacct prints it, times in epoch seconds."""
        out = self.cluster.run("sacct", "-X", "--duplicates", "-n", "-P", "-j", ",".join(ids),
                               "-o", "JobID,State,Start,End", check=False).stdout
        rows = []
        for line in out.splitlines():
            job, state, start, end = line.split("|")
            rows.append({"job": job, "state": state.split()[0], "start": start, "end": end})
        return rows


def _epoch(text: str) -> float:
    return datetime.fromisoformat(text).replace(tzinfo=UTC).timestamp()


@pytest.fixture(scope="module")
def requeued(slurm_cluster: SlurmCluster, tmp_path_factory: pytest.TempPathFactory):  # type: ignore[no-untyped-def]
    jobs = Jobs(slurm_cluster)
    began = datetime.now(UTC).replace(microsecond=0) - timedelta(seconds=1)
    d = jobs.submit("admin-d", "low", 1, after=1)
    a = jobs.submit("low-a", "low", 2, after=2, code=0)
    b = jobs.submit("low-b", "low", 2, after=2, code=1)
    c = jobs.submit("low-c", "low", 2, after=600)
    for job in (a, b, c, d):
        jobs.wait(f"{job} running", lambda job=job: jobs.seen(job, 1))
    slurm_cluster.run("scontrol", "requeue", d)
    jobs.wait(f"{d} back and done", lambda: jobs.seen(d, 2, "end"))
    time.sleep(1)  # let D's second run leave its GPU
    h = jobs.submit("high-h", "high", 8, first=2)
    jobs.wait(f"{h} running", lambda: jobs.seen(h, 1))
    for job in (a, b, c):
        jobs.wait(f"{job} back", lambda job=job: jobs.seen(job, 2))
    slurm_cluster.run("scancel", c)
    ids = [a, b, c, d, h]

    def settled() -> bool:
        rows = jobs.sacct(ids)
        return len(rows) == 9 and all(r["end"] not in ("Unknown", "") for r in rows)

    jobs.wait("accounting of every run", settled, timeout=60)
    wh = Warehouse(tmp_path_factory.mktemp("requeue") / "w.duckdb")
    collector = SlurmCollector(Options(
        cluster="", slurm_conf=str(slurm_cluster.conf), ctld_log=str(slurm_cluster.ctld_log),
        since=began, lag=timedelta(seconds=30), window=timedelta(hours=1), timeout_s=60, policy=Policy()))
    for batch in collector.batches(wh.watermarks(collector.name)):
        wh.load_batch(batch)
    analyze(wh, AnalyticsSettings())
    ledger = wh.query("SELECT * FROM preemption_ledger ORDER BY victim_job_id, victim_run")
    yield {"a": a, "b": b, "c": c, "d": d, "h": h}, jobs.sacct(ids), ledger, wh
    wh.close()


def test_one_ledger_row_per_real_preemption_with_victim_and_preemptor(requeued) -> None:  # type: ignore[no-untyped-def]
    ids, sacct, ledger, _ = requeued
    states = {(r["job"], r["state"]) for r in sacct}
    # The later runs did end as the scenario meant, within the tolerance of the preemption.
    assert {(ids["a"], "COMPLETED"), (ids["b"], "FAILED"), (ids["c"], "CANCELLED"),
            (ids["d"], "REQUEUED"), (ids["d"], "COMPLETED")} <= states
    # job ids are strings: compare as sets, since "10" sorts before "9"
    assert sorted(ledger.select("victim_job_id", "victim_run", "preemptor_job_id").rows()) == sorted([
        (ids["a"], 1, ids["h"]), (ids["b"], 1, ids["h"]), (ids["c"], 1, ids["h"])])
    assert ledger["repeat_victim"].to_list() == [False] * 3
    # No cluster.name was given: the rows carry slurm.conf's ClusterName.
    assert ledger["cluster"].unique().to_list() == [CLUSTER]
    preempted_at = {r["job"]: _epoch(r["end"]) for r in sacct if r["state"] == "PREEMPTED"}
    later_ends = [_epoch(r["end"]) - preempted_at[r["job"]] for r in sacct
                  if r["job"] in preempted_at and r["state"] != "PREEMPTED"]
    assert len(later_ends) == 3 and max(later_ends) < 120, later_ends


def test_requeue_delay_within_a_second_of_sacct(requeued) -> None:  # type: ignore[no-untyped-def]
    _, sacct, ledger, _ = requeued
    for row in ledger.iter_rows(named=True):
        runs = [r for r in sacct if r["job"] == row["victim_job_id"]]
        first = next(r for r in runs if r["state"] == "PREEMPTED")
        second = next(r for r in runs if r["state"] != "PREEMPTED")
        delay = _epoch(second["start"]) - _epoch(first["end"])
        assert abs(row["requeue_delay_s"] - delay) <= 1.0, (row["victim_job_id"], row["requeue_delay_s"], delay)
        assert not row["requeue_censored"]


def test_admin_requeue_is_no_preemption(requeued) -> None:  # type: ignore[no-untyped-def]
    ids, _, ledger, wh = requeued
    runs = wh.query("SELECT run, state FROM job_runs WHERE job_id = $j ORDER BY run", {"j": ids["d"]}).rows()
    assert runs == [(1, "requeued"), (2, "completed")]
    assert wh.query("SELECT count(*) AS n FROM preemption_links WHERE victim_job_id = $j",
                    {"j": ids["d"]})["n"][0] == 0
    assert ids["d"] not in ledger["victim_job_id"].to_list()


def test_the_log_links_each_preemption_once(requeued) -> None:  # type: ignore[no-untyped-def]
    ids, _, _, wh = requeued
    links = wh.query("SELECT victim_job_id, preemptor_job_id, reason FROM preemption_links "
                     "WHERE preemptor_job_id = $h ORDER BY victim_job_id", {"h": ids["h"]})
    assert sorted(links.rows()) == sorted((ids[k], ids["h"], "requeued") for k in ("a", "b", "c"))
