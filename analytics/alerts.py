"""Alert rules and webhook delivery with its state in the warehouse.

A rule looks at the warehouse and returns `Alert`s; each alert has a dedupe
key built from what it is about, so evaluating again finds nothing new. New
alerts go into the `alerts` table (sql/schema/0004_alerts.sql) as pending;
delivery posts the due ones to their webhook and marks a row sent only after
a 2xx answer. A failure (error status, a redirect, which is never followed,
refused connection, timeout, a URL that is not http or https) is recorded as
the exception's class, status code or errno only, never any part of the URL,
and retried with exponential backoff, also after a restart, because the state
lives in the warehouse.

Exactly once: no process can make an HTTP call and a database commit one
atomic step. If the receiver's 2xx is lost (timeout, crash before the
commit), the alert is sent again with the same `X-Preemptlens-Delivery`
header, the dedupe key; receivers drop a delivery id they have already
processed. Payloads can be signed: `X-Preemptlens-Signature: sha256=<hex>`
is HMAC-SHA256 with the signing key over `<X-Preemptlens-Timestamp>.<body>`.

Rules are pluggable: `register_rule` adds one to `RULES`, and `alerts.rules`
chooses which run. Webhook URLs and signing keys are secrets: never logged,
never stored, removed from recorded errors.
"""

from __future__ import annotations

import hashlib
import hmac
import http.client
import json
import logging
import socket
import time
import urllib.parse
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from typing import Any, Protocol

import polars as pl

from preemptlens import __version__, escape, outbound
from preemptlens.analytics.actions import HOLD_COLUMNS, hold_join, hold_text
from preemptlens.analytics.pilot import PilotSettings, declared
from preemptlens.analytics.pilot import evaluate as evaluate_pilot
from preemptlens.analytics.requeue import ESTIMATE_COLUMNS, estimate_join, restart_text
from preemptlens.config import Config, Secret, http_url, is_reference, resolve_reference, section, setting
from preemptlens.errors import ConfigError, PreemptlensError
from preemptlens.reading.masking import hides, mask, team_scope
from preemptlens.reading.words import POINTS, SHARE, change, duration, gpu_hours, gpus, number, pct, plural, quantity
from preemptlens.warehouse import Warehouse

log = logging.getLogger(__name__)

FORMATS = ("json", "slack")
PLATFORM = "platform"
DELIVERY_HEADER = "X-Preemptlens-Delivery"
TIMESTAMP_HEADER = "X-Preemptlens-Timestamp"
SIGNATURE_HEADER = "X-Preemptlens-Signature"
# The dashboard's path of My preemptions (dashboards/app.py serves the page there), which notices link to.
MY_PREEMPTIONS_PATH = "mine"


@section(
    "alerts",
    "Alert rules and their webhooks (docs: analytics/alerts.py). URLs and keys are secrets: give them by reference.",
)
@dataclass(frozen=True)
class AlertsSettings:
    rules: list[str] = setting(["victim_notice"], "Names of the alert rules to evaluate.")
    webhook_url: Secret | None = setting(
        None,
        "Webhook of the platform team, which receives the rule alerts.",
        check=http_url,
    )
    team_webhooks: dict[str, Any] = setting(
        {},
        'Webhook of each victim team for per-victim notices: team = { "$env" = "NAME" } or '
        '{ "$file" = "/path" }; a URL written in clear is refused.',
        check=lambda value: _check_team_webhooks(value),  # defined below, with its helpers
    )
    format: str = setting("json", "Payload format of every webhook.", choices=FORMATS)
    dashboard_url: str = setting(
        "",
        "Public URL of the dashboard (e.g. https://preemptlens.example.org); per-victim notices then link to "
        "its My preemptions page, opened on the preempted job. Empty: no link.",
        check=http_url,
    )
    signing_key: Secret | None = setting(None, "Key for the HMAC-SHA256 signature header; unset sends no signature.")
    timeout_s: float = setting(
        10.0,
        "Seconds one delivery may take in all (connecting, sending, the whole answer); a receiver that answers "
        "slowly is cut off then.",
        bounds=(0.1, 300),
    )
    allow_private_addresses: bool = setting(
        False,
        "Deliver to a webhook whose host resolves to a loopback, private, link-local or other non-public address "
        "(a receiver on this host or the internal network). Off: such a delivery fails, so that a name pointed at "
        "an internal service (another user's listener on this host, a cloud's metadata address) receives nothing.",
    )
    round_s: float = setting(
        60.0,
        "Seconds one round of deliveries may take; alerts still due wait for the next round, and a receiver "
        "that timed out is not tried again in the same round.",
        bounds=(1, 3600),
    )
    backoff_s: float = setting(
        30.0, "Wait before the first retry of a failed delivery; doubles each time.",
        bounds=(1, 86_400),
    )
    max_backoff_s: float = setting(
        3600.0, "Longest wait between retries; deliveries are retried until sent.",
        bounds=(1, 30 * 86_400),
    )
    lookback_s: float = setting(
        86400.0,
        "Only events this recent (seconds) raise alerts, so that enabling a webhook does not replay history.",
        bounds=(60, 366 * 86_400),
    )
    scope_creep_slope: float = setting(
        0.02,
        "scope_creep fires when a pool's high-tier share of GPU-hours grows faster than this per week.",
        bounds=(0, 1),
    )
    hoarding_gpu_hours: float = setting(
        50.0,
        "idle_hoarding fires when a team's idle-hoarded GPU-hours within the lookback exceed this.",
        bounds=(0, 1e9),
    )


