"""Effectors for Kubernetes (preemptlens.contract.Effector): Kueue priority boost, KAI non-preemptible PodGroups.

Both find a job by its warehouse id (objects: a Workload's UID, a PodGroup's
"<namespace>/<name>") by listing the objects, and change it with a JSON merge patch
(`application/merge-patch+json`), which touches only the keys it names. Each
marks what it changed with the label `preemptlens.io/action` (its action's
name), so `held` reads back exactly the objects preemptlens changed and never
undoes another controller's boost.

- Kueue: a Workload's priority boost, which Kueue adds to its priority for
  scheduling order, preemption candidates and preemption eligibility. Released
  Kueue reads it from one place only, the annotation
  `kueue.x-k8s.io/priority-boost` (a signed 32-bit integer; KEP-7990), from
  v0.17.0 on (to v0.19.2, the newest release), behind the feature gate
  `PriorityBoost` (alpha, off by default: without it Kueue ignores the
  annotation). No released Workload CRD has a typed `spec.priorityBoost`
  (tests/cases/kubernetes/crd_workloads_kueue_*.json, recorded from the tags),
  so none is written. `kubernetes.kueue_boost_api = "auto"` reads the served
  Workload CRD first: a cluster whose CRD lacks what 0.17 added with the boost
  (`spec.preemptionGates` of v1beta2) runs a Kueue that reads no boost, and
  the effector refuses rather than record a boost that does nothing; a CRD it
  cannot read is named in the log and the annotation written. The gate cannot
  be read from the API: docs/deploy.md asks the operator to enable it.
- KAI-Scheduler decides a PodGroup's preemptibility from its
  `spec.preemptibility` (`preemptible`, `non-preemptible`, `semi-preemptible`;
  unset: by priority, preemptible below 100). The `kai.scheduler/preemptibility`
  label is read by KAI's podgrouper from a pod or its top owner, which writes the
  field; on the PodGroup itself the scheduler reads the field. So apply sets the
  field, and undo restores the value it found (or removes it). The podgrouper may
  rewrite the spec when the owner's pods change; `held` then reports level 0,
  and the engine closes the row and applies again if the job still qualifies.

Needs RBAC get/list/patch on the one resource (docs/deploy.md, "Actions").
"""

from __future__ import annotations

import functools
import json
import logging
from collections.abc import Callable, Mapping
from typing import TYPE_CHECKING, Any

from preemptlens import outbound
from preemptlens.collectors.kubernetes import KubernetesSettings, api_client, cluster_name
from preemptlens.config import Config
from preemptlens.errors import ConfigError, SourceError

if TYPE_CHECKING:
    import kubernetes.client

log = logging.getLogger(__name__)

MARK_LABEL = "preemptlens.io/action"
BOOST_ANNOTATION = "kueue.x-k8s.io/priority-boost"
WORKLOAD_CRD = "workloads.kueue.x-k8s.io"
# The audit row's detail names where the boost was written.
ANNOTATION = "annotation"
# A v1beta2 Workload field that came with the boost annotation in Kueue v0.17.0 (KEP-7990 shipped with
# preemption gates, KEP-8303): a served CRD without it belongs to a Kueue that reads no boost.
SINCE_0_17_FIELD = "preemptionGates"
NON_PREEMPTIBLE = "non-preemptible"
MERGE_PATCH = "application/merge-patch+json"
_TIMEOUT = (10.0, 30.0)
# One object read or patched: a total deadline (a socket timeout bounds one read, not a dripping answer) and a
# cap on the answer, which is one object (the API server's own limit on an object is 1.5 MiB in etcd).
CALL_DEADLINE_S = 45.0
MAX_OBJECT_BYTES = 8 * 2**20


def uid_of(obj: Mapping[str, Any]) -> str | None:
    """A Workload's job id: its UID."""
    uid = (obj.get("metadata") or {}).get("uid")
    return str(uid) if uid else None


def namespaced_name(obj: Mapping[str, Any]) -> str | None:
    """A KAI PodGroup's job id: "<namespace>/<name>" (objects)."""
    meta = obj.get("metadata") or {}
    return f"{meta['namespace']}/{meta['name']}" if meta.get("namespace") and meta.get("name") else None


