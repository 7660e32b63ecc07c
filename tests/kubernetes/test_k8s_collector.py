"""`preemptlens collect kubernetes` end to end: the real client against the fake API server."""

from __future__ import annotations

import copy
import json
import socket
from pathlib import Path
from typing import Any

import pytest
from k8s_fake import FakeApiServer, Fault, load_case

from preemptlens.cli import main
from preemptlens.warehouse import Warehouse

EVENTS = "/api/v1/events"
EVENTS_V1 = "/apis/events.k8s.io/v1/events"
WORKLOADS = "/apis/kueue.x-k8s.io/v1beta1/workloads"
PODS = "/api/v1/pods"
PODGROUPS = "/apis/scheduling.run.ai/v2alpha2/podgroups"
TOKEN = "s3cr3t-t0ken-value"


def _config(tmp_path: Path, url: str, streams: list[str], token: str = TOKEN, **extra: Any) -> Path:
    lines = [
        "[cluster]", 'name = "k8s-test"',
        'tiers = { "batch-low" = "low", "inference-critical" = "critical", "cq-prod" = "high" }',
        "[kubernetes]", f'api_url = "{url}"', f'token = "{token}"',
        f"streams = {json.dumps(streams)}", "watch_seconds = 5.0", "idle_seconds = 0.4",
        *(f"{k} = {json.dumps(v)}" for k, v in extra.items()),
    ]
    path = tmp_path / "preemptlens.toml"
    path.write_text("\n".join(lines) + "\n")
    return path


def _collect(tmp_path: Path, config: Path) -> int:
    return main(["--config", str(config), "--warehouse", str(tmp_path / "wh.duckdb"), "collect", "kubernetes"])


def _rows(tmp_path: Path, sql: str) -> list[dict[str, Any]]:
    with Warehouse(tmp_path / "wh.duckdb") as wh:
        return wh.query(sql).to_dicts()


def _event(i: int, rv_hint: str = "") -> dict[str, Any]:
    return {
        "metadata": {"name": f"victim-{i}.{rv_hint}", "namespace": "ml", "creationTimestamp": "2026-11-03T00:00:00Z",
                     "uid": f"evt-{i}"},
        "involvedObject": {"kind": "Pod", "namespace": "ml", "name": f"victim-{i}", "uid": f"pod-uid-{i:04d}",
                           "apiVersion": "v1"},
        "reason": "Preempted", "message": f"Preempted by ml/boss-{i} on node gpu-{i}",
        "firstTimestamp": f"2026-11-03T00:{i // 60:02d}:{i % 60:02d}Z", "count": 1, "type": "Normal",
        "source": {"component": "default-scheduler"}, "reportingComponent": "default-scheduler",
    }


@pytest.fixture
def api(api: FakeApiServer) -> FakeApiServer:
    api.token = TOKEN
    return api


def test_everything_through_the_real_client(api: FakeApiServer, tmp_path: Path) -> None:
    api.add(EVENTS, *load_case("events_core_v1.json")["items"])
    api.add(EVENTS_V1, *load_case("events_events_k8s_io_v1.json")["items"])
    api.add(WORKLOADS, *load_case("workloads_v1beta1.json")["items"])
    api.add(PODS, *load_case("pods.json")["items"])
    api.add(PODGROUPS, *load_case("podgroups.json")["items"])
    config = _config(tmp_path, api.url, ["events", "events.k8s.io", "workloads", "pods", "podgroups"], page_size=3)
    assert _collect(tmp_path, config) == 0

    links = _rows(tmp_path, "SELECT victim_job_id, preemptor_job_id, reason, source FROM preemption_links")
    # 7 victims in core/v1 (+1 repeat), the events.k8s.io series (+2); the pod seen through both APIs once.
    assert len(links) == 10
    assert {r["source"] for r in links} == {"kubernetes"}
    by_victim = {r["victim_job_id"]: r for r in links}
    assert by_victim["7c1a9f0e-0000-4000-8000-00000000000a"]["preemptor_job_id"] == "ml/infer-big-0"
    assert by_victim["5a5a0000-bbbb-4ccc-8ddd-000000000001"]["reason"] == "kueue InCohortReclaimWhileBorrowing"
    jobs = {r["job_id"]: r for r in _rows(tmp_path, "SELECT * FROM jobs")}
    # 3 workloads, 2 GPU pods (the CPU-only and the Kueue-managed pod are not jobs), 2 PodGroups.
    assert len(jobs) == 7
    assert jobs["7c1a9f0e-0000-4000-8000-0000000000f0"]["tier"] == "critical"
    runs = _rows(tmp_path, "SELECT job_id, run, state FROM job_runs ORDER BY job_id, run")
    assert {(r["job_id"], r["run"], r["state"]) for r in runs} >= {
        ("5a5a0000-bbbb-4ccc-8ddd-000000000001", 1, "preempted"),
        ("5a5a0000-bbbb-4ccc-8ddd-000000000001", 2, "pending"),
        ("7c1a9f0e-0000-4000-8000-00000000000a", 1, "preempted"),
    }
    # Paged lists: limit=3 over 12 events needs 4 pages, each after the first with a continue token.
    event_lists = [q for p, q, _ in api.requests if p == EVENTS and "watch" not in q]
    assert len(event_lists) == 4 and all("continue" in q for q in event_lists[1:])
    assert all(h.get("authorization") == f"Bearer {TOKEN}" for _, _, h in api.requests)

    marks = _rows(tmp_path, "SELECT stream, cursor FROM _watermarks WHERE collector = 'kubernetes'")
    assert {m["stream"] for m in marks} == {"events", "events.k8s.io", "workloads", "pods", "podgroups", "pools",
                                           "quotas"}
    before = {t: _rows(tmp_path, f"SELECT count(*) AS n FROM {t}")[0]["n"] for t in ("preemption_links", "jobs",
                                                                                          "job_runs")}
    requests_before = len(api.requests)
    # A second run resumes every stream by watching from its cursor: no list, nothing new. Only the
    # capacity sources (nodes, Kueue flavors and queues, KAI queues) and Kueue's LocalQueues (an evicted
    # Workload's pool) are listed again, as every run does.
    assert _collect(tmp_path, config) == 0
    listed = {p for p, q, _ in api.requests[requests_before:] if "watch" not in q}
    assert listed == {"/api/v1/nodes", "/apis/kueue.x-k8s.io/v1beta1/resourceflavors",
                      "/apis/kueue.x-k8s.io/v1beta1/clusterqueues", "/apis/scheduling.run.ai/v2/queues",
                      "/apis/kueue.x-k8s.io/v1beta1/localqueues"}
    after = {t: _rows(tmp_path, f"SELECT count(*) AS n FROM {t}")[0]["n"] for t in before}
    assert after == before