SETTINGS = AlertsSettings


@dataclass(frozen=True)
class Alert:
    dedupe_key: str
    rule: str
    target: str
    title: str
    text: str
    facts: Mapping[str, Any] = field(default_factory=dict)
    # A link of preemptlens's own (alerts.dashboard_url), already at the end of `text` for generic JSON;
    # Slack gets it as a link of its own, the data's text escaped around it.
    link: str | None = None


class Rule(Protocol):
    @property
    def name(self) -> str: ...

    def evaluate(self, wh: Warehouse, config: Config, now: datetime) -> list[Alert]: ...


RULES: dict[str, Rule] = {}


def register_rule(rule: Rule) -> Rule:
    RULES[rule.name] = rule
    return rule


@dataclass(frozen=True)
class Target:
    name: str
    url: Secret
    format: str = "json"
    signing_key: Secret | None = None


def team_target(team: str) -> str:
    return f"team:{team}"


def _team_webhook(team: str, value: object, problems: list[str]) -> str | None:
    """A team's webhook URL from its reference; a URL written in clear is refused (it is a secret)."""
    if isinstance(value, Secret):
        return value.reveal()
    if not is_reference(value):
        problems.append(
            f"{team}: a webhook URL must be given by reference, "
            'write { "$env" = "NAME" } or { "$file" = "/path" } instead of the URL'
        )
        return None
    url = resolve_reference(value, team, problems)
    if url is not None and (expected := http_url(url)) is not None:
        problems.append(f"{team}: {expected}")
        return None
    return str(url) if url is not None else None


def _check_team_webhooks(value: Mapping[str, object]) -> str | None:
    problems: list[str] = []
    for team, ref in value.items():
        _team_webhook(str(team), ref, problems)
    return "; ".join(problems) or None


def targets_from_config(config: Config) -> dict[str, Target]:
    settings = config.of(AlertsSettings)
    fmt = settings.format
    key = settings.signing_key
    targets: dict[str, Target] = {}
    if settings.webhook_url is not None:
        targets[PLATFORM] = Target(PLATFORM, settings.webhook_url, fmt, key)
    for team, ref in settings.team_webhooks.items():
        problems: list[str] = []
        url = _team_webhook(team, ref, problems)
        if url is None:
            raise ConfigError(f"alerts.team_webhooks: {'; '.join(problems)}")
        targets[team_target(team)] = Target(team_target(team), Secret(url), fmt, key)
    return targets


# -- evaluation -------------------------------------------------------------


