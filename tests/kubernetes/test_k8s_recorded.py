"""Every recorded case of tests/cases/kubernetes/recorded through the fake API server, `collect kubernetes`
(the real client) and `analyze`, as a cluster of that version would hand them over.

A case file names where each payload came from (`sources`), what the cluster is made to do between
collections (`steps`: objects added, modified, deleted; `compact` forgets the API server's history, so
that the next watch from the stored cursor gets 410 Gone and lists again), and what must come out
(`expect`):

- `ledger`: each real preemption is exactly one ledger row: the right victim (and run), its time within
  one second, its preemptor where the payload names one, its GPUs, pool, run start (null: unknown, its
  costs null too, and data_issues lists it, as it lists an unknown preemptor) and reason;
- `links_only`: a victim of which only events were collected is exactly one link (with its preemptor and
  writer), no ledger row, and a data_issues row; `links` counts the links of a victim (a KAI gang
  eviction is one, not N);
- `no_preemption`: ids that must be in neither (a deactivated Workload, a preemptor-side event alone, a
  victim only an untrusted writer names);
- `quarantined`: events shaped like preemptions from a writer not trusted with them, or that the victim's own
  state, read back, gainsays ("claimed but not corroborated"), with the reason;
- `claims_not_corroborated`: victims an event claims, whose state could not be read back (deleted), and whose
  collected runs gainsay it: a link, no ledger row, and a data_issues row;
- `implausible_preemptor`: victims an event names a preemptor for that was running before the preemption:
  not the ledger's preemptor, and a data_issues row;
- `link_fields`: per victim, columns every link of it holds (what bore it out, the Kueue preemptor's
  ClusterQueue and cohort, the effective priorities).

Then the same collection runs once more with nothing new: nothing loaded may change.
"""

from __future__ import annotations

import json
from datetime import datetime
from pathlib import Path
from typing import Any

import pytest
from k8s_fake import CASES, FakeApiServer

from preemptlens.cli import main
from preemptlens.warehouse import Warehouse

RECORDED = CASES / "recorded"
PATHS = {
    "events": "/api/v1/events",
    "events.k8s.io": "/apis/events.k8s.io/v1/events",
    "pods": "/api/v1/pods",
    "podgroups": "/apis/scheduling.run.ai/v2alpha2/podgroups",
    **{f"{plural}.{version}": f"/apis/kueue.x-k8s.io/{version}/{plural}"
       for plural in ("workloads", "localqueues", "clusterqueues") for version in ("v1beta1", "v1beta2")},
}
RAW = ("preemption_links", "jobs", "job_runs", "job_aliases", "quarantine")


def _toml(value: Any) -> str:
    if isinstance(value, dict):
        return "{ " + ", ".join(f"{json.dumps(k)} = {_toml(v)}" for k, v in value.items()) + " }"
    return json.dumps(value)


def _config(tmp_path: Path, url: str, case: dict[str, Any]) -> Path:
    lines = [
        "[cluster]", 'name = "recorded"',
        'tiers = { "batch-low" = "low", "low-priority" = "low", "train" = "low", "low" = "low" }',
        "[kubernetes]", f'api_url = "{url}"',
        f"streams = {json.dumps(case['streams'])}", "watch_seconds = 2.0", "idle_seconds = 0.3",
        *(f"{k} = {_toml(v)}" for k, v in case.get("settings", {}).items()),
    ]
    path = tmp_path / "preemptlens.toml"
    path.write_text("\n".join(lines) + "\n")
    return path


def _run(tmp_path: Path, config: Path, *command: str) -> None:
    assert main(["--config", str(config), "--warehouse", str(tmp_path / "wh.duckdb"), *command]) == 0


def _at(text: str) -> datetime:
    return datetime.fromisoformat(text.replace("Z", "+00:00"))


def _snapshot(tmp_path: Path) -> dict[str, set[tuple[Any, ...]]]:
    with Warehouse(tmp_path / "wh.duckdb") as wh:
        found = {}
        for table in (*RAW, "preemption_ledger"):
            columns = [c for c in wh.query(f"SELECT * FROM {table} LIMIT 0").columns if c != "_load_id"]
            found[table] = set(wh.query(f"SELECT {', '.join(columns)} FROM {table}").rows())
        return found


