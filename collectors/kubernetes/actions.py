"""Effectors for Kubernetes (preemptlens.contract.Effector): Kueue priority boost, KAI non-preemptible PodGroups.

Both find a job by its warehouse id, the object's UID (objects),
by listing the objects, and change it with a JSON merge patch
(`application/merge-patch+json`), which touches only the keys it names. Each
marks what it changed with the label `preemptlens.io/action` (its action's
name), so `held` reads back exactly the objects preemptlens changed and never
undoes another controller's boost.

- Kueue (KEP-7990, kubernetes-sigs/kueue#9120, `PriorityBoost` feature gate):
  the Workload annotation `kueue.x-k8s.io/priority-boost` holds a signed
  integer that Kueue adds to the Workload's priority for scheduling order,
  preemption candidates and preemption eligibility within a ClusterQueue.
  Undo sets it to null (removes it).
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
import logging
from collections.abc import Callable, Mapping
from typing import TYPE_CHECKING, Any

from preemptlens.collectors.kubernetes import KubernetesSettings, api_client, cluster_name
from preemptlens.config import Config
from preemptlens.errors import ConfigError, SourceError

if TYPE_CHECKING:
    import kubernetes.client

log = logging.getLogger(__name__)

MARK_LABEL = "preemptlens.io/action"
BOOST_ANNOTATION = "kueue.x-k8s.io/priority-boost"
NON_PREEMPTIBLE = "non-preemptible"
MERGE_PATCH = "application/merge-patch+json"
_TIMEOUT = (10.0, 30.0)


class _Objects:
    """One custom resource, listed to map UIDs to namespace/name and patched by merge patch."""

    def __init__(self, client: kubernetes.client.ApiClient, group: str, version: str, plural: str,
                 what: str, *, page_size: int = 500, max_retries: int = 5) -> None:
        import kubernetes.client

        self.api = kubernetes.client.CustomObjectsApi(client)
        self.group, self.version, self.plural, self.what = group, version, plural, what
        self.page_size, self.max_retries = page_size, max_retries
        self._where: dict[str, tuple[str, str]] = {}

    def list(self, label_selector: str | None = None) -> list[dict[str, Any]]:
        from preemptlens.collectors.kubernetes.watch import Change, ListWatch

        call: Callable[..., Any] = functools.partial(self.api.list_cluster_custom_object, self.group, self.version,
                                                     self.plural)
        if label_selector:
            call = functools.partial(call, label_selector=label_selector)
        watcher = ListWatch(f"kubernetes {self.plural}", call, page_size=self.page_size, watch_seconds=0.0,
                            idle_seconds=5.0, max_retries=self.max_retries)
        found = [item.object for item in watcher.run(None) if isinstance(item, Change)]
        for obj in found:
            meta = obj.get("metadata") or {}
            if meta.get("uid") and meta.get("name"):
                self._where[str(meta["uid"])] = (str(meta.get("namespace") or ""), str(meta["name"]))
        return found

    def get(self, uid: str) -> dict[str, Any]:
        """The object of a UID (listing once more when it is not known yet)."""
        if uid not in self._where:
            self.list()
        if uid not in self._where:
            raise SourceError(f"kubernetes: no {self.what} with UID {uid}", "it was deleted, or is not a "
                              f"{self.what}: set the action's pools to the pools of its scheduler")
        namespace, name = self._where[uid]
        obj = self._call("read", namespace, name, functools.partial(
            self.api.get_namespaced_custom_object, self.group, self.version, namespace, self.plural, name,
            _request_timeout=_TIMEOUT))
        return obj if isinstance(obj, dict) else {}

    def patch(self, uid: str, body: Mapping[str, Any]) -> None:
        namespace, name = self._where[uid]
        self._call("patch", namespace, name, functools.partial(
            self.api.patch_namespaced_custom_object, self.group, self.version, namespace, self.plural, name,
            dict(body), _content_type=MERGE_PATCH, _request_timeout=_TIMEOUT))

    def _call(self, verb: str, namespace: str, name: str, call: Callable[[], Any]) -> Any:
        import urllib3
        from kubernetes.client.exceptions import ApiException

        from preemptlens.collectors.kubernetes.watch import status_text

        where = f"kubernetes: cannot {verb} {self.what} {namespace}/{name}"
        try:
            return call()
        except ApiException as exc:
            hint = ("grant the Role in docs/deploy.md (Actions)" if exc.status == 403
                    else "check the object and the API server")
            raise SourceError(f"{where}: {status_text(exc)}", hint) from None
        except (urllib3.exceptions.HTTPError, OSError) as exc:
            raise SourceError(f"{where}: API server unreachable ({type(exc).__name__})",
                              "check kubernetes.api_url / the kubeconfig") from None


class KueueBoost:
    """`kueue_boost`: the priority-boost annotation on a Workload."""

    scheduler = "kueue"

    def __init__(self, client: kubernetes.client.ApiClient, *, kueue_version: str = "v1beta1",
                 action: str = "kueue_boost") -> None:
        self.action = action
        self.objects = _Objects(client, "kueue.x-k8s.io", kueue_version, "workloads", "Workload")

    def held(self) -> dict[str, int]:
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
        self.objects.get(job_id)
        self.objects.patch(job_id, {"metadata": {"labels": {MARK_LABEL: self.action},
                                                 "annotations": {BOOST_ANNOTATION: str(level)}}})
        return {"annotation": BOOST_ANNOTATION}

    def undo(self, job_id: str, detail: dict[str, str]) -> None:
        del detail  # the boost is preemptlens's own: removing it restores the Workload's priority
        self.objects.get(job_id)
        self.objects.patch(job_id, {"metadata": {"labels": {MARK_LABEL: None},
                                                 "annotations": {BOOST_ANNOTATION: None}}})


class KaiProtect:
    """`kai_protect`: a PodGroup's spec.preemptibility set to non-preemptible."""

    scheduler = "kai"

    def __init__(self, client: kubernetes.client.ApiClient, *, action: str = "kai_protect") -> None:
        self.action = action
        self.objects = _Objects(client, "scheduling.run.ai", "v2alpha2", "podgroups", "PodGroup")

    def held(self) -> dict[str, int]:
        return {
            str(obj["metadata"]["uid"]): int((obj.get("spec") or {}).get("preemptibility") == NON_PREEMPTIBLE)
            for obj in self.objects.list(f"{MARK_LABEL}={self.action}")
            if (obj.get("metadata") or {}).get("uid")
        }

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
        return cluster, KueueBoost(client, kueue_version=settings.kueue_version, action=action)
    if action == "kai_protect":
        return cluster, KaiProtect(client, action=action)
    raise ConfigError(f"kubernetes: no effector for action {action!r}", "kueue_boost or kai_protect")