def evaluate(
    wh: Warehouse,
    config: Config,
    targets: Mapping[str, Target],
    now: datetime,
    rules: Iterable[Rule] | None = None,
) -> int:
    """Run the rules and record new alerts as pending; return how many were new."""
    if rules is None:
        names = list(config.of(AlertsSettings).rules)
        unknown = [n for n in names if n not in RULES]
        if unknown:
            raise ConfigError(f"alerts.rules: unknown rule(s) {unknown}", f"known rules: {sorted(RULES)}")
        rules = [RULES[n] for n in names]
    found: dict[str, Alert] = {}
    unrouted: dict[str, int] = {}
    for rule in rules:
        for alert in rule.evaluate(wh, config, now):
            if alert.target not in targets:
                unrouted[alert.target] = unrouted.get(alert.target, 0) + 1
                continue
            found.setdefault(alert.dedupe_key, alert)
    for target, count in sorted(unrouted.items()):
        log.info("%d alert(s) for %s not recorded: no webhook configured for it", count, target)
    if not found:
        return 0
    frame = pl.DataFrame(
        {
            "dedupe_key": [a.dedupe_key for a in found.values()],
            "rule": [a.rule for a in found.values()],
            "target": [a.target for a in found.values()],
            "title": [a.title for a in found.values()],
            "payload": [json.dumps({"text": a.text, "facts": dict(a.facts), "link": a.link}, default=str)
                        for a in found.values()],
        }
    )
    wh.con.register("_new_alerts", frame.to_arrow())
    try:
        with wh.transaction():
            before = _count(wh)
            wh.con.execute(
                "INSERT INTO alerts (dedupe_key, rule, target, title, payload, created_at, state, attempts, "
                "next_attempt_at) SELECT n.dedupe_key, n.rule, n.target, n.title, n.payload, $now, 'pending', 0, "
                "$now FROM _new_alerts n ANTI JOIN alerts a ON a.dedupe_key = n.dedupe_key",
                {"now": now},
            )
            added = _count(wh) - before
    finally:
        wh.con.unregister("_new_alerts")
    log.info("%d new alert(s), %d already known", added, len(found) - added)
    return added


def _count(wh: Warehouse) -> int:
    rows = wh.con.execute("SELECT count(*) FROM alerts").fetchall()
    return int(rows[0][0])


# -- delivery ---------------------------------------------------------------


@dataclass
class DeliveryReport:
    sent: int = 0
    failed: int = 0
    # Due but not tried this round: its receiver had just failed, or the round's time was up.
    postponed: int = 0


def render(target: Target, row: Mapping[str, Any]) -> bytes:
    """The request body for one alert in the target's format."""
    payload = json.loads(row["payload"])
    if target.format == "slack":
        # Slack reads &, < and > in text as markup (<!channel> pings a channel, <url|label> is a link), *_~`
        # as formatting, and links bare URLs: the title and text are made of values from the data (job names,
        # reasons), so all is escaped (preemptlens.escape.slack); preemptlens's own link comes apart.
        text, link = str(payload["text"]), payload.get("link")
        if link and text.endswith(f" Details: {link}"):
            text = text.removesuffix(f" Details: {link}")
        elements = [{"type": "mrkdwn", "text": escape.slack(f"preemptlens · {row['rule']}")}]
        if link:
            elements.append({"type": "mrkdwn", "text": f"<{_slack_url(link)}|My preemptions>"})
        body: dict[str, Any] = {
            "text": escape.slack(f"{row['title']}\n{text}"),
            "blocks": [
                {"type": "header", "text": {"type": "plain_text", "text": row["title"][:150]}},
                {"type": "section", "text": {"type": "mrkdwn", "text": escape.slack(text)}},
                {"type": "context", "elements": elements},
            ],
        }
    else:
        body = {
            "dedupe_key": row["dedupe_key"],
            "rule": row["rule"],
            "title": row["title"],
            "text": payload["text"],
            "facts": payload["facts"],
            "created_at": row["created_at"].isoformat(),
        }
    return json.dumps(body, sort_keys=True).encode()


def _slack_url(url: str) -> str:
    # Inside <url|label>, & < > are entities and | would end the URL.
    return url.replace("&", "&amp;").replace("<", "%3C").replace(">", "%3E").replace("|", "%7C")


def sign(key: str, timestamp: str, body: bytes) -> str:
    digest = hmac.new(key.encode(), timestamp.encode() + b"." + body, hashlib.sha256).hexdigest()
    return f"sha256={digest}"


