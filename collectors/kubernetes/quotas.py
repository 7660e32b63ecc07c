"""The quotas and queues Kueue and KAI-Scheduler are configured with: rows of `scheduler_quotas`.

Pure functions over the API's JSON. The collector already lists ClusterQueues and KAI Queues for pool
capacity (pools.py); `Keep` remembers the objects it parsed so that the same list also gives these rows.

- A Kueue ClusterQueue: its GPU `nominalQuota` summed over flavors, and `nominalQuota + borrowingLimit` as
  its limit (no limit when it may borrow without one from a cohort); its cohort is `spec.cohort` (v1beta1)
  or `spec.cohortName` (v1beta2).
- A KAI Queue (scheduling.run.ai/v2): `spec.resources.gpu.quota` and `limit` (-1 is no bound; KAI reads an
  unset limit as 0), its parent `spec.parentQueue`.
"""

from __future__ import annotations

import json
import math
from collections.abc import Callable, Sequence
from typing import Any, Generic, TypeVar

from preemptlens.collectors.kubernetes.events import ParseError, locate, mapping, required_text, text
from preemptlens.collectors.kubernetes.objects import quantity, sequence
from preemptlens.contract import Reject

_T = TypeVar("_T")
_UNLIMITED = -1


class Keep(Generic[_T]):
    """A parse function that also keeps every object it parsed."""

    def __init__(self, parse: Callable[[Any], _T]) -> None:
        self.parse = parse
        self.objects: list[Any] = []

    def __call__(self, obj: Any) -> _T:
        parsed = self.parse(obj)
        self.objects.append(obj)
        return parsed


def _name(obj: Any) -> str:
    if not isinstance(obj, dict):
        raise ParseError("object", f"must be an object (got {type(obj).__name__})")
    return required_text(mapping(obj.get("metadata"), "metadata").get("name"), "metadata.name")


def cluster_queue_row(obj: Any, gpu_resource: str) -> dict[str, Any]:
    """One ClusterQueue's GPU quota, limit and cohort."""
    name = _name(obj)
    spec = mapping(obj.get("spec"), "spec")
    cohort = text(spec.get("cohortName"), "spec.cohortName") or text(spec.get("cohort"), "spec.cohort") or None
    nominal = 0
    borrowing: float = 0.0
    found = False
    groups = "spec.resourceGroups"
    for g, group in enumerate(sequence(spec.get("resourceGroups"), groups)):
        flavors = f"{groups}[{g}].flavors"
        for f, flavor in enumerate(sequence(mapping(group, f"{groups}[{g}]").get("flavors"), flavors)):
            resources = f"{flavors}[{f}].resources"
            for r, res in enumerate(sequence(mapping(flavor, f"{flavors}[{f}]").get("resources"), resources)):
                res = mapping(res, f"{resources}[{r}]")
                if text(res.get("name"), f"{resources}[{r}].name") != gpu_resource:
                    continue
                found = True
                nominal += quantity(res.get("nominalQuota", 0), f"{resources}[{r}].nominalQuota")
                if res.get("borrowingLimit") is None:
                    # in a cohort, a missing borrowingLimit lets the queue borrow all the cohort lends
                    borrowing = math.inf if cohort else borrowing
                else:
                    borrowing += quantity(res["borrowingLimit"], f"{resources}[{r}].borrowingLimit")
    limit = None if not found or math.isinf(borrowing) else float(nominal + borrowing)
    return {"scheduler": "kueue", "kind": "cluster_queue", "name": name, "parent": cohort,
            "gpu_quota": float(nominal) if found else None, "gpu_limit": limit}


def _kai_amount(value: Any, field: str) -> float | None:
    """A number of GPUs; -1 (no bound) is None; unset is 0, as KAI reads it."""
    if value is None:
        return 0.0
    if isinstance(value, bool) or not isinstance(value, int | float) or math.isnan(value):
        raise ParseError(field, f"must be a number (got {value!r})")
    if value == _UNLIMITED:
        return None
    if value < 0:
        raise ParseError(field, f"must be >= 0 or -1 for no bound (got {value!r})")
    return float(value)


def kai_queue_row(obj: Any) -> dict[str, Any]:
    """One KAI Queue's GPU quota, limit and parent."""
    name = _name(obj)
    spec = mapping(obj.get("spec"), "spec")
    gpu = mapping(mapping(spec.get("resources"), "spec.resources").get("gpu"), "spec.resources.gpu")
    return {"scheduler": "kai", "kind": "queue", "name": name,
            "parent": text(spec.get("parentQueue"), "spec.parentQueue") or None,
            "gpu_quota": _kai_amount(gpu.get("quota"), "spec.resources.gpu.quota"),
            "gpu_limit": _kai_amount(gpu.get("limit"), "spec.resources.gpu.limit")}


def rows(cluster_queues: Sequence[Any], kai_queues: Sequence[Any],
         gpu_resource: str) -> tuple[list[dict[str, Any]], list[Reject]]:
    """The rows of `scheduler_quotas` for the objects listed, and a Reject for each object that cannot give
    one (named by the object and the field)."""
    found: list[dict[str, Any]] = []
    rejects: list[Reject] = []
    listed = [(o, "clusterqueues", lambda o: cluster_queue_row(o, gpu_resource)) for o in cluster_queues]
    listed += [(o, "queues", kai_queue_row) for o in kai_queues]
    for obj, what, row_of in listed:
        try:
            r = row_of(obj)
        except ParseError as exc:
            rejects.append(Reject("scheduler_quotas", locate(obj, what), exc.field, f"{exc.field} {exc.reason}",
                                  json.dumps(obj, default=str)[:4096]))
            continue
        found.append({**r, "priority_tier": None, "nodes": None, "_record": f"{r['kind']} {r['name']}"})
    return found, rejects

