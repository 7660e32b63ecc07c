"""A small fake Kubernetes API server for the collector's tests.

It speaks the part of the API the collector uses, in the real wire shapes:
list responses (`kind: <Kind>List`, `metadata.resourceVersion`, `continue`
paging with `limit`), watch streams over chunked HTTP (newline-delimited
`{"type": ..., "object": ...}`), BOOKMARK events when `allowWatchBookmarks`
is set, `timeoutSeconds` honoured, and `Status` objects for errors: a watch
from a compacted resourceVersion gets an ERROR event with a 410 `Expired`
Status (as the real apiserver sends it), an expired `continue` token a 410
response.

Every resource path keeps its current objects and a change log with one
global resourceVersion counter, like etcd's revision. Tests change objects
(`add`, `modify`, `delete`), compact the log, and queue faults for the next
watch: drop the connection after N events, or answer with an HTTP error.
A path in `forbidden` answers every request with the 403 Status RBAC gives.
CustomResourceDefinitions put in `crds` answer a GET by name, as the Kueue
effector reads the Workload CRD's schema.

Workloads and PodGroups also take GET of one object and PATCH with a JSON
merge patch (RFC 7386, `application/merge-patch+json`; any other patch type
gets the 415 the real server gives a CRD), as the actions' effectors send
them; every PATCH is recorded in `patches`. A list honours a `labelSelector`
of `key=value` terms. `hold_patches_from` makes the N-th and later PATCHes
take effect and then never answer (a process killed mid-action);
`refuse_patches` answers every PATCH with RBAC's 403.
"""

from __future__ import annotations

import base64
import copy
import json
import socket
import threading
import time
from collections.abc import Iterator
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any
from urllib.parse import parse_qs, urlsplit

import pytest

# Resources whose objects may be patched (merge patch only: custom resources take no strategic merge).
PATCHABLE = ("workloads", "podgroups")
MERGE_PATCH = "application/merge-patch+json"

CASES = Path(__file__).resolve().parent.parent / "cases" / "kubernetes"

# Resource path -> (list kind, apiVersion of the list and its bookmark objects).
KINDS: dict[str, tuple[str, str]] = {
    "/api/v1/events": ("Event", "v1"),
    "/apis/events.k8s.io/v1/events": ("Event", "events.k8s.io/v1"),
    "/api/v1/pods": ("Pod", "v1"),
    "/apis/kueue.x-k8s.io/v1beta1/workloads": ("Workload", "kueue.x-k8s.io/v1beta1"),
    "/apis/kueue.x-k8s.io/v1beta2/workloads": ("Workload", "kueue.x-k8s.io/v1beta2"),
    "/apis/scheduling.run.ai/v2alpha2/podgroups": ("PodGroup", "scheduling.run.ai/v2alpha2"),
    "/api/v1/nodes": ("Node", "v1"),
    "/apis/kueue.x-k8s.io/v1beta1/resourceflavors": ("ResourceFlavor", "kueue.x-k8s.io/v1beta1"),
    "/apis/kueue.x-k8s.io/v1beta2/resourceflavors": ("ResourceFlavor", "kueue.x-k8s.io/v1beta2"),
    "/apis/kueue.x-k8s.io/v1beta1/clusterqueues": ("ClusterQueue", "kueue.x-k8s.io/v1beta1"),
    "/apis/kueue.x-k8s.io/v1beta2/clusterqueues": ("ClusterQueue", "kueue.x-k8s.io/v1beta2"),
    "/apis/scheduling.run.ai/v2/queues": ("Queue", "scheduling.run.ai/v2"),
    "/apis/kueue.x-k8s.io/v1beta1/localqueues": ("LocalQueue", "kueue.x-k8s.io/v1beta1"),
    "/apis/kueue.x-k8s.io/v1beta2/localqueues": ("LocalQueue", "kueue.x-k8s.io/v1beta2"),
}
# Custom resource definitions, served by name only (GET), as the effectors read them.
CRDS = "/apis/apiextensions.k8s.io/v1/customresourcedefinitions"


def load_case(name: str) -> Any:
    return json.loads((CASES / name).read_text())


