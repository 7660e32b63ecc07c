"""Alert webhooks against a real local HTTP receiver: failures, timeouts, restarts, exactly once."""

from __future__ import annotations

import hashlib
import hmac
import itertools
import json
import logging
import threading
import time
from collections.abc import Iterator
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

import polars as pl
import pytest

from preemptlens.analytics import alerts
from preemptlens.analytics.alerts import Alert, Target, deliver, evaluate, targets_from_config
from preemptlens.analytics.params import AnalyticsSettings
from preemptlens.analytics.refresh import analyze
from preemptlens.config import Config, Secret, load_config
from preemptlens.errors import ConfigError
from preemptlens.warehouse import Warehouse
from tests.people.people_seed import load_rows

NOW = datetime(2026, 11, 2, 12, 0, tzinfo=UTC)
URL_TOKEN = "hook-t0ken-5ecret"
SIGNING_KEY = "signing-k3y-5ecret"


@dataclass
class Receiver:
    """A webhook receiver that answers from a script of behaviours: 500, 'slow' (answers
    200 after the client gave up), then 200. It records what it processed, as a real
    idempotent receiver would, by delivery id."""

    script: list[str] = field(default_factory=list)
    slow_s: float = 1.0
    requests: list[dict[str, Any]] = field(default_factory=list)
    processed: dict[str, int] = field(default_factory=dict)
    lock: threading.Lock = field(default_factory=threading.Lock)
    port: int = 0

    def url(self, path: str = f"/hooks/{URL_TOKEN}") -> str:
        return f"http://127.0.0.1:{self.port}{path}"


@pytest.fixture
def receiver() -> Iterator[Receiver]:
    state = Receiver()

    class Handler(BaseHTTPRequestHandler):
        def do_POST(self) -> None:
            body = self.rfile.read(int(self.headers["Content-Length"]))
            with state.lock:
                behaviour = state.script.pop(0) if state.script else "ok"
                state.requests.append(
                    {"path": self.path, "headers": dict(self.headers), "body": body, "behaviour": behaviour}
                )
            if behaviour == "fail":
                self.send_response(500)
                self.end_headers()
                return
            if behaviour.startswith("redirect"):
                # "redirect" points elsewhere on this server; a client that follows it shows up there.
                self.send_response(int(behaviour.removeprefix("redirect") or 302))
                self.send_header("Location", f"http://127.0.0.1:{state.port}/elsewhere")
                self.end_headers()
                return
            if behaviour == "slow":
                time.sleep(state.slow_s)
            delivery = self.headers["X-Preemptlens-Delivery"]
            with state.lock:
                state.processed[delivery] = state.processed.get(delivery, 0) + 1
            self.send_response(200)
            self.end_headers()
            self.wfile.write(b"ok")

        def do_GET(self) -> None:
            with state.lock:
                state.requests.append({"path": self.path, "headers": dict(self.headers), "body": b"",
                                       "behaviour": "GET"})
            self.send_response(200)
            self.end_headers()

        def log_message(self, format: str, *args: object) -> None:
            del format, args

    server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    state.port = server.server_address[1]
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    yield state
    server.shutdown()
    server.server_close()


@dataclass(frozen=True)
class FixedRule:
    """A test rule whose alerts the test controls."""

    keys: tuple[str, ...]
    name: str = "fixed"

    def evaluate(self, wh: Warehouse, config: Config, now: datetime) -> list[Alert]:
        del wh, config
        return [
            Alert(k, self.name, "platform", f"alert {k}", f"something about {k} at {now:%H:%M}", {"key": k})
            for k in self.keys
        ]


def config_with(tmp_path: Path, receiver: Receiver, monkeypatch: pytest.MonkeyPatch, fmt: str = "json") -> Config:
    monkeypatch.setenv("HOOK_URL", receiver.url())
    monkeypatch.setenv("TEAM_HOOK", receiver.url(f"/team/{URL_TOKEN}"))
    monkeypatch.setenv("HOOK_KEY", SIGNING_KEY)
    path = tmp_path / "c.toml"
    path.write_text(
        "[alerts]\n"
        'webhook_url = { "$env" = "HOOK_URL" }\n'
        'signing_key = { "$env" = "HOOK_KEY" }\n'
        f'format = "{fmt}"\n'
        'team_webhooks = { nlp = { "$env" = "TEAM_HOOK" } }\n'
        "timeout_s = 0.3\n"
        "backoff_s = 1.0\n"
        # The receivers listen on loopback: allowed as an operator allows a receiver on its own network.
        "allow_private_addresses = true\n"
    )
    return load_config(str(path))