class _NotDelivered(Exception):
    """A webhook answered but did not take the alert (a redirect), or cannot be posted to at all."""


def _post(target: Target, dedupe_key: str, body: bytes, timeout_s: float, now: datetime,
          allow_private: bool = False) -> None:
    """One delivery: the whole exchange, name resolution included, within `timeout_s` and at most 64 KiB of
    the answer read (preemptlens.outbound), whatever the receiver does. No redirect is followed: a 3xx is a
    failed delivery; following it would post the alert, signature headers and all, to wherever the receiver
    points. A host resolving to a non-public address is refused unless `allow_private`
    (alerts.allow_private_addresses)."""
    url = target.url.reveal()
    if urllib.parse.urlsplit(url).scheme.lower() not in _SCHEMES:
        raise _NotDelivered("the webhook URL is not http or https")
    timestamp = str(int(now.timestamp()))
    headers = {
        "Content-Type": "application/json",
        "User-Agent": f"preemptlens/{__version__}",
        DELIVERY_HEADER: dedupe_key,
        TIMESTAMP_HEADER: timestamp,
    }
    if target.signing_key is not None and target.signing_key.reveal():
        headers[SIGNATURE_HEADER] = sign(target.signing_key.reveal(), timestamp, body)
    try:
        status = outbound.post(url, body, headers, timeout_s=timeout_s, allow_private=allow_private)
    except outbound.RefusedAddress:
        raise _NotDelivered("the webhook's host resolves to a loopback, private or link-local address; "
                            "set alerts.allow_private_addresses = true if that receiver is meant") from None
    if 300 <= status < 400:
        raise _NotDelivered(f"HTTP {status} (a redirect, not followed)")
    if not 200 <= status < 300:
        raise _NotDelivered(f"HTTP {status}")


_SCHEMES = ("http", "https")


def _describe_failure(exc: Exception) -> str:
    """What went wrong, from the exception's class, status code or errno only: exception texts
    quote the URL (http.client.InvalidURL quotes its path), and the URL is a secret."""
    if isinstance(exc, _NotDelivered | LookupError):
        return str(exc)
    errno = getattr(exc, "errno", None)
    detail = type(exc).__name__ + (f" (errno {errno})" if isinstance(errno, int) else "")
    if isinstance(exc, TimeoutError):
        return f"timed out: {detail}"
    if isinstance(exc, ConnectionError | socket.gaierror) or (isinstance(exc, OSError) and errno is not None):
        return f"cannot connect: {detail}"
    return detail


def backoff(attempts: int, base_s: float, max_s: float) -> float:
    return float(min(base_s * 2 ** max(attempts - 1, 0), max_s))


def deliver(
    wh: Warehouse,
    targets: Mapping[str, Target],
    now: datetime,
    *,
    timeout_s: float = 10.0,
    backoff_s: float = 30.0,
    max_backoff_s: float = 3600.0,
    round_s: float = 60.0,
    allow_private_addresses: bool = False,
) -> DeliveryReport:
    """Post every alert due at `now` once; each outcome is committed before the next post.

    `now` is the clock of the round: retries are scheduled from it. A round ends after `round_s`
    (the rest wait for the next one), and a receiver that timed out or could not be reached is not
    tried again in the same round: a slow or dead receiver costs one timeout per round, and serve's
    other jobs wait no longer than that.
    """
    due = wh.query(
        "SELECT * FROM alerts WHERE state <> 'sent' AND next_attempt_at <= $now ORDER BY created_at, dedupe_key",
        {"now": now},
    )
    report = DeliveryReport()
    ends = time.monotonic() + round_s
    unreachable: set[str] = set()
    for row in due.iter_rows(named=True):
        key = row["dedupe_key"]
        target = targets.get(row["target"])
        if row["target"] in unreachable:
            report.postponed += 1
            continue
        if time.monotonic() >= ends:
            report.postponed += 1
            continue
        try:
            if target is None:
                raise LookupError(f"no webhook configured for {row['target']}")
            _post(target, key, render(target, row), timeout_s, datetime.now(UTC), allow_private_addresses)
        except (OSError, http.client.HTTPException, ValueError, LookupError, _NotDelivered) as exc:
            # Socket errors and timeouts are OSErrors; ValueError is a malformed URL.
            attempts = int(row["attempts"]) + 1
            error = _describe_failure(exc)
            if isinstance(exc, OSError) and not isinstance(exc, outbound.AnswerTooLarge):
                unreachable.add(row["target"])
            retry_at = now + timedelta(seconds=backoff(attempts, backoff_s, max_backoff_s))
            wh.con.execute(
                "UPDATE alerts SET state = 'failed', attempts = $a, next_attempt_at = $next, last_error = $e "
                "WHERE dedupe_key = $k",
                {"a": attempts, "next": retry_at, "e": error, "k": key},
            )
            log.warning(
                "alert %s to %s failed (attempt %d): %s; retry at %s",
                key,
                row["target"],
                attempts,
                error,
                retry_at.isoformat(timespec="seconds"),
            )
            report.failed += 1
            continue
        wh.con.execute(
            "UPDATE alerts SET state = 'sent', attempts = attempts + 1, sent_at = $t, last_error = NULL "
            "WHERE dedupe_key = $k",
            {"t": now, "k": key},
        )
        log.info("alert %s sent to %s", key, row["target"])
        report.sent += 1
    return report