def serve_workload_crd(api: FakeApiServer, kueue: str) -> None:
    """Serve Kueue's Workload CRD of a release ("0.16" to "0.19"), recorded from its tag (the case names it)."""
    crd = load_case(f"crd_workloads_kueue_{kueue}.json")["object"]
    api.crds[crd["metadata"]["name"]] = crd


def node(name: str, gpus: int | None, labels: dict[str, str] | None = None) -> dict[str, Any]:
    """A Node as the API lists it: quantities as canonical strings; a CPU node has no GPU key."""
    gpu = {} if gpus is None else {"nvidia.com/gpu": str(gpus)}
    return {
        "kind": "Node", "apiVersion": "v1",
        "metadata": {"name": name, "uid": f"node-{name}", "creationTimestamp": "2026-10-01T00:00:00Z",
                     "labels": {"kubernetes.io/hostname": name, "kubernetes.io/os": "linux", **(labels or {})}},
        "spec": {"podCIDR": "10.8.1.0/24", "providerID": f"gce://proj/us-central1-a/{name}"},
        "status": {
            "capacity": {"cpu": "208", "ephemeral-storage": "101430960Ki", "memory": "1877336712Ki", "pods": "110",
                         **gpu},
            "allocatable": {"cpu": "207500m", "ephemeral-storage": "47093746742", "memory": "1857581208Ki",
                            "pods": "110", **gpu},
            "conditions": [{"type": "Ready", "status": "True", "reason": "KubeletReady",
                            "lastHeartbeatTime": "2026-11-02T12:00:00Z",
                            "lastTransitionTime": "2026-10-01T00:02:00Z"}],
            "nodeInfo": {"kubeletVersion": "v1.31.4", "containerRuntimeVersion": "containerd://1.7.24"},
        },
    }


def resource_flavor(name: str, node_labels: dict[str, str] | None, version: str = "v1beta1") -> dict[str, Any]:
    spec: dict[str, Any] = {} if node_labels is None else {"nodeLabels": node_labels}
    return {
        "apiVersion": f"kueue.x-k8s.io/{version}", "kind": "ResourceFlavor",
        "metadata": {"name": name, "uid": f"rf-{name}", "generation": 1, "creationTimestamp": "2026-10-01T00:00:00Z",
                     "finalizers": ["kueue.x-k8s.io/resource-in-use"]},
        "spec": spec,
    }


def cluster_queue(name: str, gpu_quotas: dict[str, str], version: str = "v1beta1",
                  cohort: str = "research") -> dict[str, Any]:
    """A ClusterQueue with a CPU/memory group on flavor `default` and a GPU group per flavor."""
    return {
        "apiVersion": f"kueue.x-k8s.io/{version}", "kind": "ClusterQueue",
        "metadata": {"name": name, "uid": f"cq-{name}", "generation": 3, "creationTimestamp": "2026-10-01T00:00:00Z"},
        "spec": {
            # v1beta2 renamed the field (Kueue 0.15).
            ("cohort" if version == "v1beta1" else "cohortName"): cohort,
            "namespaceSelector": {}, "queueingStrategy": "BestEffortFIFO", "stopPolicy": "None",
            "flavorFungibility": {"whenCanBorrow": "MayStopSearch", "whenCanPreempt": "TryNextFlavor"},
            "preemption": {"withinClusterQueue": "LowerPriority", "reclaimWithinCohort": "Any",
                           "borrowWithinCohort": {"policy": "Never"}},
            "resourceGroups": [
                {"coveredResources": ["cpu", "memory"], "flavors": [{"name": "default", "resources": [
                    {"name": "cpu", "nominalQuota": "1k"}, {"name": "memory", "nominalQuota": "4Ti"}]}]},
                {"coveredResources": ["nvidia.com/gpu"], "flavors": [
                    {"name": flavor, "resources": [{"name": "nvidia.com/gpu", "nominalQuota": quota}]}
                    for flavor, quota in gpu_quotas.items()]},
            ],
        },
        "status": {"pendingWorkloads": 0, "reservingWorkloads": 1, "admittedWorkloads": 1,
                   "conditions": [{"type": "Active", "status": "True", "reason": "Ready",
                                   "message": "Can admit new workloads",
                                   "lastTransitionTime": "2026-10-01T00:00:01Z", "observedGeneration": 3}]},
    }