@pytest.mark.parametrize("name", sorted(p.stem for p in RECORDED.glob("*.json")))
def test_recorded_case(api: FakeApiServer, tmp_path: Path, name: str) -> None:
    case = json.loads((RECORDED / f"{name}.json").read_text())
    assert case["sources"] and all(s["what"] and s["from"] for s in case["sources"]), "every payload names its source"
    config = _config(tmp_path, api.url, case)
    for step in case["steps"]:
        for op in step["apply"]:
            getattr(api, op["op"])(PATHS[op["resource"]], op["object"])
        if step.get("compact"):
            api.compact()
        _run(tmp_path, config, "collect", "kubernetes")
    _run(tmp_path, config, "analyze")

    expect = case["expect"]
    with Warehouse(tmp_path / "wh.duckdb") as wh:
        ledger = wh.query("SELECT * FROM preemption_ledger").to_dicts()
        links = wh.query("SELECT * FROM preemption_links").to_dicts()
        quarantine = wh.query("SELECT * FROM quarantine").to_dicts()
        issues = {(r["job_id"], r["issue"]) for r in wh.query("SELECT * FROM data_issues").to_dicts()}

    wanted = expect.get("ledger", [])
    assert sorted(r["victim_job_id"] for r in ledger) == sorted(w["victim"] for w in wanted), "one row per preemption"
    for want in wanted:
        (row,) = [r for r in ledger if r["victim_job_id"] == want["victim"]]
        assert abs((row["time"] - _at(want["time"])).total_seconds()) <= 1.0, (row["time"], want["time"])
        assert row["preemptor_job_id"] == want["preemptor"]
        assert row["victim_gpus"] == want["gpus"]
        assert row["pool"] == want.get("pool", row["pool"])
        assert row["run_start"] == (_at(want["run_start"]) if want.get("run_start") else None)
        if row["run_start"] is None:
            # what needs the start is unknown, never zero, and data_issues says so
            assert row["lost_gpu_s"] is None and row["run_age_s"] is None and row["recovery_s"] is None
            assert (want["victim"], "preemption with unknown run start") in issues
        if row["preemptor_job_id"] is None:
            assert (want["victim"], "preemption with unknown preemptor") in issues
        if "reason" in want:
            assert want["reason"] in (row["reason"] or ""), row["reason"]
        if "run" in want:
            assert row["victim_run"] == want["run"]

    for want in expect.get("links_only", []):
        (link,) = [lk for lk in links if lk["victim_job_id"] == want["victim"]]
        assert abs((link["time"] - _at(want["time"])).total_seconds()) <= 1.0
        assert link["preemptor_job_id"] == want["preemptor"]
        assert link["reporter"] == want.get("reporter", link["reporter"])
        assert want["victim"] not in {r["victim_job_id"] for r in ledger}
        assert (want["victim"], "preemption link whose victim has no runs") in issues
    for victim, count in expect.get("links", {}).items():
        assert sum(lk["victim_job_id"] == victim for lk in links) == count, victim
    for victim in expect.get("no_preemption", []):
        assert victim not in {r["victim_job_id"] for r in ledger} | {lk["victim_job_id"] for lk in links}
    for victim in expect.get("claims_not_corroborated", []):
        assert victim in {lk["victim_job_id"] for lk in links if lk["corroboration"] is None}
        assert victim not in {r["victim_job_id"] for r in ledger}
        assert (victim, "preemption claimed by an event, not corroborated by its victim") in issues
    for victim, fields in expect.get("link_fields", {}).items():
        found = [lk for lk in links if lk["victim_job_id"] == victim]
        assert found and all({k: lk[k] for k in fields} == fields for lk in found), found
    for victim in expect.get("implausible_preemptor", []):
        assert (victim, "preemptor named by an event is not plausible") in issues
    # every link names the component that wrote it, one the settings trust
    assert all(lk["reporter"] for lk in links)
    for want in expect.get("quarantined", []):
        (row,) = [q for q in quarantine if q["record"] == want["record"]]
        assert (row["target_table"], row["field"]) == ("preemption_links", want["field"])
        assert want["reason"] in row["reason"]
    assert len(quarantine) == len(expect.get("quarantined", [])), [q["record"] for q in quarantine]

    # Collecting again, with nothing new in the cluster, changes nothing loaded and nothing figured.
    before = _snapshot(tmp_path)
    _run(tmp_path, config, "collect", "kubernetes")
    _run(tmp_path, config, "analyze")
    assert _snapshot(tmp_path) == before
