"""The hand-made cluster (fixture_cluster) plus two teams that preempt each other and a job whose names are
markup, for the masking and escaping tests: team llm's reader must not see research's ids anywhere, and no
name may become a link, an image or HTML on any page or in any report.

- llm's `llm-job-7` (user llm-user8) is preempted by research's `research-job-42` (user research-user3), whose
  id, user and node the scheduler's reason names;
- research's `research-job-9` is preempted by llm's `llm-boss-1`;
- a job of team `TEAM` (a Markdown image) named `NAME` (a javascript: link), id `JOB` (an HTML image),
  user `USER`, is preempted by `llm-boss-1` with a reason that holds HTML and a remote image.
`TRACKER` is the address of a real server that counts connections: nothing may ever fetch from it."""

from __future__ import annotations

from pathlib import Path

import fixture_cluster as fc
import polars as pl

from preemptlens.analytics.params import AnalyticsSettings
from preemptlens.analytics.refresh import analyze
from preemptlens.warehouse import Warehouse

LLM_USER = "llm-user8"
RESEARCH_IDS = ("research-job-42", "research-job-9", "research-user3", "research-node-5")
LLM_IDS = ("llm-job-7", "llm-boss-1")


def hostile(tracker: str) -> dict[str, str]:
    return {
        "TEAM": f"![team]({tracker}/team.png)",
        "NAME": "[click](javascript:alert(1))",
        "JOB": f"<img src={tracker}/job.png onerror=alert(1)>",
        "USER": "<!channel> *bold* @here",
        "REASON": f"<script>alert(1)</script> ![r]({tracker}/reason.png) =HYPERLINK(\"{tracker}/csv\")",
    }


def build(path: Path, tracker: str) -> Path:
    h = hostile(tracker)
    rows = fc._Rows()
    for pool, gpus in (("a100", 16), ("h100", 8)):
        rows.add("pools", pool=pool, valid_from=fc.at(-fc.DAY), gpus=gpus, gpus_per_node=8)
    fc._background(rows)
    for week in range(3):
        fc._weekly_preemption(rows, week)
    fc._week48_extras(rows)
    base = 17 * fc.DAY  # Thursday of W48
    hour = fc.HOUR

    def job(job_id: str, team: str, tier: str, user: str, submit: float, name: str | None = None) -> None:
        rows.job(job_id, team, tier, 8, "a100", submit)
        rows.tables["jobs"][-1].update(user_name=user, name=name or job_id)

    job("llm-job-7", "llm", "low", LLM_USER, base + 1 * hour)
    rows.run("llm-job-7", 1, 8, "a100", base + 2 * hour, base + 6 * hour, "preempted",
             preemptor_job_id="research-job-42",
             reason="Preempted by JobId=research-job-42 (research-user3) on research-node-5")
    rows.run("llm-job-7", 2, 8, "a100", base + 8 * hour, base + 10 * hour, "completed", submit=base + 6 * hour)
    job("research-job-42", "research", "critical", "research-user3", base + 5.9 * hour)
    rows.run("research-job-42", 1, 8, "a100", base + 6 * hour, base + 8 * hour, "completed")

    job("research-job-9", "research", "low", "research-user3", base + 11 * hour)
    rows.run("research-job-9", 1, 8, "a100", base + 12 * hour, base + 15 * hour, "preempted",
             preemptor_job_id="llm-boss-1", reason="Preempted by llm-boss-1")
    rows.run("research-job-9", 2, 8, "a100", base + 17 * hour, base + 18 * hour, "completed", submit=base + 15 * hour)
    job("llm-boss-1", "llm", "critical", LLM_USER, base + 14.9 * hour)
    rows.run("llm-boss-1", 1, 8, "a100", base + 15 * hour, base + 17 * hour, "completed")

    rows.run("llm-boss-1", 2, 8, "a100", base + 22 * hour, base + 23 * hour, "completed", submit=base + 21.9 * hour)
    job(h["JOB"], h["TEAM"], "low", h["USER"], base + 18 * hour, name=h["NAME"])
    rows.run(h["JOB"], 1, 8, "a100", base + 19 * hour, base + 22 * hour, "preempted",
             preemptor_job_id="llm-boss-1", reason=h["REASON"])
    with Warehouse(path) as wh:
        for table in ("pools", "jobs", "job_runs", "preemption_links", "checkpoints", "gpu_samples"):
            wh.load(table, pl.DataFrame(rows.tables[table], infer_schema_length=None), "fixture")
        analyze(wh, AnalyticsSettings())
    return path