def test_dropped_watch_resumes_without_loss(api: FakeApiServer, tmp_path: Path) -> None:
    config = _config(tmp_path, api.url, ["events"])
    api.add(EVENTS, _event(0))
    assert _collect(tmp_path, config) == 0
    api.add(EVENTS, *(_event(i) for i in range(1, 6)))
    api.fault(EVENTS, Fault(drop_after=2))
    assert _collect(tmp_path, config) == 0
    victims = {r["victim_job_id"] for r in _rows(tmp_path, "SELECT victim_job_id FROM preemption_links")}
    assert victims == {f"pod-uid-{i:04d}" for i in range(6)}
    watches = api.watch_requests(EVENTS)
    # Run 2: the first watch broke after two events; the next resumed after the second of them.
    second_event_rv = api.resources[EVENTS].log[2][0]
    assert watches[1]["resourceVersion"] == str(api.resources[EVENTS].log[0][0])
    assert watches[2]["resourceVersion"] == str(second_event_rv)


def test_gone_relists_and_loses_nothing(api: FakeApiServer, tmp_path: Path) -> None:
    config = _config(tmp_path, api.url, ["events"])
    api.add(EVENTS, _event(0))
    assert _collect(tmp_path, config) == 0
    api.add(EVENTS, *(_event(i) for i in range(1, 4)))
    api.compact()  # the stored cursor is now too old: the watch answers 410 Gone
    assert _collect(tmp_path, config) == 0
    victims = {r["victim_job_id"] for r in _rows(tmp_path, "SELECT victim_job_id FROM preemption_links")}
    assert victims == {f"pod-uid-{i:04d}" for i in range(4)}
    kinds = ["watch" if "watch" in q else "list" for p, q, _ in api.requests if p == EVENTS]
    assert kinds == ["list", "watch", "watch", "list", "watch"]
    (mark,) = _rows(tmp_path, "SELECT cursor FROM _watermarks WHERE stream = 'events'")
    assert mark["cursor"] == str(api.revision)


def test_expired_continue_token_restarts_the_list(api: FakeApiServer, tmp_path: Path) -> None:
    api.add(EVENTS, *(_event(i) for i in range(5)))
    config = _config(tmp_path, api.url, ["events"], page_size=2)

    def expire_on_second_page() -> None:
        lists = [q for p, q, _ in api.requests if p == EVENTS and "watch" not in q]
        if len(lists) == 2 and "continue" in lists[1]:
            api.add(PODS, *load_case("pods.json")["items"][:1])
            api.compact()  # the continue token of page 1 now predates the compaction: 410

    api.requests = _Hooked(expire_on_second_page)
    assert _collect(tmp_path, config) == 0
    lists = [q for p, q, _ in api.requests if p == EVENTS and "watch" not in q]
    assert ["continue" in q for q in lists] == [False, True, False, True, True]
    victims = {r["victim_job_id"] for r in _rows(tmp_path, "SELECT victim_job_id FROM preemption_links")}
    assert victims == {f"pod-uid-{i:04d}" for i in range(5)}


class _Hooked(list[Any]):
    """The server's request log, running a hook after each request is logged."""

    def __init__(self, hook: Any) -> None:
        super().__init__()
        self.hook = hook

    def append(self, item: Any) -> None:
        super().append(item)
        self.hook()