class _Objects:
    """One custom resource, listed to map job ids to namespace/name and patched by merge patch."""

    def __init__(self, client: kubernetes.client.ApiClient, group: str, version: str, plural: str,
                 what: str, job_id: Callable[[Mapping[str, Any]], str | None], *, page_size: int = 500,
                 max_retries: int = 5) -> None:
        import kubernetes.client

        self.api = kubernetes.client.CustomObjectsApi(client)
        self.group, self.version, self.plural, self.what = group, version, plural, what
        self.job_id = job_id
        self.page_size, self.max_retries = page_size, max_retries
        self._where: dict[str, tuple[str, str]] = {}

    def list(self, label_selector: str | None = None) -> list[dict[str, Any]]:
        from preemptlens.collectors.kubernetes.watch import Change, ListWatch, WatchBounds

        call: Callable[..., Any] = functools.partial(self.api.list_cluster_custom_object, self.group, self.version,
                                                     self.plural)
        if label_selector:
            call = functools.partial(call, label_selector=label_selector)
        bounds = WatchBounds(page_size=self.page_size, watch_seconds=0.0, idle_seconds=5.0,
                             max_retries=self.max_retries)
        watcher = ListWatch(f"kubernetes {self.plural}", call, bounds)
        found = [item.object for item in watcher.run(None) if isinstance(item, Change)]
        for obj in found:
            meta = obj.get("metadata") or {}
            key = self.job_id(obj)
            if key and meta.get("name"):
                self._where[key] = (str(meta.get("namespace") or ""), str(meta["name"]))
        return found

    def get(self, uid: str) -> dict[str, Any]:
        """The object of a job id (listing once more when it is not known yet)."""
        if uid not in self._where:
            self.list()
        if uid not in self._where:
            raise SourceError(f"kubernetes: no {self.what} {uid}", "it was deleted, or is not a "
                              f"{self.what}: set the action's pools to the pools of its scheduler")
        namespace, name = self._where[uid]
        obj = self._call("read", namespace, name, functools.partial(
            self.api.get_namespaced_custom_object, self.group, self.version, namespace, self.plural, name,
            _request_timeout=_TIMEOUT, _preload_content=False))
        return obj if isinstance(obj, dict) else {}

    def patch(self, uid: str, body: Mapping[str, Any]) -> None:
        namespace, name = self._where[uid]
        self._call("patch", namespace, name, functools.partial(
            self.api.patch_namespaced_custom_object, self.group, self.version, namespace, self.plural, name,
            dict(body), _content_type=MERGE_PATCH, _request_timeout=_TIMEOUT, _preload_content=False))

    def _call(self, verb: str, namespace: str, name: str, call: Callable[[], Any]) -> Any:
        """The call's answer, read within CALL_DEADLINE_S and MAX_OBJECT_BYTES (`call` asks for the raw response)."""
        import urllib3
        from kubernetes.client.exceptions import ApiException

        from preemptlens.collectors.kubernetes.watch import status_text

        where = f"kubernetes: cannot {verb} {self.what} {namespace}/{name}"
        deadline = outbound.Deadline(CALL_DEADLINE_S, where)
        too_slow = SourceError(f"{where}: no whole answer within {CALL_DEADLINE_S:g} s",
                               "check the API server and the network to it")
        resp = None
        try:
            with deadline.current():
                resp = call()
            return json.loads(outbound.read_capped(resp.stream(1 << 16), MAX_OBJECT_BYTES, deadline))
        except outbound.CallTimedOut:
            raise too_slow from None
        except outbound.AnswerTooLarge:
            raise SourceError(f"{where}: answer larger than {MAX_OBJECT_BYTES:,} bytes",
                              "check kubernetes.api_url: an API server answers one object") from None
        except ValueError:
            raise SourceError(f"{where}: the answer is not JSON", "check kubernetes.api_url") from None
        except ApiException as exc:
            hint = ("grant the Role in docs/deploy.md (Actions)" if exc.status == 403
                    else "check the object and the API server")
            raise SourceError(f"{where}: {status_text(exc)}", hint) from None
        except (urllib3.exceptions.HTTPError, OSError) as exc:
            if deadline.expired:  # its watchdog shut the socket: the answer came too slowly, not never
                raise too_slow from None
            raise SourceError(f"{where}: API server unreachable ({type(exc).__name__})",
                              "check kubernetes.api_url / the kubeconfig") from None
        finally:
            deadline.close()
            if resp is not None:
                resp.release_conn()


