"""Whether a preemption an Event reports is borne out by state its writer cannot set.

Anyone allowed to create Events in a namespace can write one that reads like a scheduler's, with the
scheduler's name in `reportingComponent` / `reportingController` / `source.component` and another team's pod
as its `related` object (issue 33). Those fields only say who the writer claims to be. So an Event's
preemption is believed only when the victim's own state, which the scheduler writes and a tenant cannot
(docs/deploy.md, "What a tenant must not write"), says the same. The collector reads the victim named by the
event (one GET, bounded, per object and collection) and judges:

What bears a preemption out, per victim, and the write it takes:

- a Pod (kube-scheduler, Volcano): the condition `DisruptionTarget` True with reason `PreemptionByScheduler`
  (1.27 on, Volcano) or `PreemptionByKubeScheduler` (1.25, 1.26), through `pods/status`; a pod is preempted
  once, so no time is compared;
- a Workload (Kueue): `Evicted` True with reason `Preempted`, `Preempted` True, `Requeued` with reason
  `Preempted`, or an `Evicted` / `Preempted` "Previously: " preemption message (a re-admission), changed no
  earlier than the event less CORROBORATION_WINDOW_S, through `workloads/status`;
- a PodGroup (KAI): the annotation `kai.scheduler/last-eviction-timestamp` no earlier than the event less
  CORROBORATION_WINDOW_S (KAI v0.17.0 on), through the scheduler's patch of `podgroups`; its
  `kai.scheduler/last-start-timestamp`, when not after the eviction, says when the evicted attempt began.

The verdicts:

- corroborated: the link is loaded and records what bore it out (`preemption_links.corroboration`);
- contradicted: the victim, read with the UID the event names, carries none of it: the event is quarantined
  as "claimed but not corroborated";
- unread: the victim cannot be read any more (deleted, as a preempted pod soon is; another object now holds
  its name; the read refused or failed), or it is a KAI PodGroup without the eviction stamp (KAI before
  v0.17.0 writes an eviction only in its event): the link is loaded without a corroboration, and the ledger
  takes it only where what was collected of the victim does not gainsay it (sql/views/stg_preemptions.sql).
"""

from __future__ import annotations

import json
import logging
from collections.abc import Mapping
from dataclasses import dataclass
from datetime import datetime, timedelta
from typing import TYPE_CHECKING, Any

from preemptlens import outbound
from preemptlens.collectors.kubernetes.events import (
    KAI,
    KAI_API_GROUP,
    KUEUE,
    KUEUE_API_GROUP,
    PREVIOUSLY,
    ParseError,
    Preemption,
    kueue_reason_text,
    parse_kueue_preempted,
    parse_time,
)
from preemptlens.collectors.kubernetes.objects import PREEMPTION_REASONS

if TYPE_CHECKING:
    import kubernetes.client

log = logging.getLogger(__name__)

# How much earlier than the event a Workload's condition or a PodGroup's eviction stamp may say it changed: the
# scheduler writes the state and then the event, in one pass, and the event's time is its own clock's.
CORROBORATION_WINDOW_S = 120.0
KAI_LAST_EVICTION = "kai.scheduler/last-eviction-timestamp"
KAI_LAST_START = "kai.scheduler/last-start-timestamp"
# One victim read: a total deadline and a cap on the answer, which is one object.
READ_DEADLINE_S = 30.0
MAX_OBJECT_BYTES = 8 * 2**20
_TIMEOUT = (10.0, 20.0)

POD, WORKLOAD, PODGROUP = "pod", "workload", "podgroup"
CLAIMED = "claimed but not corroborated"


def victim_kind(kind: str) -> str:
    """The kind of object a preemption of this scheduler kind names as its victim."""
    return WORKLOAD if kind == KUEUE else PODGROUP if kind == KAI else POD


class Uncorroborated(ParseError):
    """An event whose victim, read back, carries no trace of the preemption it claims."""