def send_due(wh: Warehouse, config: Config, now: datetime) -> alerts.DeliveryReport:
    return deliver(wh, targets_from_config(config), now, timeout_s=0.3, backoff_s=1.0, max_backoff_s=8.0,
                   allow_private_addresses=True)


def states(wh: Warehouse) -> dict[str, tuple[str, int]]:
    rows = wh.query("SELECT dedupe_key, state, attempts FROM alerts").iter_rows()
    return {k: (s, a) for k, s, a in rows}


def test_failures_timeouts_restart_and_exactly_once(
    tmp_path: Path, receiver: Receiver, monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.DEBUG)
    config = config_with(tmp_path, receiver, monkeypatch)
    rule = FixedRule(("a1", "a2", "a3"))
    path = tmp_path / "w.duckdb"
    wh = Warehouse(path)
    targets = targets_from_config(config)
    assert evaluate(wh, config, targets, NOW, [rule]) == 3
    assert evaluate(wh, config, targets, NOW, [rule]) == 0, "evaluating again must not add alerts"

    # a1: 500, a2: ok, a3: answered after the client's timeout (the 2xx is lost).
    receiver.script = ["fail", "ok", "slow"]
    report = send_due(wh, config, NOW)
    assert (report.sent, report.failed) == (1, 2)
    assert states(wh) == {"a1": ("failed", 1), "a3": ("failed", 1), "a2": ("sent", 1)}
    errors = dict(wh.query("SELECT dedupe_key, last_error FROM alerts WHERE state = 'failed'").iter_rows())
    assert errors["a1"] == "HTTP 500"
    assert "timed out" in errors["a3"]

    # Not yet due: the backoff (1 s after the first failure) has not passed.
    assert send_due(wh, config, NOW).sent == 0
    sent_before = len(receiver.requests)

    # A restart: the process dies, a new one opens the warehouse and resumes the pending deliveries.
    wh.close()
    time.sleep(receiver.slow_s)  # let the slow request finish on the receiver's side
    wh = Warehouse(path)
    receiver.script = ["fail"]  # a1 fails once more, then the receiver has recovered
    later = datetime.now(UTC) + timedelta(seconds=2)
    report = send_due(wh, config, later)
    assert (report.sent, report.failed) == (1, 1)
    report = send_due(wh, config, later + timedelta(seconds=10))
    assert (report.sent, report.failed) == (1, 0)
    assert {k: s for k, (s, _) in states(wh).items()} == {"a1": "sent", "a2": "sent", "a3": "sent"}
    assert states(wh)["a1"][1] == 3

    # Sent alerts are never sent again, whatever happens next.
    count = len(receiver.requests)
    assert send_due(wh, config, later + timedelta(days=1)).sent == 0
    assert evaluate(wh, config, targets, later + timedelta(days=1), [rule]) == 0
    assert len(receiver.requests) == count > sent_before

    # Exactly once, by delivery id: every alert processed once, except a3, whose first 2xx was lost
    # in the timeout; its retry carries the same id, so an idempotent receiver drops it.
    assert set(receiver.processed) == {"a1", "a2", "a3"}
    assert receiver.processed["a1"] == receiver.processed["a2"] == 1
    assert receiver.processed["a3"] == 2
    a3_ids = {r["headers"]["X-Preemptlens-Delivery"] for r in receiver.requests if b'"a3"' in r["body"]}
    assert a3_ids == {"a3"}

    # Every request is signed: HMAC-SHA256 over "<timestamp>.<body>" with the signing key.
    for request in receiver.requests:
        headers = request["headers"]
        expected = hmac.new(
            SIGNING_KEY.encode(), headers["X-Preemptlens-Timestamp"].encode() + b"." + request["body"], hashlib.sha256
        ).hexdigest()
        assert headers["X-Preemptlens-Signature"] == f"sha256={expected}"
        body = json.loads(request["body"])
        assert body["rule"] == "fixed" and body["facts"] == {"key": body["dedupe_key"]}

    # No secret in the logs or anywhere in the warehouse file.
    wh.close()
    logged = caplog.text
    assert "a1" in logged and "failed" in logged
    for secret in (URL_TOKEN, SIGNING_KEY, "127.0.0.1"):
        assert secret not in logged
    raw = path.read_bytes() + (Path(f"{path}.wal").read_bytes() if Path(f"{path}.wal").exists() else b"")
    with Warehouse(path) as check:
        dump = check.query("SELECT * FROM alerts").write_json()
    for secret in (URL_TOKEN, SIGNING_KEY):
        assert secret.encode() not in raw
        assert secret not in dump