def run(wh: Warehouse, config: Config, now: datetime | None = None) -> DeliveryReport:
    """Evaluate the configured rules, then deliver what is due: the `alerts` job of serve."""
    now = now or datetime.now(UTC)
    targets = targets_from_config(config)
    evaluate(wh, config, targets, now)
    settings = config.of(AlertsSettings)
    return deliver(
        wh,
        targets,
        now,
        timeout_s=settings.timeout_s,
        backoff_s=settings.backoff_s,
        max_backoff_s=settings.max_backoff_s,
        round_s=settings.round_s,
        allow_private_addresses=settings.allow_private_addresses,
    )


# -- rules ------------------------------------------------------------------


def _facts(row: Mapping[str, Any]) -> dict[str, Any]:
    """The alert's machine-readable part: the row it came from, without empty fields."""
    return {k: v for k, v in row.items() if v is not None}


def _platform(rule: str, key: str, row: Mapping[str, Any], title: str, text: str) -> Alert:
    """An alert of `rule` to the platform's webhook, once per `key`, with the row it came from as its facts."""
    return Alert(dedupe_key=f"{rule}:{key}", rule=rule, target=PLATFORM, title=title, text=text, facts=_facts(row))


def my_preemptions_url(dashboard_url: str, cluster: str, job_id: str) -> str:
    """The dashboard's My preemptions page, opened on one job."""
    query = urllib.parse.urlencode({"cluster": cluster, "job": job_id})
    return f"{dashboard_url.rstrip('/')}/{MY_PREEMPTIONS_PATH}?{query}"