def test_bookmark_moves_the_cursor_without_data(api: FakeApiServer, tmp_path: Path) -> None:
    config = _config(tmp_path, api.url, ["events"])
    api.add(EVENTS, _event(0))
    assert _collect(tmp_path, config) == 0
    (first,) = _rows(tmp_path, "SELECT cursor FROM _watermarks WHERE stream = 'events'")
    api.add(PODS, *load_case("pods.json")["items"])  # other resources move the global resourceVersion
    assert _collect(tmp_path, config) == 0
    (second,) = _rows(tmp_path, "SELECT cursor FROM _watermarks WHERE stream = 'events'")
    assert int(second["cursor"]) == api.revision > int(first["cursor"])
    assert len(_rows(tmp_path, "SELECT * FROM preemption_links")) == 1


def test_bad_records_are_quarantined_and_the_rest_loads(api: FakeApiServer, tmp_path: Path) -> None:
    api.add(EVENTS, *load_case("events_malformed.json")["items"])
    broken = copy.deepcopy(load_case("workloads_v1beta1.json")["items"][0])
    broken["status"]["conditions"][1]["lastTransitionTime"] = "soon"
    api.add(WORKLOADS, broken, load_case("workloads_v1beta1.json")["items"][2])
    assert _collect(tmp_path, _config(tmp_path, api.url, ["events", "workloads"])) == 0
    quarantined = {r["record"]: r for r in _rows(tmp_path, "SELECT * FROM quarantine")}
    assert {k: (v["target_table"], v["field"]) for k, v in quarantined.items()} == {
        "events ml/no-uid.1": ("preemption_links", "involvedObject.uid"),
        "events ml/bad-time.1": ("preemption_links", "firstTimestamp"),
        "workloads team-a/job-low-4f2a1": ("jobs", "status.conditions[Evicted].lastTransitionTime"),
    }
    assert all(r["source"] == "kubernetes" and r["reason"] for r in quarantined.values())
    # A message no release writes costs the preemptor's name, not the preemption.
    assert sorted((r["victim_job_id"], r["preemptor_job_id"]) for r in _rows(
        tmp_path, "SELECT * FROM preemption_links")) == [
        ("7c1a9f0e-0000-4000-8000-0000000000ok", None), ("7c1a9f0e-0000-4000-8000-0000000000om", None)]
    assert [r["job_id"] for r in _rows(tmp_path, "SELECT job_id FROM jobs")] == ["5a5a0000-bbbb-4ccc-8ddd-000000000009"]


def test_unreachable_server_fails_with_a_reason(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    assert _collect(tmp_path, _config(tmp_path, f"http://127.0.0.1:{port}", ["events"])) == 2
    err = capsys.readouterr().err
    assert "nothing could be read" in err and "unreachable" in err


def test_rejected_token_is_reported_but_never_shown(
    api: FakeApiServer, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    api.add(EVENTS, _event(0))
    wrong = "wrong-t0ken-that-must-not-leak"
    assert _collect(tmp_path, _config(tmp_path, api.url, ["events"], token=wrong)) == 2
    captured = capsys.readouterr()
    assert "401" in captured.err and "token" in captured.err
    assert wrong not in captured.err + captured.out
    assert _collect(tmp_path, _config(tmp_path, api.url, ["events"])) == 0
    dump = json.dumps(_rows(tmp_path, "SELECT * FROM preemption_links"), default=str)
    dump += json.dumps(_rows(tmp_path, "SELECT * FROM quarantine"), default=str)
    assert TOKEN not in dump and wrong not in dump


def test_missing_crd_does_not_stop_other_streams(api: FakeApiServer, tmp_path: Path) -> None:
    api.add(EVENTS, _event(0))
    config = _config(tmp_path, api.url, ["events", "workloads"], kueue_version="v1beta2")
    api.resources.pop("/apis/kueue.x-k8s.io/v1beta2/workloads")  # Kueue not installed: 404
    assert _collect(tmp_path, config) == 0
    assert len(_rows(tmp_path, "SELECT * FROM preemption_links")) == 1


def test_namespaced_streams_and_a_transient_503(api: FakeApiServer, tmp_path: Path) -> None:
    other = _event(1)
    other["metadata"]["namespace"] = "web"
    api.add(EVENTS, _event(0), other)
    api.fault(EVENTS, Fault(http_status=503))  # the first watch fails once, then is retried
    assert _collect(tmp_path, _config(tmp_path, api.url, ["events"], namespaces=["ml"])) == 0
    assert [r["victim_job_id"] for r in _rows(tmp_path, "SELECT * FROM preemption_links")] == ["pod-uid-0000"]
    assert [r["stream"] for r in _rows(tmp_path, "SELECT stream FROM _watermarks")] == ["events@ml"]
    paths = {p for p, _, _ in api.requests}
    # the namespace's events, and the victim its event names read back (corroborate), in that namespace only
    assert paths == {"/api/v1/namespaces/ml/events", "/api/v1/namespaces/ml/pods/victim-0"}
    assert len(api.watch_requests("/api/v1/namespaces/ml/events")) == 2