@dataclass(frozen=True)
class Verdict:
    by: str | None  # what bore the preemption out; None: unread
    contradiction: str | None = None  # why the victim gainsays the event (quarantine)
    unread: str | None = None  # why the victim could not be judged
    # when the evicted attempt began, where the victim's scheduler-written state says it (KAI's
    # kai.scheduler/last-start-timestamp, set when it allocated the gang): stored with the link
    started: datetime | None = None


def _conditions(obj: Mapping[str, Any]) -> list[Mapping[str, Any]]:
    status = obj.get("status")
    conds = status.get("conditions") if isinstance(status, Mapping) else None
    return [c for c in conds if isinstance(c, Mapping)] if isinstance(conds, list) else []


def _changed(cond: Mapping[str, Any]) -> datetime | None:
    try:
        return parse_time(cond.get("lastTransitionTime"), "lastTransitionTime")
    except ParseError:
        return None


def judge_pod(obj: Mapping[str, Any], p: Preemption) -> Verdict:
    for cond in _conditions(obj):
        if cond.get("type") == "DisruptionTarget" and cond.get("status") == "True" and \
                cond.get("reason") in PREEMPTION_REASONS:
            return Verdict(f"pod condition DisruptionTarget ({cond['reason']})")
    return Verdict(None, "the pod carries no DisruptionTarget condition with a scheduler's preemption reason "
                         f"({', '.join(sorted(PREEMPTION_REASONS))})")


def _kueue_mark(cond: Mapping[str, Any]) -> str | None:
    """The condition, when it records a preemption: this eviction's, or kept from one ("Previously: ")."""
    kind, status, reason = cond.get("type"), cond.get("status"), cond.get("reason")
    said = cond.get("message")
    message = said if isinstance(said, str) else ""
    if kind == "Evicted" and status == "True" and reason == "Preempted":
        return "Evicted (Preempted)"
    if kind == "Preempted" and status == "True":
        return f"Preempted ({reason})" if isinstance(reason, str) and reason else "Preempted"
    if kind == "Requeued" and reason == "Preempted":
        return "Requeued (Preempted)"
    if kind in ("Evicted", "Preempted") and message.startswith(PREVIOUSLY) and (
            parse_kueue_preempted(message) is not None or kueue_reason_text(message) is not None):
        return f"{kind} (Previously: preempted)"
    return None


def judge_workload(obj: Mapping[str, Any], p: Preemption) -> Verdict:
    since = p.time - timedelta(seconds=CORROBORATION_WINDOW_S)
    older = []
    for cond in _conditions(obj):
        mark = _kueue_mark(cond)
        if mark is None:
            continue
        changed = _changed(cond)
        if changed is None or changed >= since:
            return Verdict(f"workload condition {mark}")
        older.append(f"{mark} at {changed.isoformat()}")
    if older:
        return Verdict(None, "the Workload's conditions record no preemption at the event's time, only an earlier "
                             f"one ({'; '.join(older)})")
    return Verdict(None, "the Workload's conditions record no preemption (Evicted or Requeued with reason "
                         "Preempted, Preempted True)")


def judge_podgroup(obj: Mapping[str, Any], p: Preemption) -> Verdict:
    meta = obj.get("metadata")
    notes = meta.get("annotations") if isinstance(meta, Mapping) else None
    stamp = notes.get(KAI_LAST_EVICTION) if isinstance(notes, Mapping) else None
    if stamp is None:
        return Verdict(None, unread=f"the PodGroup carries no {KAI_LAST_EVICTION} (KAI before v0.17.0 records an "
                                    "eviction only in its event)")
    try:
        evicted = parse_time(stamp, KAI_LAST_EVICTION)
    except ParseError:
        return Verdict(None, f"the PodGroup's {KAI_LAST_EVICTION} is no time ({stamp!r})")
    if evicted < p.time - timedelta(seconds=CORROBORATION_WINDOW_S):
        return Verdict(None, f"the PodGroup's last eviction was at {evicted.isoformat()}, before the event")
    # KAI stamps the start when it allocates the gang (allocate.go, since v0.6.0); one after the eviction is
    # the next attempt's, which says nothing of when the evicted one began
    try:
        started: datetime | None = parse_time(notes.get(KAI_LAST_START) if isinstance(notes, Mapping) else None,
                                              KAI_LAST_START)
    except ParseError:
        started = None
    if started is not None and started > min(evicted, p.time):
        started = None
    return Verdict(f"podgroup annotation {KAI_LAST_EVICTION}", started=started)