@dataclass(frozen=True)
class VictimNotice:
    """A notice to the victim team's webhook for each recent preempted run:
    what happened, why (the preemptor and its tier), and the requeue to expect."""

    name: str = "victim_notice"

    def evaluate(self, wh: Warehouse, config: Config, now: datetime) -> list[Alert]:
        settings = config.of(AlertsSettings)
        rows = _masked_per_team(wh.query(
            _VICTIM_SQL,
            {
                "now": now,
                "since": now - timedelta(seconds=settings.lookback_s),
            },
        ), config)
        alerts = []
        for r in rows.iter_rows(named=True):
            job = r["job_id"] + (f" ({r['name']})" if r["name"] else "")
            tier = f" (tier {r['preemptor_tier']})" if r["preemptor_tier"] else ""
            by = (
                f"a job of another team{tier}" if hides(r["preemptor_job_id"])
                else f"job {r['preemptor_job_id']}{tier}" if r["preemptor_job_id"]
                else "a job the scheduler did not name"
            )
            why = f"the scheduler gave its {gpus(r['gpus'])} to {by}"
            if r["reason"]:
                why += f"; reason given: {r['reason']}"
            if r["restarted_at"] is not None:
                requeue = f"it was requeued and restarted at {r['restarted_at']:%Y-%m-%d %H:%M} UTC"
            else:
                # still waiting at the data's end, for as long as the ledger's requeue delay says
                requeue = restart_text(r, r["tier"], r["pool"], r["waiting_s"], duration)
            text = (
                f"Job {job} of team {r['team']}, run {r['run']} (tier {r['tier']}), was preempted at "
                f"{r['preempted_at']:%Y-%m-%d %H:%M} UTC in pool {r['pool'] or 'unknown'}. "
                f"Why: {why}. Requeue: {requeue}."
            )
            held = hold_text(r, r["preempted_at"])
            if held is not None:
                text += f" Actions: {held}."
            link = None
            if settings.dashboard_url:
                # The victim's own page, opened on this job: the cost, and what would have protected it.
                link = my_preemptions_url(settings.dashboard_url, r["cluster"], r["job_id"])
                text += f" Details: {link}"
            alerts.append(
                Alert(
                    dedupe_key=f"{self.name}:{r['cluster']}:{r['job_id']}:{r['run']}",
                    rule=self.name,
                    target=team_target(r["team"]),
                    title=f"Job {r['job_id']} was preempted",
                    text=text,
                    facts=_facts(r),
                    link=link,
                )
            )
        return alerts


def _masked_per_team(rows: pl.DataFrame, config: Config) -> pl.DataFrame:
    """Each notice's row as the team it goes to may see it (preemptlens.reading.masking, the dashboard's rule):
    another team's preemptor loses its id, name and user, and the scheduler's reason loses them too."""
    if rows.is_empty():
        return rows
    indexed = rows.with_row_index("_notice")
    parts = [mask(part, team_scope(config, (str(part["team"][0]),)))
             for part in indexed.partition_by("team", maintain_order=True)]
    return pl.concat(parts, how="diagonal_relaxed").sort("_notice").drop("_notice")


# Preempted runs of the lookback window with their job, the preemptor (from
# the run or a nearby preemption_links row), the next run if it started, and
# the expected requeue wait of its pool, tier and size (expected_requeue, the one definition).
_VICTIM_SQL = f"""
WITH preempted AS (
    -- the ledger's preemptions (docs/figures.md, section 1): a run the scheduler marked preempted or the one
    -- run a preemption link binds to, never a run that only ended near a link
    SELECT * FROM preemption_ledger WHERE time > $since AND time <= $now
),
final AS (
    SELECT p.cluster, p.victim_job_id AS job_id, p.victim_run AS run, j.name, p.victim_team AS team,
           p.victim_tier AS tier, p.pool, p.victim_gpus AS gpus, p.time AS preempted_at, p.reason,
           p.preemptor_job_id, coalesce(p.preemptor_tier, pj.tier) AS preemptor_tier, p.restart_time AS restarted_at,
           -- whose the preemptor is, so that masking can tell (preemptlens.reading.masking)
           pj.name AS preemptor_name, pj.team AS preemptor_team, pj.user_name AS preemptor_user,
           CASE WHEN p.requeue_censored THEN p.requeue_delay_s END AS waiting_s, {ESTIMATE_COLUMNS},
           {HOLD_COLUMNS}
    FROM preempted p
    JOIN jobs j ON j.cluster = p.cluster AND j.job_id = p.victim_job_id
    -- a preemptor whose run is not recorded (yet) still has its job's tier
    LEFT JOIN jobs pj ON pj.cluster = p.cluster AND pj.job_id = p.preemptor_job_id
    {estimate_join("p.cluster", "p.pool", "p.victim_tier", "p.victim_gpus")}
    -- the hold an action had put on the victim (docs/figures.md, Actions)
    {hold_join("p.cluster", "p.victim_job_id", "p.time")}
    WHERE p.victim_team IS NOT NULL
)
SELECT * FROM final ORDER BY preempted_at, cluster, job_id, run
"""  # noqa: S608 -- constants only

register_rule(VictimNotice())