class KueueBoost:
    """`kueue_boost`: a Workload's priority boost, as the annotation Kueue v0.17.0 and later read."""

    scheduler = "kueue"

    def __init__(self, client: kubernetes.client.ApiClient, *, kueue_version: str = "v1beta1",
                 action: str = "kueue_boost", boost_api: str = "auto") -> None:
        self.action = action
        self.client = client
        self.kueue_version = kueue_version
        self.boost_api = boost_api
        self.objects = _Objects(client, "kueue.x-k8s.io", kueue_version, "workloads", "Workload", uid_of)
        self._checked = boost_api == "annotation"

    def check(self) -> None:
        """With `auto`, that the served Workload CRD is of a Kueue that reads the annotation (once per effector)."""
        if self._checked:
            return
        import urllib3
        from kubernetes.client.exceptions import ApiException

        from preemptlens.collectors.kubernetes.watch import status_text

        api = kubernetes_api_extensions(self.client)
        try:
            resp = api.read_custom_resource_definition(WORKLOAD_CRD, _preload_content=False, _request_timeout=_TIMEOUT)
            crd = json.loads(resp.data)
        except ApiException as exc:
            log.warning("kueue_boost: cannot read CRD %s (%s): writing the annotation %s, which only Kueue v0.17.0 "
                        "and later read, with the PriorityBoost gate", WORKLOAD_CRD, status_text(exc), BOOST_ANNOTATION)
        except (urllib3.exceptions.HTTPError, OSError, ValueError) as exc:
            log.warning("kueue_boost: cannot read CRD %s (%s): writing the annotation %s, which only Kueue v0.17.0 "
                        "and later read, with the PriorityBoost gate", WORKLOAD_CRD, type(exc).__name__,
                        BOOST_ANNOTATION)
        else:
            if not reads_boost_annotation(crd):
                raise ConfigError(
                    f"kueue_boost: the served {WORKLOAD_CRD} is of a Kueue before v0.17.0 (its v1beta2 spec has no "
                    f"{SINCE_0_17_FIELD}), which reads no priority boost",
                    "upgrade Kueue to v0.17 or later with the PriorityBoost feature gate, or disable kueue_boost")
        self._checked = True

    def held(self) -> dict[str, int]:
        self.check()
        held: dict[str, int] = {}
        for obj in self.objects.list(f"{MARK_LABEL}={self.action}"):
            meta = obj.get("metadata") or {}
            if not meta.get("uid"):
                continue
            value = (meta.get("annotations") or {}).get(BOOST_ANNOTATION)
            try:
                held[str(meta["uid"])] = int(value) if value is not None else 0
            except (TypeError, ValueError):
                held[str(meta["uid"])] = 0  # not a boost preemptlens would set: undone at reconcile
        return held

    def apply(self, job_id: str, level: int) -> dict[str, str]:
        self.check()
        self.objects.get(job_id)
        self.objects.patch(job_id, {"metadata": {"labels": {MARK_LABEL: self.action},
                                                 "annotations": {BOOST_ANNOTATION: str(level)}}})
        return {ANNOTATION: BOOST_ANNOTATION}

    def undo(self, job_id: str, detail: dict[str, str]) -> None:
        del detail  # the boost is preemptlens's own: removing it restores the Workload's priority
        self.objects.get(job_id)
        self.objects.patch(job_id, {"metadata": {"labels": {MARK_LABEL: None},
                                                 "annotations": {BOOST_ANNOTATION: None}}})


def kubernetes_api_extensions(client: kubernetes.client.ApiClient) -> Any:
    import kubernetes.client

    return kubernetes.client.ApiextensionsV1Api(client)


def reads_boost_annotation(crd: Any) -> bool:
    """Whether a served Workload CRD is of Kueue v0.17.0 or later: a served version's spec has preemptionGates."""
    versions = ((crd.get("spec") or {}).get("versions") or []) if isinstance(crd, dict) else []

    def since_0_17(v: Any) -> bool:
        spec = (((((v or {}).get("schema") or {}).get("openAPIV3Schema") or {}).get("properties") or {})
                .get("spec") or {})
        return isinstance(spec, dict) and SINCE_0_17_FIELD in (spec.get("properties") or {})

    return any(since_0_17(v) for v in versions if isinstance(v, dict) and v.get("served"))


class KaiProtect:
    """`kai_protect`: a PodGroup's spec.preemptibility set to non-preemptible."""

    scheduler = "kai"

    def __init__(self, client: kubernetes.client.ApiClient, *, action: str = "kai_protect") -> None:
        self.action = action
        self.objects = _Objects(client, "scheduling.run.ai", "v2alpha2", "podgroups", "PodGroup", namespaced_name)

    def held(self) -> dict[str, int]:
        held: dict[str, int] = {}
        for obj in self.objects.list(f"{MARK_LABEL}={self.action}"):
            key = namespaced_name(obj)
            if key:
                held[key] = int((obj.get("spec") or {}).get("preemptibility") == NON_PREEMPTIBLE)
        return held

    def apply(self, job_id: str, level: int) -> dict[str, str]:
        del level  # a protection has one level
        obj = self.objects.get(job_id)
        before = (obj.get("spec") or {}).get("preemptibility")
        self.objects.patch(job_id, {"metadata": {"labels": {MARK_LABEL: self.action}},
                                    "spec": {"preemptibility": NON_PREEMPTIBLE}})
        # "" records that the field was unset: undo removes it again.
        return {"preemptibility": str(before or "")}

    def undo(self, job_id: str, detail: dict[str, str]) -> None:
        self.objects.get(job_id)
        # Without a recorded value (a crash before the audit), unset: KAI decides by priority, its default.
        before = detail.get("preemptibility") or None
        if before == NON_PREEMPTIBLE:
            before = None
        self.objects.patch(job_id, {"metadata": {"labels": {MARK_LABEL: None}},
                                    "spec": {"preemptibility": before}})


def build_effector(action: str, config: Config) -> tuple[str, KueueBoost | KaiProtect]:
    """The effector of a Kubernetes action and its cluster, from the [kubernetes] settings."""
    settings = config.of(KubernetesSettings)
    client = api_client(settings)
    cluster = cluster_name(config, settings)
    if action == "kueue_boost":
        return cluster, KueueBoost(client, kueue_version=settings.kueue_version, action=action,
                                   boost_api=settings.kueue_boost_api)
    if action == "kai_protect":
        return cluster, KaiProtect(client, action=action)
    raise ConfigError(f"kubernetes: no effector for action {action!r}", "kueue_boost or kai_protect")