JUDGES = {POD: judge_pod, WORKLOAD: judge_workload, PODGROUP: judge_podgroup}


class Corroborator:
    """Reads each victim an event names (once per collection) and judges the event by it."""

    def __init__(self, client: kubernetes.client.ApiClient, kueue_version: str) -> None:
        self.client = client
        self.kueue_version = kueue_version
        self.read: dict[tuple[str, str, str], tuple[Mapping[str, Any] | None, str]] = {}
        self.warned: set[str] = set()  # the kinds whose read was refused or failed: said once per collection

    def __call__(self, p: Preemption) -> Verdict:
        ref = p.victim
        kind = victim_kind(p.kind)
        if ref is None or not ref.namespace or not ref.name:
            return Verdict(None, unread="the event names no namespace and name of its victim")
        key = (kind, ref.namespace, ref.name)
        if key not in self.read:
            self.read[key] = self._get(kind, ref.namespace, ref.name)
        obj, why = self.read[key]
        if obj is None:
            return Verdict(None, unread=why)
        meta = obj.get("metadata")
        uid = meta.get("uid") if isinstance(meta, Mapping) else None
        if ref.uid and uid != ref.uid:
            return Verdict(None, unread=f"the {kind} of that name is another object now (UID {uid})")
        return JUDGES[kind](obj, p)

    def _get(self, kind: str, namespace: str, name: str) -> tuple[Mapping[str, Any] | None, str]:
        import kubernetes.client
        import urllib3
        from kubernetes.client.exceptions import ApiException

        from preemptlens.collectors.kubernetes.watch import status_text

        where = f"{kind} {namespace}/{name}"
        deadline = outbound.Deadline(READ_DEADLINE_S, f"kubernetes: reading the victim {where}")
        resp: Any = None
        try:
            with deadline.current():
                if kind == POD:
                    resp = kubernetes.client.CoreV1Api(self.client).read_namespaced_pod(
                        name, namespace, _preload_content=False, _request_timeout=_TIMEOUT)
                else:
                    group, version, plural = ((KUEUE_API_GROUP, self.kueue_version, "workloads") if kind == WORKLOAD
                                              else (KAI_API_GROUP, "v2alpha2", "podgroups"))
                    resp = kubernetes.client.CustomObjectsApi(self.client).get_namespaced_custom_object(
                        group, version, namespace, plural, name, _preload_content=False, _request_timeout=_TIMEOUT)
            obj = json.loads(outbound.read_capped(resp.stream(1 << 16), MAX_OBJECT_BYTES, deadline))
        except ApiException as exc:
            if exc.status == 404:
                return None, f"the {kind} is gone"
            why = f"the {kind} cannot be read ({status_text(exc)})"
            if kind not in self.warned:
                self.warned.add(kind)
                log.warning("kubernetes: events' victims are loaded uncorroborated: %s%s", why,
                            "; grant get on them (docs/deploy.md)" if exc.status == 403 else "")
            return None, why
        except outbound.CallTimedOut:
            return None, f"the {kind} could not be read within {READ_DEADLINE_S:g} s"
        except outbound.AnswerTooLarge:
            return None, f"the {kind}'s answer is larger than {MAX_OBJECT_BYTES:,} bytes"
        except ValueError:
            return None, f"the {kind}'s answer is not JSON"
        except (urllib3.exceptions.HTTPError, OSError) as exc:
            return None, f"the {kind} could not be read ({type(exc).__name__})"
        finally:
            deadline.close()
            if resp is not None:
                resp.release_conn()
        if not isinstance(obj, Mapping):
            return None, f"the {kind}'s answer is not an object"
        return obj, ""