@dataclass(frozen=True)
class CostExceedsGain:
    """A pool-day whose weighted preemption costs exceeded the gains it bought
    (net_benefit, period 'day', team '(all)'), once the day is over."""

    name: str = "cost_exceeds_gain"

    def evaluate(self, wh: Warehouse, config: Config, now: datetime) -> list[Alert]:
        since = now - timedelta(seconds=config.of(AlertsSettings).lookback_s)
        rows = wh.query(
            "SELECT * EXCLUDE (period) FROM net_benefit WHERE period = 'day' AND team = '(all)' AND cost_exceeds_gain "
            "AND window_start + INTERVAL 1 DAY <= $now AND window_start + INTERVAL 1 DAY > $since "
            "ORDER BY window_start, cluster, pool",
            {"now": now, "since": since},
        )
        return [
            _platform(
                self.name, f"{r['cluster']}:{r['pool']}:{r['window_start']:%Y-%m-%d}", r,
                f"Preemption cost more than it gained in pool {r['pool']} on {r['window_start']:%Y-%m-%d}",
                (
                    f"{plural(r['preemptions'], 'preemption')} in pool {r['pool']} of {r['cluster']} on "
                    f"{r['window_start']:%Y-%m-%d}: victims had "
                    f"{gpu_hours((r['lost_gpu_s'] + r['warmup_gpu_s']) / 3600)} of work thrown away "
                    f"({number(r['lost_gpu_s'] / 3600)} lost progress, {number(r['warmup_gpu_s'] / 3600)} warm-up) "
                    f"and {gpu_hours(r['requeue_gpu_s'] / 3600)} of waiting (GPUs x requeue delay); preemptors saved "
                    f"{gpu_hours(r['gain_gpu_s'] / 3600)} of waiting. Weighted by tier: cost "
                    f"{number(r['cost_weighted_gpu_s'] / 3600)}, gain {number(r['gain_weighted_gpu_s'] / 3600)}."
                ),
            )
            for r in rows.iter_rows(named=True)
        ]


@dataclass(frozen=True)
class ScopeCreep:
    """A pool whose high-tier share of GPU-hours grows faster than the configured
    slope per week (scope_creep_trend); at most one alert per pool and ISO week."""

    name: str = "scope_creep"

    def evaluate(self, wh: Warehouse, config: Config, now: datetime) -> list[Alert]:
        limit = config.of(AlertsSettings).scope_creep_slope
        rows = wh.query(
            "SELECT * FROM scope_creep_trend WHERE high_gpu_hour_share_slope > $limit ORDER BY cluster, pool",
            {"limit": limit},
        )
        week = now.strftime("%G-W%V")
        return [
            _platform(
                self.name, f"{r['cluster']}:{r['pool']}:{week}", r,
                f"High-priority share is growing in pool {r['pool']}",
                (
                    f"In pool {r['pool']} of {r['cluster']} the high tiers' share of GPU-hours went from "
                    f"{pct(r['high_gpu_hour_share_first'])} to {pct(r['high_gpu_hour_share_last'])} over "
                    f"{plural(r['weeks'], 'week')}, {change(r['high_gpu_hour_share_slope'], SHARE)} a week (limit "
                    f"{quantity(limit, POINTS)}); "
                    + (
                        "whether its preemptors behaved like critical work is unknown (no preemptors in these weeks)."
                        if r["unlike_critical_share"] is None
                        else f"{pct(r['unlike_critical_share'])} of preemptors did not behave like critical work."
                    )
                ),
            )
            for r in rows.iter_rows(named=True)
        ]


