"""GPU capacity of the pools the Kubernetes collector puts jobs in.

The pools are those objects names: a Kueue Workload's is the
ResourceFlavor of its GPUs (else its ClusterQueue), a KAI PodGroup's is its
queue, a GPU pod that Kueue does not manage is in `cluster`. Pure functions
over the API's JSON; the collector lists the objects.

The pools partition the GPUs, because readiness adds them up per cluster.
Where the capacity is read:

- Nodes (`status.allocatable` of the GPU resource), when the credentials may
  list them. Each GPU node counts in one pool: that of the most specific GPU
  flavor selecting it (the node carries all the flavor's `spec.nodeLabels`;
  most labels wins, then the first name), so that a flavor whose labels extend
  another's (`h100` + `spot=true`) or repeat them takes its nodes once.
  `cluster` holds the GPU nodes that no GPU flavor selects (every one without
  Kueue). GPU flavors are those a ClusterQueue gives a quota of the GPU
  resource: a CPU flavor (often `default`, without labels) selects every node
  and would otherwise take them all. When ClusterQueues cannot be read, the
  flavors with node labels count. Cordoned and drained nodes count: capacity
  is what the pool is built to hold.
- Kueue quotas otherwise (RBAC 403 on nodes is common for read-only
  monitoring accounts), and for a GPU flavor no ResourceFlavor object
  describes: the sum over ClusterQueues of the flavor's `nominalQuota` of the
  GPU resource (the quotas of a cohort add up to what its queues may use).
  `cluster` then has no capacity.
- A ClusterQueue pool (no flavor was known): the sum of that queue's GPU
  quotas. Only for queues that jobs name as their pool: every other queue
  would count quota that its flavors' pools count already.
- A KAI queue pool: the GPUs the queue is guaranteed, `spec.resources.gpu`
  `quota` capped by its `limit` (KAI caps at the limit, and reads an unset
  one as 0; -1 is unlimited), whole GPUs. Only leaf queues: KAI places jobs
  in leaves only, and a parent's quota is what its children share, so
  counting it too would count their GPUs twice. A queue without a bound (both
  -1) is guaranteed no share of its own and has no capacity: its jobs run on
  the GPUs no queue is guaranteed. Those GPUs stay in `cluster`, which is
  then the nodes no flavor selects less the queues' guarantees.

Rows come from collectors.base.capacity_changes, as for Slurm's pools.
"""

from __future__ import annotations

import logging
import math
from collections.abc import Collection, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from preemptlens.collectors.kubernetes.events import ParseError, mapping, required_text, text
from preemptlens.collectors.kubernetes.objects import CLUSTER_POOL, MAX_COUNT, quantity, sequence

log = logging.getLogger(__name__)

NODES, QUOTA, KAI_QUOTA = "node allocatable", "Kueue nominalQuota", "KAI Queue quota"
# KAI's value for "no bound" in a Queue's quota and limit.
_UNLIMITED = -1


@dataclass(frozen=True)
class Node:
    name: str
    labels: Mapping[str, str]
    gpus: int


@dataclass(frozen=True)
class Flavor:
    name: str
    node_labels: Mapping[str, str]


@dataclass(frozen=True)
class ClusterQueue:
    name: str
    quotas: Mapping[str, int]  # flavor -> nominalQuota of the GPU resource


@dataclass(frozen=True)
class KaiQueue:
    name: str
    parent: str | None
    gpus: int | None  # whole GPUs guaranteed; None: unbounded


@dataclass(frozen=True)
class Capacity:
    gpus: int
    per_node: int | None  # the most GPUs of one node; unknown from quotas
    source: str


def _labels(value: Any, field: str) -> dict[str, str]:
    # An empty label value is valid ("gpu=" selects nodes labelled gpu with no value).
    return {str(k): text(v, f"{field}.{k}") or "" for k, v in mapping(value, field).items()}


def _name(obj: Any) -> str:
    if not isinstance(obj, Mapping):
        raise ParseError("object", f"must be an object (got {type(obj).__name__})")
    return required_text(mapping(obj.get("metadata"), "metadata").get("name"), "metadata.name")


def parse_node(obj: Any, gpu_resource: str) -> Node:
    name = _name(obj)
    labels = _labels(mapping(obj.get("metadata"), "metadata").get("labels"), "metadata.labels")
    allocatable = mapping(mapping(obj.get("status"), "status").get("allocatable"), "status.allocatable")
    gpus = quantity(allocatable[gpu_resource], f"status.allocatable.{gpu_resource}") \
        if gpu_resource in allocatable else 0
    return Node(name, labels, gpus)


def parse_flavor(obj: Any) -> Flavor:
    name = _name(obj)
    return Flavor(name, _labels(mapping(obj.get("spec"), "spec").get("nodeLabels"), "spec.nodeLabels"))