def test_unreachable_webhook_is_retried_with_backoff(tmp_path: Path) -> None:
    wh = Warehouse(tmp_path / "w.duckdb")
    # A port nobody listens on: connection refused.
    target = Target("platform", Secret(f"http://127.0.0.1:9/{URL_TOKEN}"))
    config = load_config(overrides={})
    evaluate(wh, config, {"platform": target}, NOW, [FixedRule(("x",))])
    retry_times = []
    now = NOW
    for _ in range(4):
        deliver(wh, {"platform": target}, now, timeout_s=0.3, backoff_s=10.0, max_backoff_s=35.0,
                allow_private_addresses=True)
        row = wh.query("SELECT attempts, next_attempt_at, last_error FROM alerts").row(0, named=True)
        retry_times.append(row["next_attempt_at"])
        assert row["last_error"].startswith("cannot connect") and URL_TOKEN not in row["last_error"]
        now = row["next_attempt_at"]
    gaps = [(b - a).total_seconds() for a, b in itertools.pairwise(retry_times)]
    # Waits of 10, 20, 40 s, capped at 35 s.
    assert gaps == [20.0, 35.0, 35.0]
    assert wh.query("SELECT state, attempts FROM alerts").row(0) == ("failed", 4)


def seed_preemptions(wh: Warehouse) -> None:
    t = NOW - timedelta(hours=3)
    load_rows(
        wh,
        "jobs",
        cluster=["c1"] * 4,
        job_id=["100", "101", "200", "201"],
        name=["pretrain", "serve-prod", "old-victim", "finetune"],
        team=["nlp", "infer", "nlp", "vision"],
        tier=["low", "critical", "low", "normal"],
        preemptible=[True, False, True, True],
        gpus=[16, 8, 4, 2],
        submit_time=[t - timedelta(days=5)] * 4,
    )
    runs = [
        # Job 200 was preempted 3 days ago and restarted 10 min later: the history of pool a100.
        ("200", 1, "a100", t - timedelta(days=3, hours=1), t - timedelta(days=3), "preempted", "101"),
        ("200", 2, "a100", t - timedelta(days=3) + timedelta(minutes=10), t - timedelta(days=2), "completed", None),
        # Job 100 was preempted 1 hour ago by 101 (named only in preemption_links) and has not restarted.
        ("100", 1, "a100", t, NOW - timedelta(hours=1), "preempted", None),
        # Job 201's team has no webhook: no notice is recorded.
        ("201", 1, "a100", t, NOW - timedelta(hours=2), "preempted", "101"),
    ]
    load_rows(
        wh,
        "job_runs",
        cluster=["c1"] * len(runs),
        job_id=[r[0] for r in runs],
        run=[r[1] for r in runs],
        pool=[r[2] for r in runs],
        gpus=[16, 16, 16, 2],
        start_time=[r[3] for r in runs],
        end_time=[r[4] for r in runs],
        state=[r[5] for r in runs],
        preemptor_job_id=[r[6] for r in runs],
    )
    load_rows(
        wh,
        "preemption_links",
        cluster=["c1"],
        victim_job_id=["100"],
        time=[NOW - timedelta(hours=1) + timedelta(seconds=20)],
        preemptor_job_id=["101"],
        reason=["preempted by higher partition priority"],
    )
    analyze(wh, load_config(overrides={}).of(AnalyticsSettings))