def kai_queue(name: str, gpu: dict[str, Any] | None, parent: str | None = None,
              children: list[str] | None = None) -> dict[str, Any]:
    """A KAI Queue (scheduling.run.ai/v2) as `kubectl get queue -o json` shows it; `gpu` holds any of quota,
    limit, overQuotaWeight (None: no `gpu` key, as for a queue created with CPU and memory only). The queue
    controller lists a parent's `children` in its status."""
    resources: dict[str, Any] = {"cpu": {"quota": -1, "limit": -1, "overQuotaWeight": 1},
                                 "memory": {"quota": -1, "limit": -1, "overQuotaWeight": 1}}
    if gpu is not None:
        resources["gpu"] = gpu
    spec: dict[str, Any] = {"resources": resources}
    if parent is not None:
        spec["parentQueue"] = parent
    return {
        "apiVersion": "scheduling.run.ai/v2", "kind": "Queue",
        "metadata": {"name": name, "uid": f"queue-{name}", "generation": 1,
                     "creationTimestamp": "2026-10-01T00:00:00Z"},
        "spec": spec,
        "status": {"allocated": {"cpu": "0", "memory": "0", "nvidia.com/gpu": "0"},
                   "requested": {"cpu": "0", "memory": "0", "nvidia.com/gpu": "0"},
                   **({"childQueues": children} if children else {})},
    }


def _status(code: int, reason: str, message: str) -> dict[str, Any]:
    return {
        "kind": "Status",
        "apiVersion": "v1",
        "metadata": {},
        "status": "Failure",
        "message": message,
        "reason": reason,
        "code": code,
    }


@dataclass
class Fault:
    """What the next watch (or list) request of a path suffers."""

    drop_after: int | None = None  # events sent before the connection is cut mid-line
    http_status: int | None = None  # answer with this Status instead
    on_list: bool = False


@dataclass(frozen=True)
class Patch:
    """One PATCH request as received: the object's path, its Content-Type and body."""

    path: str
    content_type: str
    body: Any


@dataclass
class Resource:
    objects: dict[str, dict[str, Any]] = field(default_factory=dict)
    log: list[tuple[int, str, dict[str, Any]]] = field(default_factory=list)
    compacted: int = 0
    faults: list[Fault] = field(default_factory=list)