@dataclass(frozen=True)
class IdleHoarding:
    """A team holding more idle-hoarded GPU-hours than the configured limit in
    stretches that ended within the lookback (hoarding_stretches)."""

    name: str = "idle_hoarding"

    def evaluate(self, wh: Warehouse, config: Config, now: datetime) -> list[Alert]:
        settings = config.of(AlertsSettings)
        since = now - timedelta(seconds=settings.lookback_s)
        limit = settings.hoarding_gpu_hours
        rows = wh.query(
            "SELECT cluster, team, sum(idle_s) / 3600 AS idle_gpu_hours, count(DISTINCT (job_id, run)) AS runs, "
            "max(idle_s) AS longest_s FROM hoarding_stretches "
            "WHERE end_time > $since AND end_time <= $now AND team IS NOT NULL "
            "GROUP BY cluster, team HAVING sum(idle_s) / 3600 > $limit ORDER BY cluster, team",
            {"since": since, "now": now, "limit": limit},
        )
        day = now.strftime("%Y-%m-%d")
        return [
            _platform(
                self.name, f"{r['cluster']}:{r['team']}:{day}", r,
                f"Team {r['team']} held {gpu_hours(r['idle_gpu_hours'])} idle",
                (
                    f"Team {r['team']} on {r['cluster']} held {gpu_hours(r['idle_gpu_hours'])} allocated but idle "
                    f"(busy below the hoarding threshold for at least the hoarding window) across "
                    f"{plural(r['runs'], 'run')} in the last {duration(settings.lookback_s)}; the longest stretch "
                    f"lasted {duration(r['longest_s'])} (limit {gpu_hours(limit)})."
                ),
            )
            for r in rows.iter_rows(named=True)
        ]


@dataclass(frozen=True)
class VerdictChange:
    """The verdict of a cluster (readiness_verdict, worded by analytics.whatif.scorecard as everywhere else), once for
    each verdict it reaches: the dedupe key holds the verdict and whether it is borderline, so a verdict that
    changes posts again and an unchanged one never does."""

    name: str = "verdict"

    def evaluate(self, wh: Warehouse, config: Config, now: datetime) -> list[Alert]:
        from preemptlens.analytics.whatif import scorecard

        found = []
        for r in wh.query(scorecard.VERDICT_SQL).iter_rows(named=True):
            line = scorecard.verdict_line(wh, r["cluster"]) or scorecard.verdict_text(r)
            reasons = scorecard.reasons_of(r)
            found.append(Alert(
                dedupe_key=f"{self.name}:{r['cluster']}:{r['verdict']}:{'borderline' if r['borderline'] else 'firm'}",
                rule=self.name,
                target=PLATFORM,
                title=f"{r['cluster']}: {line.split(' (')[0]}",
                text=f"{r['cluster']}: {line}." + "".join(f"\n- {reason}" for reason in reasons),
                facts={"cluster": r["cluster"], "verdict": r["verdict"], "borderline": r["borderline"],
                       "fix_first": r["fix_first"], "adoption": r["adoption"]},
            ))
        return found


@dataclass(frozen=True)
class PilotLoss:
    """A running pilot ([pilot] pilots) whose evaluation up to now shows a clear loss (verdict roll back:
    the costs clearly exceed the gains); at most one alert per pilot and ISO week."""

    name: str = "pilot_loss"

    def evaluate(self, wh: Warehouse, config: Config, now: datetime) -> list[Alert]:
        th = config.of(PilotSettings)
        week = now.strftime("%G-W%V")
        alerts = []
        for pilot in declared(config).values():
            if not pilot.running(now):
                continue
            try:
                ev = evaluate_pilot(wh.query, pilot, th, now=now)
            except PreemptlensError as exc:
                log.info("pilot %s not evaluated: %s", pilot.name, exc)
                continue
            if not ev.clear_loss:
                continue
            alerts.append(
                Alert(
                    dedupe_key=f"{self.name}:{pilot.cluster}:{pilot.name}:{week}",
                    rule=self.name,
                    target=PLATFORM,
                    title=f"Pilot {pilot.name} shows a clear loss: roll back",
                    text=(
                        f"Pilot {pilot.name} on {pilot.cluster} ({pilot.what}; pools {', '.join(pilot.pools)} "
                        f"against {', '.join(pilot.control)}, since {pilot.start:%Y-%m-%d %H:%M} UTC), "
                        f"{ev.days_after} day(s) of data after the change: " + "; ".join(ev.reasons) + "."
                    ),
                    facts={
                        "cluster": pilot.cluster, "pilot": pilot.name, "verdict": ev.verdict,
                        "days_after": ev.days_after,
                        **{f.key: f.did for f in ev.figures if f.role in ("gain", "cost", "balance")},
                    },
                )
            )
        return alerts


register_rule(CostExceedsGain())
register_rule(ScopeCreep())
register_rule(IdleHoarding())
register_rule(PilotLoss())
register_rule(VerdictChange())