def test_victim_notice_to_team_webhook_slack_format(
    tmp_path: Path, receiver: Receiver, monkeypatch: pytest.MonkeyPatch
) -> None:
    config = config_with(tmp_path, receiver, monkeypatch, fmt="slack")
    wh = Warehouse(tmp_path / "w.duckdb")
    seed_preemptions(wh)
    report = alerts.run(wh, config, NOW)
    assert (report.sent, report.failed) == (1, 0)
    rows = wh.query("SELECT dedupe_key, target, state, payload FROM alerts")
    assert rows["dedupe_key"].to_list() == ["victim_notice:c1:100:1"], "only recent victims of teams with a webhook"
    assert rows["target"].to_list() == ["team:nlp"] and rows["state"].to_list() == ["sent"]
    facts = json.loads(rows["payload"][0])["facts"]
    assert facts["preemptor_job_id"] == "101" and facts["preemptor_tier"] == "critical"
    # the low tier's two victims (too few for their pool's own estimate): 200 restarted after 10 min, 100 still
    # waits, censored at the data's end (its own preemption)
    assert facts["expected_requeue_s"] == 600.0 and facts["requeue_group"] == "tier"
    assert (facts["requeue_victims"], facts["requeue_restarted"]) == (2, 1)

    (request,) = receiver.requests
    assert request["path"] == f"/team/{URL_TOKEN}"
    body = json.loads(request["body"])
    text = body["text"]
    assert "Job 100 (pretrain) of team nlp, run 1 (tier low), was preempted at 2026-11-02 11:00 UTC" in text
    assert "job 101 (tier critical)" in text and "about 10 min" in text
    assert [b["type"] for b in body["blocks"]] == ["header", "section", "context"]
    assert alerts.run(wh, config, NOW + timedelta(minutes=5)).sent == 0


def test_victim_notice_names_another_teams_preemptor_only_where_the_dashboard_would(
    tmp_path: Path, receiver: Receiver, monkeypatch: pytest.MonkeyPatch
) -> None:
    """With masking.show_other_teams_jobs off, team nlp's notice says a job of another team (its tier) took its
    GPUs: infer's job id, name and user are nowhere in the text, the scheduler's reason or the facts; nlp's own
    job is named in full."""
    monkeypatch.setenv("PREEMPTLENS_MASKING__SHOW_OTHER_TEAMS_JOBS", "false")
    config = config_with(tmp_path, receiver, monkeypatch)
    wh = Warehouse(tmp_path / "w.duckdb")
    seed_preemptions(wh)
    wh.con.execute("UPDATE jobs SET user_name = 'carol' WHERE job_id = '101'")
    wh.con.execute("UPDATE preemption_links SET reason = 'preempted by job 101 (serve-prod, user carol)'")
    analyze(wh, load_config(overrides={}).of(AnalyticsSettings), full=True)
    (notice,) = [a for a in alerts.VictimNotice().evaluate(wh, config, NOW) if a.target == "team:nlp"]
    assert "a job of another team (tier critical)" in notice.text
    assert "preempted by job (another team) ((another team), user (another team))" in notice.text, notice.text
    shown = notice.title + notice.text + json.dumps(notice.facts, default=str)
    for secret in ("101", "serve-prod", "carol"):
        assert secret not in shown, secret
    assert "Job 100 (pretrain) of team nlp" in notice.text
    # Shown, as on the dashboard, it names the job.
    monkeypatch.setenv("PREEMPTLENS_MASKING__SHOW_OTHER_TEAMS_JOBS", "true")
    (named,) = [a for a in alerts.VictimNotice().evaluate(wh, config_with(tmp_path, receiver, monkeypatch), NOW)
                if a.target == "team:nlp"]
    assert "job 101 (tier critical)" in named.text and "preempted by job 101" in named.text