class FakeApiServer:
    def __init__(self) -> None:
        self.resources: dict[str, Resource] = {path: Resource() for path in KINDS}
        self.revision = 100
        self.cond = threading.Condition()
        self.requests: list[tuple[str, dict[str, str], dict[str, str]]] = []
        self.token: str | None = None
        self.forbidden: set[str] = set()
        self.patches: list[Patch] = []
        self.hold_patches_from: int | None = None
        self.refuse_patches = False  # RBAC that lets get and list through but not patch
        self.crds: dict[str, dict[str, Any]] = {}  # name -> CustomResourceDefinition
        self.released = threading.Event()
        handler = type("Handler", (_Handler,), {"api": self})
        self.httpd = ThreadingHTTPServer(("127.0.0.1", 0), handler)
        self.httpd.daemon_threads = True
        self.thread = threading.Thread(target=self.httpd.serve_forever, daemon=True)

    @property
    def url(self) -> str:
        host, port = self.httpd.server_address[:2]
        return f"http://{host!s}:{port}"

    def start(self) -> FakeApiServer:
        self.thread.start()
        return self

    def stop(self) -> None:
        self.released.set()
        self.httpd.shutdown()
        self.httpd.server_close()

    # -- changing the cluster ----------------------------------------------

    def _change(self, path: str, kind: str, obj: dict[str, Any]) -> dict[str, Any]:
        with self.cond:
            self.revision += 1
            obj = copy.deepcopy(obj)
            meta = obj.setdefault("metadata", {}) if isinstance(obj, dict) else {}
            if isinstance(meta, dict):
                meta["resourceVersion"] = str(self.revision)
            key = _key(obj)
            res = self.resources[path]
            if kind == "DELETED":
                res.objects.pop(key, None)
            else:
                res.objects[key] = obj
            res.log.append((self.revision, kind, obj))
            self.cond.notify_all()
            return obj

    def add(self, path: str, *objs: dict[str, Any]) -> None:
        for obj in objs:
            self._change(path, "ADDED", obj)

    def modify(self, path: str, obj: dict[str, Any]) -> None:
        self._change(path, "MODIFIED", obj)

    def delete(self, path: str, obj: dict[str, Any]) -> None:
        self._change(path, "DELETED", obj)

    def compact(self) -> None:
        """Forget history up to now, as etcd compaction does: older watches get 410."""
        with self.cond:
            for res in self.resources.values():
                res.compacted = self.revision
                res.log = []

    def fault(self, path: str, fault: Fault) -> None:
        with self.cond:
            self.resources[path].faults.append(fault)

    def get(self, path: str, namespace: str, name: str) -> dict[str, Any] | None:
        with self.cond:
            return next((copy.deepcopy(o) for o in self.resources[path].objects.values()
                         if o["metadata"].get("namespace") == namespace and o["metadata"].get("name") == name), None)

    def patch(self, path: str, namespace: str, name: str, body: Any) -> dict[str, Any] | None:
        """Apply a merge patch to a stored object, as one MODIFIED change; None when there is no such object."""
        current = self.get(path, namespace, name)
        if current is None:
            return None
        return self._change(path, "MODIFIED", merge_patch(current, body))

    def watch_requests(self, path: str) -> list[dict[str, str]]:
        return [q for p, q, _ in self.requests if p == path and q.get("watch") == "true"]


def merge_patch(target: Any, patch: Any) -> Any:
    """RFC 7386: an object patch merges key by key, null removes a key, anything else replaces."""
    if not isinstance(patch, dict):
        return copy.deepcopy(patch)
    result = dict(target) if isinstance(target, dict) else {}
    for key, value in patch.items():
        if value is None:
            result.pop(key, None)
        else:
            result[key] = merge_patch(result.get(key), value)
    return result


def _selected(obj: Any, selector: str | None) -> bool:
    if not selector:
        return True
    labels = (obj.get("metadata") or {}).get("labels") or {}
    return all(labels.get(k) == v for k, _, v in (term.partition("=") for term in selector.split(",")))


def _key(obj: Any) -> str:
    meta = obj.get("metadata") if isinstance(obj, dict) else None
    if isinstance(meta, dict):
        return f"{meta.get('namespace', '')}/{meta.get('name', '')}/{meta.get('uid', '')}"
    return json.dumps(obj, sort_keys=True)