def parse_cluster_queue(obj: Any, gpu_resource: str) -> ClusterQueue:
    """`spec.resourceGroups[].flavors[].resources[]`, the same in v1beta1 and v1beta2."""
    name = _name(obj)
    quotas: dict[str, int] = {}
    groups = "spec.resourceGroups"
    for g, group in enumerate(sequence(mapping(obj.get("spec"), "spec").get("resourceGroups"), groups)):
        flavors = f"{groups}[{g}].flavors"
        for f, flavor in enumerate(sequence(mapping(group, f"{groups}[{g}]").get("flavors"), flavors)):
            flavor = mapping(flavor, f"{flavors}[{f}]")
            flavor_name = required_text(flavor.get("name"), f"{flavors}[{f}].name")
            resources = f"{flavors}[{f}].resources"
            for r, res in enumerate(sequence(flavor.get("resources"), resources)):
                res = mapping(res, f"{resources}[{r}]")
                if text(res.get("name"), f"{resources}[{r}].name") == gpu_resource:
                    quota = quantity(res.get("nominalQuota", 0), f"{resources}[{r}].nominalQuota")
                    quotas[flavor_name] = quotas.get(flavor_name, 0) + quota
    return ClusterQueue(name, quotas)


def _kai_amount(value: Any, field: str) -> float:
    """A Queue's GPU quota or limit: a number of GPUs (fractions allowed), unset is 0, -1 unbounded (inf)."""
    if value is None:
        return 0.0
    if isinstance(value, bool) or not isinstance(value, (int, float)) or math.isnan(value):
        raise ParseError(field, f"must be a number (got {value!r})")
    if value == _UNLIMITED:
        return math.inf
    if value < 0:
        raise ParseError(field, f"must be >= 0 or -1 for no bound (got {value!r})")
    return float(value)


def parse_kai_queue(obj: Any) -> KaiQueue:
    """A KAI `Queue` (scheduling.run.ai/v2): `spec.parentQueue`, `spec.resources.gpu.{quota,limit}`."""
    name = _name(obj)
    spec = mapping(obj.get("spec"), "spec")
    gpu = mapping(mapping(spec.get("resources"), "spec.resources").get("gpu"), "spec.resources.gpu")
    quota = _kai_amount(gpu.get("quota"), "spec.resources.gpu.quota")
    limit = _kai_amount(gpu.get("limit"), "spec.resources.gpu.limit")
    guaranteed = min(quota, limit)
    if guaranteed > MAX_COUNT and not math.isinf(guaranteed):
        raise ParseError("spec.resources.gpu", f"is out of range (got quota {quota}, limit {limit})")
    # A fraction of a GPU is no whole GPU of the pool; what is left over stays in `cluster`.
    gpus = None if math.isinf(guaranteed) else math.floor(guaranteed)
    return KaiQueue(name, text(spec.get("parentQueue"), "spec.parentQueue") or None, gpus)


def _of_nodes(nodes: Sequence[Node]) -> Capacity:
    return Capacity(sum(n.gpus for n in nodes), max((n.gpus for n in nodes), default=None), NODES)


def _selects(flavor: Flavor, node: Node) -> bool:
    return all(node.labels.get(k) == v for k, v in flavor.node_labels.items())


def _kai_guarantees(queues: Sequence[KaiQueue]) -> dict[str, int]:
    """Leaf queue -> GPUs it is guaranteed, for the leaves with a bound."""
    parents = {q.parent for q in queues if q.parent is not None}
    return {q.name: q.gpus for q in queues if q.name not in parents and q.gpus is not None}


def capacity(
    nodes: Sequence[Node] | None,
    flavors: Sequence[Flavor] | None,
    queues: Sequence[ClusterQueue] | None,
    queue_pools: Collection[str],
    kai_queues: Sequence[KaiQueue] | None = None,
) -> dict[str, Capacity]:
    """Pool -> capacity from what could be read (None: that list could not be read)."""
    quota_of: dict[str, int] = {}
    for queue in queues or []:
        for name, quota in queue.quotas.items():
            quota_of[name] = quota_of.get(name, 0) + quota
    guaranteed = _kai_guarantees(kai_queues or [])
    found: dict[str, Capacity] = {}
    per_node: int | None = None
    if nodes is not None:
        gpu_flavors = [
            f for f in flavors or [] if (f.name in quota_of if queues is not None else bool(f.node_labels))
        ]
        # The most specific flavor first, so that the first one selecting a node owns it.
        gpu_flavors.sort(key=lambda f: (-len(f.node_labels), f.name))
        members: dict[str, list[Node]] = {f.name: [] for f in gpu_flavors}
        rest: list[Node] = []
        for node in (n for n in nodes if n.gpus > 0):
            owner = next((f.name for f in gpu_flavors if _selects(f, node)), None)
            (rest if owner is None else members[owner]).append(node)
        found.update((name, _of_nodes(held)) for name, held in members.items())
        found[CLUSTER_POOL] = _of_nodes(rest)
        if guaranteed:
            shared = found[CLUSTER_POOL]
            promised = sum(guaranteed.values())
            if promised > shared.gpus:
                log.warning("KAI queues are guaranteed %d GPUs, the nodes no flavor selects hold %d: "
                            "the pools add up to more than the cluster", promised, shared.gpus)
            # The queues run on these nodes: their guarantees are carved out of `cluster`, not added to it.
            found[CLUSTER_POOL] = Capacity(max(0, shared.gpus - promised), shared.per_node,
                                           f"{NODES} less {KAI_QUOTA}s")
            per_node = shared.per_node
    for name, quota in quota_of.items():
        found.setdefault(name, Capacity(quota, None, QUOTA))
    for queue in queues or []:
        if queue.name in queue_pools:
            found.setdefault(queue.name, Capacity(sum(queue.quotas.values()), None, QUOTA))
    for name, gpus in guaranteed.items():
        found.setdefault(name, Capacity(gpus, per_node, KAI_QUOTA))
    return found