def test_victim_notices_follow_the_ledgers_preemptions(
    tmp_path: Path, receiver: Receiver, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Slurm with PreemptMode=REQUEUE: the victim's run ends `requeued` and only the slurmctld log's link names
    the preemption; the requeued job's next run ends within the link tolerance. One notice, for the run the
    link binds to."""
    config = config_with(tmp_path, receiver, monkeypatch)
    wh = Warehouse(tmp_path / "w.duckdb")
    seed_preemptions(wh)
    at = NOW - timedelta(minutes=30)
    wh.load("jobs", pl.DataFrame({
        "cluster": ["c1"], "job_id": ["300"], "name": ["eval"], "team": ["nlp"], "tier": ["low"],
        "preemptible": [True], "gpus": [4], "submit_time": [at - timedelta(hours=2)],
    }), "test")
    wh.load("job_runs", pl.DataFrame({
        "cluster": ["c1", "c1"], "job_id": ["300", "300"], "run": [1, 2], "pool": ["a100", "a100"], "gpus": [4, 4],
        "start_time": [at - timedelta(hours=1), at + timedelta(seconds=30)],
        "end_time": [at, at + timedelta(seconds=90)], "state": ["requeued", "completed"],
    }), "test")
    wh.load("preemption_links", pl.DataFrame({
        "cluster": ["c1"], "victim_job_id": ["300"], "time": [at], "preemptor_job_id": ["101"], "reason": ["prio"],
    }), "test")
    analyze(wh, load_config(overrides={}).of(AnalyticsSettings))
    alerts.run(wh, config, NOW)
    keys = wh.query("SELECT dedupe_key FROM alerts ORDER BY dedupe_key")["dedupe_key"].to_list()
    assert keys == ["victim_notice:c1:100:1", "victim_notice:c1:300:1"]


def test_victim_notice_links_to_my_preemptions(
    tmp_path: Path, receiver: Receiver, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("PREEMPTLENS_ALERTS__DASHBOARD_URL", "https://preemptlens.example.org/")
    config = config_with(tmp_path, receiver, monkeypatch)
    wh = Warehouse(tmp_path / "w.duckdb")
    seed_preemptions(wh)
    assert alerts.run(wh, config, NOW).sent == 1
    text = json.loads(wh.query("SELECT payload FROM alerts")["payload"][0])["text"]
    assert text.endswith(" Details: https://preemptlens.example.org/mine?cluster=c1&job=100")


def test_clear_url_in_team_webhooks_is_refused_when_the_config_is_read(tmp_path: Path) -> None:
    path = tmp_path / "c.toml"
    path.write_text(f'[alerts]\nteam_webhooks = {{ nlp = "https://hooks.example/{URL_TOKEN}" }}\n')
    expected = r"alerts\.team_webhooks: nlp: a webhook URL must be given by reference"
    with pytest.raises(ConfigError, match=expected) as info:
        load_config(str(path))
    assert URL_TOKEN not in str(info.value)


def test_unknown_rule_is_a_config_error(tmp_path: Path) -> None:
    config = load_config(overrides={"alerts.rules": ["victim_notice", "nope"]})
    with Warehouse(tmp_path / "w.duckdb") as wh, pytest.raises(ConfigError, match=r"unknown rule\(s\) \['nope'\]"):
        evaluate(wh, config, {}, NOW)


@pytest.mark.parametrize("status", [301, 302, 303, 307, 308])
def test_a_redirect_is_a_failed_delivery_never_followed(
    tmp_path: Path, receiver: Receiver, monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture,
    status: int,
) -> None:
    caplog.set_level(logging.DEBUG)
    config = config_with(tmp_path, receiver, monkeypatch)
    wh = Warehouse(tmp_path / "w.duckdb")
    evaluate(wh, config, targets_from_config(config), NOW, [FixedRule(("r1",))])
    receiver.script = [f"redirect{status}", f"redirect{status}"]
    assert (send_due(wh, config, NOW).failed, send_due(wh, config, NOW + timedelta(seconds=5)).failed) == (1, 1)
    assert [r["path"] for r in receiver.requests] == [f"/hooks/{URL_TOKEN}"] * 2, "the Location was never visited"
    row = wh.query("SELECT state, attempts, last_error FROM alerts").row(0)
    assert row == ("failed", 2, f"HTTP {status} (a redirect, not followed)")
    assert "r1" in caplog.text and f"HTTP {status}" in caplog.text
    # Retried until the receiver takes it.
    assert send_due(wh, config, NOW + timedelta(seconds=30)).sent == 1
    assert receiver.processed == {"r1": 1}


@pytest.mark.parametrize(
    ("url", "error"),
    [
        (f"file:///tmp/{URL_TOKEN}", "the webhook URL is not http or https"),
        (f"ftp://127.0.0.1/{URL_TOKEN}", "the webhook URL is not http or https"),
        (f"data:,{URL_TOKEN}", "the webhook URL is not http or https"),
        (f"http://127.0.0.1:1/{URL_TOKEN} with space", "InvalidURL"),
        (f"http://127.0.0.1:port{URL_TOKEN}/x", "InvalidURL"),
        (f"http://127.0.0.1:9/{URL_TOKEN}", "cannot connect: ConnectionRefusedError (errno 111)"),
    ],
)
def test_bad_webhook_urls_fail_and_no_part_of_the_url_is_kept(
    tmp_path: Path, caplog: pytest.LogCaptureFixture, url: str, error: str
) -> None:
    caplog.set_level(logging.DEBUG)
    wh = Warehouse(tmp_path / "w.duckdb")
    target = Target("platform", Secret(url))
    evaluate(wh, load_config(overrides={}), {"platform": target}, NOW, [FixedRule(("u1",))])
    report = deliver(wh, {"platform": target}, NOW, timeout_s=0.5, allow_private_addresses=True)
    assert (report.sent, report.failed) == (0, 1)
    state, last_error = wh.query("SELECT state, last_error FROM alerts").row(0)
    assert state == "failed" and last_error.startswith(error)
    for part in (URL_TOKEN, "127.0.0.1", "tmp", "space"):
        assert part not in last_error and part not in caplog.text


def test_slack_text_escapes_markup_from_the_data() -> None:
    target = Target("platform", Secret("http://127.0.0.1:9/x"), "slack")
    row = {"title": "Job <!channel> was preempted", "rule": "victim_notice", "dedupe_key": "k",
           "payload": json.dumps({"text": "Job a&b <https://evil|click> of team <@U123>", "facts": {}}),
           "created_at": NOW}
    body = json.loads(alerts.render(target, row))
    # Slack's own markup is escaped; a URL and a mention are broken apart by an invisible word joiner.
    escaped = "Job a&amp;b &lt;https:\u2060//evil|click&gt; of team &lt;@\u2060U123&gt;"
    assert body["text"] == "Job &lt;!channel&gt; was preempted\n" + escaped
    section = body["blocks"][1]["text"]["text"]
    assert section == escaped
    assert "<" not in json.dumps([body["text"], section]) and body["blocks"][0]["text"]["type"] == "plain_text"
    generic = json.loads(alerts.render(Target("platform", Secret("http://127.0.0.1:9/x")), row))
    assert generic["dedupe_key"] == "k" and generic["title"] == "Job <!channel> was preempted"


def test_victim_notice_says_when_an_action_held_the_job_and_why(
    tmp_path: Path, receiver: Receiver, monkeypatch: pytest.MonkeyPatch
) -> None:
    config = config_with(tmp_path, receiver, monkeypatch)
    wh = Warehouse(tmp_path / "w.duckdb")
    seed_preemptions(wh)
    since = NOW - timedelta(hours=2)
    # An older hold that ended, then the boost in force when job 100 was preempted (NOW - 1 h).
    for applied, level, undone, undo_why in ((since - timedelta(hours=5), 100, since - timedelta(hours=4), "x"),
                                             (since, 200, None, None)):
        wh.con.execute(
            "INSERT INTO actions (action, scheduler, cluster, job_id, level, mode, why, cost_gpu_s, applied_at, "
            "held_since, undone_at, undo_why) VALUES ('kueue_boost', 'kueue', 'c1', '100', $l, 'enforce', "
            "'live cost 12.0 GPU-h >= kueue_boost.cost_high_gpu_s (8.0 GPU-h)', 43200, $a, $a, $u, $w)",
            {"l": level, "a": applied, "u": undone, "w": undo_why})
    assert alerts.run(wh, config, NOW).sent == 1
    text = json.loads(wh.query("SELECT payload FROM alerts")["payload"][0])["text"]
    assert text.endswith(
        " Actions: preemptlens boosted it at level 200 from 2026-11-02 10:00 UTC (kueue_boost) because live cost "
        "12.0 GPU-h >= kueue_boost.cost_high_gpu_s (8.0 GPU-h); the boost was in force when it was preempted.")
