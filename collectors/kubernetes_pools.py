"""GPU capacity of the pools the Kubernetes collector puts jobs in.

The pools are those kubernetes_objects names: a Kueue Workload's is the
ResourceFlavor of its GPUs (else its ClusterQueue), a GPU pod that Kueue does
not manage is in `cluster`. Pure functions over the API's JSON; the collector
lists the objects.

Where the capacity is read:

- Nodes (`status.allocatable` of the GPU resource), when the credentials may
  list them. A GPU flavor's pool holds the nodes carrying all of its
  `spec.nodeLabels`; `cluster` holds the GPU nodes that no GPU flavor
  selects (every one without Kueue), so that a node counts in one pool only
  unless flavors overlap. GPU flavors are those a ClusterQueue gives a quota
  of the GPU resource: a CPU flavor (often `default`, without labels) selects
  every node and would otherwise take them all. When ClusterQueues cannot be
  read, the flavors with node labels count. Cordoned and drained nodes count:
  capacity is what the pool is built to hold.
- Kueue quotas otherwise (RBAC 403 on nodes is common for read-only
  monitoring accounts), and for a GPU flavor no ResourceFlavor object
  describes: the sum over ClusterQueues of the flavor's `nominalQuota` of the
  GPU resource (the quotas of a cohort add up to what its queues may use).
  `cluster` then has no capacity.
- A ClusterQueue pool (no flavor was known): the sum of that queue's GPU
  quotas. Only for queues that jobs name as their pool: every other queue
  would count quota that its flavors' pools count already.

Rows come from collectors.base.capacity_changes, as for Slurm's pools.
"""

from __future__ import annotations

from collections.abc import Collection, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from collectors.kubernetes_events import ParseError, mapping, required_text, text
from collectors.kubernetes_objects import CLUSTER_POOL, quantity, sequence

NODES, QUOTA = "node allocatable", "Kueue nominalQuota"


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


def _of_nodes(nodes: Sequence[Node]) -> Capacity:
    return Capacity(sum(n.gpus for n in nodes), max((n.gpus for n in nodes), default=None), NODES)


def capacity(
    nodes: Sequence[Node] | None,
    flavors: Sequence[Flavor] | None,
    queues: Sequence[ClusterQueue] | None,
    queue_pools: Collection[str],
) -> dict[str, Capacity]:
    """Pool -> capacity from what could be read (None: that list could not be read)."""
    quota_of: dict[str, int] = {}
    for queue in queues or []:
        for name, quota in queue.quotas.items():
            quota_of[name] = quota_of.get(name, 0) + quota
    found: dict[str, Capacity] = {}
    if nodes is not None:
        gpu_nodes = [n for n in nodes if n.gpus > 0]
        claimed: set[str] = set()
        for flavor in flavors or []:
            gpu_flavor = flavor.name in quota_of if queues is not None else bool(flavor.node_labels)
            if not gpu_flavor:
                continue
            members = [n for n in gpu_nodes if all(n.labels.get(k) == v for k, v in flavor.node_labels.items())]
            claimed.update(n.name for n in members)
            found[flavor.name] = _of_nodes(members)
        found[CLUSTER_POOL] = _of_nodes([n for n in gpu_nodes if n.name not in claimed])
    for name, quota in quota_of.items():
        found.setdefault(name, Capacity(quota, None, QUOTA))
    for queue in queues or []:
        if queue.name in queue_pools:
            found.setdefault(queue.name, Capacity(sum(queue.quotas.values()), None, QUOTA))
    return found