class _Handler(BaseHTTPRequestHandler):
    api: FakeApiServer
    protocol_version = "HTTP/1.1"

    def log_message(self, format: str, *args: Any) -> None:  # the test output stays quiet
        pass

    def do_GET(self) -> None:
        parts = urlsplit(self.path)
        query = {k: v[-1] for k, v in parse_qs(parts.query).items()}
        headers = {k.lower(): v for k, v in self.headers.items()}
        self.api.requests.append((parts.path, query, headers))
        if self.api.token is not None and headers.get("authorization") != f"Bearer {self.api.token}":
            self._json(401, _status(401, "Unauthorized", "Unauthorized"))
            return
        path, namespace, name = _route(parts.path)
        if path.rsplit("/", 1)[0] == CRDS:
            crd = self.api.crds.get(path.rsplit("/", 1)[1])
            if CRDS in self.api.forbidden:
                self._json(403, _status(403, "Forbidden", "customresourcedefinitions is forbidden"))
            elif crd is None:
                self._json(404, _status(404, "NotFound", "the server could not find the requested resource"))
            else:
                self._json(200, crd)
            return
        if name is not None:
            self._one(path, namespace, name, None)
            return
        if path in self.api.forbidden:
            resource = path.rsplit("/", 1)[-1]
            group = path.split("/")[2] if path.startswith("/apis/") else ""
            self._json(403, _status(403, "Forbidden", (
                f'{resource} is forbidden: User "system:serviceaccount:monitoring:preemptlens" cannot '
                f'{"watch" if "watch" in query else "list"} resource "{resource}" in API group "{group}" '
                "at the cluster scope")))
            return
        if path not in self.api.resources:
            self._json(404, _status(404, "NotFound", "the server could not find the requested resource"))
            return
        watching = query.get("watch", "").lower() in ("true", "1")
        res = self.api.resources[path]
        with self.api.cond:
            fault = None
            if res.faults and res.faults[0].on_list != watching:
                fault = res.faults.pop(0)
        if fault and fault.http_status:
            self._json(fault.http_status, _status(fault.http_status, "InternalError", "injected failure"))
            return
        if watching:
            self._watch(path, namespace, query, fault)
        else:
            self._list(path, namespace, query)

    def do_PATCH(self) -> None:
        parts = urlsplit(self.path)
        headers = {k.lower(): v for k, v in self.headers.items()}
        data = self.rfile.read(int(headers.get("content-length", "0") or 0))
        path, namespace, name = _route(parts.path)
        if self.api.token is not None and headers.get("authorization") != f"Bearer {self.api.token}":
            self._json(401, _status(401, "Unauthorized", "Unauthorized"))
            return
        try:
            body = json.loads(data)
        except ValueError:
            self._json(400, _status(400, "BadRequest", "the body of the request was in an unknown format"))
            return
        self.api.patches.append(Patch(parts.path, headers.get("content-type", ""), body))
        self._one(path, namespace, name, body, headers.get("content-type", ""))

    def _one(self, path: str, namespace: str | None, name: str | None, patch: Any, content_type: str = "") -> None:
        """GET (patch None) or PATCH of one namespaced object."""
        resource = path.rsplit("/", 1)[-1]
        if path not in self.api.resources or namespace is None or name is None or (
                patch is not None and resource not in PATCHABLE):
            self._json(404 if patch is None else 405, _status(404 if patch is None else 405, "NotFound",
                                                              "the server could not find the requested resource"))
            return
        if path in self.api.forbidden or (patch is not None and self.api.refuse_patches):
            group = path.split("/")[2] if path.startswith("/apis/") else ""
            verb = "get" if patch is None else "patch"
            self._json(403, _status(403, "Forbidden", (
                f'{resource}.{group} "{name}" is forbidden: User "system:serviceaccount:monitoring:preemptlens" '
                f'cannot {verb} resource "{resource}" in API group "{group}" in the namespace "{namespace}"')))
            return
        if patch is not None and content_type.split(";")[0].strip() != MERGE_PATCH:
            self._json(415, _status(415, "UnsupportedMediaType",
                                    "the body of the request was in an unknown format - accepted media types include: "
                                    f"application/json-patch+json, {MERGE_PATCH}, application/apply-patch+yaml"))
            return
        obj = self.api.get(path, namespace, name) if patch is None else self.api.patch(path, namespace, name, patch)
        if obj is None:
            self._json(404, _status(404, "NotFound", f'{resource} "{name}" not found'))
            return
        if patch is not None and self.api.hold_patches_from is not None and \
                len(self.api.patches) >= self.api.hold_patches_from:
            self.api.released.wait()
            self.close_connection = True
            return
        self._json(200, obj)

    def _json(self, code: int, body: Any) -> None:
        data = json.dumps(body).encode()
        self.send_response(code)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(data)))
        self.end_headers()
        self.wfile.write(data)

    def _list(self, path: str, namespace: str | None, query: dict[str, str]) -> None:
        kind, api_version = KINDS[path]
        res = self.api.resources[path]
        with self.api.cond:
            revision = self.api.revision
            items = [o for k, o in sorted(res.objects.items())
                     if _in_namespace(o, namespace) and _selected(o, query.get("labelSelector"))]
            compacted = res.compacted
        offset = 0
        if query.get("continue"):
            token = json.loads(base64.b64decode(query["continue"]))
            if token["rv"] < compacted:
                self._json(410, _status(410, "Expired", "The provided continue parameter is too old"))
                return
            revision, offset = token["rv"], token["offset"]
        limit = int(query.get("limit", "0") or 0)
        page = items[offset : offset + limit] if limit else items[offset:]
        meta: dict[str, Any] = {"resourceVersion": str(revision)}
        if limit and offset + limit < len(items):
            token_data = json.dumps({"rv": revision, "offset": offset + limit}).encode()
            meta["continue"] = base64.b64encode(token_data).decode()
            meta["remainingItemCount"] = len(items) - offset - limit
        self._json(200, {"kind": f"{kind}List", "apiVersion": api_version, "metadata": meta, "items": page})

    def _chunk(self, data: bytes) -> None:
        self.wfile.write(f"{len(data):x}\r\n".encode() + data + b"\r\n")
        self.wfile.flush()

    def _watch(self, path: str, namespace: str | None, query: dict[str, str], fault: Fault | None) -> None:
        kind, api_version = KINDS[path]
        res = self.api.resources[path]
        timeout = float(query.get("timeoutSeconds", "1800") or 1800)
        deadline = time.monotonic() + timeout
        self.send_response(200)
        self.send_header("Content-Type", "application/json")
        self.send_header("Transfer-Encoding", "chunked")
        self.end_headers()
        since = int(query.get("resourceVersion", "0") or 0)
        sent = 0
        try:
            if since and since < res.compacted:
                error = _status(410, "Expired", f"too old resource version: {since} ({res.compacted})")
                self._chunk((json.dumps({"type": "ERROR", "object": error}) + "\n").encode())
                self._chunk(b"")
                return
            bookmarked = since
            while True:
                with self.api.cond:
                    pending = [(rv, t, o) for rv, t, o in res.log if rv > since and _in_namespace(o, namespace)]
                    if not pending and time.monotonic() < deadline:
                        if query.get("allowWatchBookmarks") == "true" and self.api.revision > bookmarked:
                            bookmarked = self.api.revision
                            pending = [(bookmarked, "BOOKMARK", {"kind": kind, "apiVersion": api_version,
                                        "metadata": {"resourceVersion": str(bookmarked)}})]
                        else:
                            self.api.cond.wait(min(0.05, max(0.0, deadline - time.monotonic())))
                            continue
                if not pending:
                    break
                for rv, change, obj in pending:
                    line = (json.dumps({"type": change, "object": obj}) + "\n").encode()
                    if fault and fault.drop_after is not None and sent >= fault.drop_after:
                        # Cut the connection in the middle of a line, as a dying proxy would.
                        self._chunk(line[: len(line) // 2])
                        self.connection.shutdown(socket.SHUT_RDWR)
                        self.close_connection = True
                        return
                    self._chunk(line)
                    sent += 1
                    since = max(since, rv) if change != "BOOKMARK" else since
                    bookmarked = max(bookmarked, rv)
            self._chunk(b"")
        except (BrokenPipeError, ConnectionResetError, OSError):
            self.close_connection = True


def _route(path: str) -> tuple[str, str | None, str | None]:
    """Map a namespaced path (/api/v1/namespaces/ns/events[/name]) to its resource, namespace and object name."""
    parts = path.rstrip("/").split("/")
    if "namespaces" in parts:
        i = parts.index("namespaces")
        if len(parts) == i + 3:
            return "/".join(parts[:i] + parts[i + 2 :]), parts[i + 1], None
        if len(parts) == i + 4:
            return "/".join(parts[:i] + parts[i + 2 : i + 3]), parts[i + 1], parts[i + 3]
    return path.rstrip("/"), None, None


def _in_namespace(obj: Any, namespace: str | None) -> bool:
    if namespace is None:
        return True
    meta = obj.get("metadata") if isinstance(obj, dict) else None
    return isinstance(meta, dict) and meta.get("namespace") == namespace


@pytest.fixture
def api() -> Iterator[FakeApiServer]:
    """A fresh fake API server per test (a conftest that imports this name offers the fixture)."""
    server = FakeApiServer().start()
    try:
        yield server
    finally:
        server.stop()
