"""The scheduler core: job specs + cluster + policy in, what happened out.

Pure and deterministic (no randomness, no I/O), so threshold tuning can replay a
recorded workload under other policies. A discrete-event loop over arrivals, run
ends, requeue holds and min-run-time expiries; after all events of one instant,
every pool that changed gets one scheduling pass.

Model, as the raw tables must show it:
- A run starts at `start`. A restart (run >= 2) first spends the job's
  `warmup_s` reloading; only then does useful work accrue, one work-second per
  second. Progress is the job's cumulative saved work (`restored_step`) plus the
  work done since.
- Periodic checkpoints count useful work: one every `checkpoint_interval_s`
  work-seconds since the run's useful work began, stamped when the state is
  captured (writes are asynchronous and free). Warm-up and idle stretches do not
  advance them.
- Jobs of <= gpus_per_node GPUs pack onto one node (best fit); bigger jobs take
  whole nodes and must be a multiple of gpus_per_node.
- A first run spends the job's `startup_s` before its useful work begins.
- Pending jobs start in tier order, then eligible time (or, with the policy's
  queue order "submit", their job's first submission: a requeued run keeps its
  place), then arrival order. Backfill (the policy's `backfill`): under
  "reserve" (Slurm's sched/backfill, EASY backfill) the first job in that order
  that neither fits nor preempts in a pass gets a reserved start: the earliest
  time it fits as the GPUs held now are let go (runs at their planned end or
  kill time, GPUs promised to a preemptor when its run would end), on the nodes
  it would take then. A job after it starts in that pass only if it fits now
  and either ends by the reserved start (planned from the job's time limit,
  as Slurm's backfill plans it, or where the source states none for the work
  it has left: `_planned_end`) or keeps off the reserved
  nodes but for the GPUs there beyond the reserved job's (none under the
  Slurm model: its backfill reserves whole nodes); one that preempts
  picks its victims as
  ever but waits if its GPUs would be on the reserved nodes beyond those spare
  ones (it would hold them past the reserved start; Slurm's backfill may
  preempt under the same rule). A start beyond the policy's backfill window
  (Slurm's bf_window), or never (the runs in the way have no time limit),
  is no reservation: the jobs after it take whatever fits, as Slurm's
  backfill does with unlimited jobs. One reservation per pool and pass: it
  is what keeps a big high-tier job from waiting for ever behind a stream of
  small ones (greedy backfill starves it, and a replay "without preemption"
  then overstates what preemption saves). Under "greedy" every lower job takes
  any GPUs that fit it (Kueue's BestEffortFIFO). A job that does not fit and
  whose tier may preempt picks victims. The generic model picks them on the
  node(s) that cost the fewest evicted GPUs; on a node the lowest-tier, youngest
  runs go first and only until the job fits. The Slurm, Kueue and KAI models
  follow those schedulers' own choice (`_modelled_victims`). Victims must be
  preemptible, of a tier the policy lets this tier evict, and have run for at
  least their tier's minimum run time. Under the policy's victim order "cost"
  the same eligible runs are candidates, but the node(s) and the set of victims
  on them are those of the least live cost (`victim_cost_gpu_s`), ties by the
  generic order. With a trigger threshold (`trigger_wait_s`) a job preempts
  only once it has waited that long since it became eligible; until then it
  waits like any other. The GPUs it needs are reserved for the preemptor at
  once and it starts when the last victim has let go.
- Signal at time t: a job with `final_checkpoint` whose `save_s` fits in the
  grace time captures a final checkpoint at t, stops working and exits at
  t + save_s (or, with `kill_at_grace_end`, holds its GPUs until the kill);
  any other victim keeps running until the kill at t + grace. A victim that
  finishes on its own before then completes normally. The run's end is the
  preemption time; lost GPU-seconds = gpus x (end - last checkpoint of the run,
  or run start when it has none), so a start-up or warm-up counts as lost; the
  restart's warm-up is the preemption's cost, unless the restart is preempted
  before it saves anything (its own loss then holds the warm-up).
- A victim is requeued at its end (new run, submit = end) and is eligible after
  `requeue_hold_s`; it restarts from its last checkpoint.
"""

from __future__ import annotations

import gc
import heapq
import itertools
import math
from bisect import bisect_left, bisect_right, insort
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass, field
from operator import itemgetter
from typing import Any

from preemptlens.analytics.simulator.model import JobSpec, PolicyChange, PolicyConfig, PoolSpec, Protection
from preemptlens.contract import TIER_RANK

_END, _ELIGIBLE, _MINRUN, _CHANGE, _PASS = 0, 1, 2, 3, 4
_RANK_TIER = {rank: tier for tier, rank in TIER_RANK.items()}


@dataclass(slots=True)
class Run:
    job: int  # index into the job list
    run: int
    submit_s: float
    eligible_s: float
    restored_step: float = 0.0
    start_s: float | None = None
    # Planned end while running; the actual end once over; None if still going at the horizon.
    end_s: float | None = None
    state: str = "pending"
    gpu_ids: tuple[int, ...] = ()
    warmup_end_s: float = 0.0
    # Stretches of useful work: (wall start, wall end, cumulative work at start).
    work: list[tuple[float, float, float]] = field(default_factory=list)
    idle: list[tuple[float, float]] = field(default_factory=list)
    checkpoints: list[tuple[float, float]] = field(default_factory=list)  # (time, step)
    fails: bool = False
    signal_s: float | None = None
    preemptor: int | None = None  # job index
    final_checkpoint: bool = False

    def step_at(self, t: float) -> float:
        """Cumulative useful work of the job at time t within this run."""
        step = self.restored_step
        for ws, we, w0 in self.work:
            if t <= ws:
                break
            step = w0 + (min(t, we) - ws)
        return step

    def last_checkpoint(self) -> tuple[float, float] | None:
        return self.checkpoints[-1] if self.checkpoints else None

    def checkpoint_time_at(self, t: float) -> float | None:
        """Time of the run's last checkpoint at or before t; a running run's list also holds its planned ones."""
        k = bisect_right(self.checkpoints, t, key=_TIME)
        return self.checkpoints[k - 1][0] if k else None


_TIME = itemgetter(0)


def schedule_interval(schedule: tuple[tuple[float, float], ...], age_s: float) -> float:
    """The wait from a checkpoint at `age_s` to the next under a checkpoint schedule (JobSpec.checkpoint_schedule):
    the interval of the step in force, but never past the next step's start by more than that step's own
    interval (a long interval while preemptions are rare must not carry a run deep into the age they come)."""
    k = 0
    while k + 1 < len(schedule) and schedule[k + 1][0] <= age_s:
        k += 1
    interval = schedule[k][1]
    if k + 1 < len(schedule):
        interval = min(interval, schedule[k + 1][0] - age_s + schedule[k + 1][1])
    return interval


def lost_progress_s(end_s: float, run_start_s: float, last_checkpoint_s: float | None) -> float:
    """Progress a run loses when it ends at `end_s`: the time since its last checkpoint, else since its start.

    The ledger's rule (docs/figures.md, lost progress of basis checkpoint or assumed): the simulator's truth
    and the cost-aware victim choice both read it from here.
    """
    return end_s - (run_start_s if last_checkpoint_s is None else last_checkpoint_s)


def _reaches(cost_mark: float | None, share_mark: float | None, cost: float, share: float | None) -> bool:
    """Whether a job's live cost or near-completion share reaches a mark (an unset mark holds nothing), as the
    actions' high and low marks read (analytics/actions.py)."""
    return ((cost_mark is not None and cost >= cost_mark)
            or (share_mark is not None and share is not None and share >= share_mark))


def victim_cost_gpu_s(job: JobSpec, run: Run, t: float, requeue_hold_s: float) -> float:
    """The live cost of preempting `run` of `job` at t, GPU-seconds: GPUs x (the progress it would lose
    ending now + its warm-up on restart + the requeue hold before it may run again).

    Work thrown away and waiting in one sum, on purpose: the choice weighs both. The warm-up and the hold
    are those the scheduler applies to the restart (and the truth reports), not estimates.
    """
    assert run.start_s is not None
    lost = lost_progress_s(t, run.start_s, run.checkpoint_time_at(t))
    return job.gpus * (lost + job.warmup_s + requeue_hold_s)


def _may_reach(job: JobSpec, run: Run, t: float, requeue_hold_s: float, cost_mark: float | None,
               share_mark: float | None) -> bool:
    """Whether `run` may reach an action's high mark at t, from bounds that need neither its checkpoints nor
    its work stretches: its live cost is at most that of losing everything since its start
    (`victim_cost_gpu_s` with no checkpoint, rounding being monotone), and its work at most its restored
    work plus the time since its start (kept a millionth off the mark: the stretches' sums round)."""
    assert run.start_s is not None
    if cost_mark is not None and job.gpus * ((t - run.start_s) + job.warmup_s + requeue_hold_s) >= cost_mark:
        return True
    return (share_mark is not None and job.work_s > 0
            and (run.restored_step + (t - run.start_s)) >= share_mark * job.work_s * (1 - 1e-6))


@dataclass(frozen=True)
class PreemptionTruth:
    victim: int  # job index
    victim_run: int
    time_s: float
    preemptor: int
    pool: str
    gpus: int
    run_start_s: float
    last_checkpoint_s: float | None
    lost_gpu_s: float
    restart_s: float | None
    warmup_s: float

    @property
    def requeue_delay_s(self) -> float | None:
        return None if self.restart_s is None else self.restart_s - self.time_s


@dataclass(frozen=True)
class HoardingTruth:
    job: int
    run: int
    idle_start_s: float
    idle_end_s: float
    gpus: int

    @property
    def idle_gpu_s(self) -> float:
        return self.gpus * (self.idle_end_s - self.idle_start_s)


@dataclass(frozen=True)
class Layout:
    """Nodes and GPUs of the cluster, numbered in pool order."""

    pools: tuple[PoolSpec, ...]
    node_names: tuple[str, ...]
    node_pool: tuple[int, ...]
    node_first_gpu: tuple[int, ...]
    gpu_node: tuple[int, ...]

    @classmethod
    def of(cls, pools: Sequence[PoolSpec]) -> Layout:
        names: list[str] = []
        node_pool: list[int] = []
        first: list[int] = []
        gpu_node: list[int] = []
        for p, pool in enumerate(pools):
            for n in range(pool.nodes):
                first.append(len(gpu_node))
                gpu_node.extend([len(names)] * pool.gpus_per_node)
                names.append(f"{pool.name}-{n + 1:04d}")
                node_pool.append(p)
        return cls(tuple(pools), tuple(names), tuple(node_pool), tuple(first), tuple(gpu_node))

    @property
    def gpus(self) -> int:
        return len(self.gpu_node)

    def gpu_index(self, gpu: int) -> int:
        return gpu - self.node_first_gpu[self.gpu_node[gpu]]


@dataclass
class Outcome:
    jobs: Sequence[JobSpec]
    layout: Layout
    policy: PolicyConfig
    horizon_s: float
    runs: list[Run]
    job_runs: list[list[int]]  # per job, indices into runs

    def preemptions(self) -> list[PreemptionTruth]:
        found = []
        for j, run_ids in enumerate(self.job_runs):
            if len(run_ids) < 2:
                continue  # a preempted run is always followed by its requeued one
            for k, r in enumerate(run_ids):
                run = self.runs[r]
                if run.state != "preempted":
                    continue
                assert run.start_s is not None and run.end_s is not None and run.preemptor is not None
                nxt = self.runs[run_ids[k + 1]] if k + 1 < len(run_ids) else None
                last = run.last_checkpoint()
                last_s = None if last is None else last[0]
                warmup = self.jobs[j].warmup_s
                if nxt is not None and nxt.state == "preempted" and nxt.last_checkpoint() is None:
                    # The restart lost everything since its start, its warm-up with it: counted there, not here.
                    warmup = 0.0
                found.append(
                    PreemptionTruth(
                        victim=j,
                        victim_run=run.run,
                        time_s=run.end_s,
                        preemptor=run.preemptor,
                        pool=self.jobs[j].pool,
                        gpus=self.jobs[j].gpus,
                        run_start_s=run.start_s,
                        last_checkpoint_s=last_s,
                        lost_gpu_s=self.jobs[j].gpus * lost_progress_s(run.end_s, run.start_s, last_s),
                        restart_s=None if nxt is None else nxt.start_s,
                        warmup_s=warmup,
                    )
                )
        return found

    def hoarding(self) -> list[HoardingTruth]:
        found = []
        for run in self.runs:
            if run.start_s is None:
                continue
            stop = self.horizon_s if run.end_s is None else run.end_s
            for a, b in run.idle:
                if a < stop:
                    found.append(HoardingTruth(run.job, run.run, a, min(b, stop), self.jobs[run.job].gpus))
        return found


@contextmanager
def paused_gc() -> Iterator[None]:
    """Cyclic garbage collection off, e.g. while a replay runs and its outcome is read.

    A replay builds about a million lists and objects that live until its outcome is
    dropped and form no reference cycles: collections would only rescan them, once
    per growth of a quarter during the loop and up to three times after it. Objects
    freed before the collector is back on (an outcome dropped inside the block) cost
    it nothing.
    """
    collecting = gc.isenabled()
    gc.disable()
    try:
        yield
    finally:
        if collecting:
            gc.enable()


def _exempt_until(policy: PolicyConfig, start: float, min_run: float) -> float:
    """When a run started at `start` has run its minimum run time and may be evicted.

    Slurm keeps a job's start in whole seconds (time_t) and a job is exempt while the whole-second now is before
    that start plus PreemptExemptTime (src/slurmctld/acct_policy.c `acct_policy_is_job_preempt_exempt` and
    `acct_policy_get_preemptable_time`, slurm-22-05-11-1): the exemption ends on the whole second, up to a second
    before the run's true start plus the time (the replay's times count from a whole second, the window's start).
    """
    if policy.scheduler == "slurm":
        return math.floor(start) + min_run
    return start + min_run


class _Scheduler:
    def __init__(
        self,
        jobs: Sequence[JobSpec],
        pools: Sequence[PoolSpec],
        policy: PolicyConfig,
        horizon_s: float,
        grid_s: float,
        protect_share: float | None = None,
        changes: Sequence[PolicyChange] = (),
    ) -> None:
        self.jobs = jobs
        self.layout = Layout.of(pools)
        self.policy = policy
        self.horizon = horizon_s
        self.grid = grid_s
        # Near-completion protection: a run whose job has done this share of its work is no victim.
        self.protect_share = protect_share
        self.changes = tuple(changes)
        self.pool_index = {p.name: i for i, p in enumerate(pools)}
        self.gpn = [p.gpus_per_node for p in pools]
        lay = self.layout
        self.gpu_node = lay.gpu_node
        self.owner = [-1] * lay.gpus  # run index holding the GPU
        self.reserved = [-1] * lay.gpus  # job index the GPU is promised to
        self.node_free = [self.gpn[lay.node_pool[n]] for n in range(len(lay.node_names))]
        # Per pool, per free-GPU count, the nodes with exactly that many free GPUs, in node order: placing
        # takes the lowest and the victim searches walk them in order, without sorting a pool's nodes per ask.
        self.buckets: list[list[list[int]]] = [[[] for _ in range(g + 1)] for g in self.gpn]
        for n, free in enumerate(self.node_free):
            self.buckets[lay.node_pool[n]][free].append(n)
        self.node_runs: list[set[int]] = [set() for _ in lay.node_names]
        self.pool_nodes: list[list[int]] = [[] for _ in pools]
        for n, p in enumerate(lay.node_pool):
            self.pool_nodes[p].append(n)
        self.run_nodes: dict[int, tuple[int, ...]] = {}  # running run -> its nodes
        # Per pool, its running runs as (planned end or kill time, run), sorted: a reservation reads the GPUs
        # let go in time order and stops once the blocked job fits. The planned end (`_planned_end`) is not
        # always the run's end (a warm-up or idle stretches outlast it, a failing run ends before it): `planned`
        # keeps each running run's key.
        self.pool_ends: list[list[tuple[float, int]]] = [[] for _ in pools]
        self.planned: dict[int, float] = {}
        # Per node, the unsignalled runs that some tier may evict, as (tier rank, -start,
        # -job, run, GPUs): sorted in victim order, and the victim search walks these
        # instead of every GPU of the pool.
        self.node_victims: list[list[tuple[int, float, int, int, int]]] = [[] for _ in lay.node_names]
        self.node_reserved = [0] * len(lay.node_names)  # GPUs promised to a preemptor
        # Per pool, per tier rank, per GPU count, pending (eligible, seq, job) in start order:
        # split by size so a pass skips every ask too big to start or to preempt for. A job
        # turns pending at its eligible time, which is now, so appending keeps the order.
        self.pending: list[list[dict[int, list[tuple[float, int, int]]]]] = [
            [{} for _ in TIER_RANK] for _ in pools
        ]
        # Beside each of those queues, its entries as (planned length, entry), sorted: behind a reserved start,
        # the jobs that end by it (`_ending_by`) are a prefix, so a pass goes straight to them instead of
        # walking every pending job that would outlast it (a backlog that grows with the cluster, at every
        # pass). A pool whose queue left start order (a policy change between queue orders) walks as before.
        self.pending_lengths: list[list[dict[int, list[tuple[float, tuple[float, int, int]]]]]] = [
            [{} for _ in TIER_RANK] for _ in pools
        ]
        self.unindexed: set[int] = set()
        self.runs: list[Run] = []
        self.job_runs: list[list[int]] = [[] for _ in jobs]
        self.waiting_slots: dict[int, list[int]] = {}  # preemptor job -> GPUs reserved for it
        self.awaiting: dict[int, int] = {}  # preemptor job -> reserved GPUs still held by victims
        self.events: list[tuple[float, int, int, int]] = []
        self.seq = 0
        self.dirty: set[int] = set()
        # Per pool, a count of the changes that can move a blocked job's reserved start (a start other than a
        # backfill, a signal, a policy change), and the last reservation: (count then, job, reserved start,
        # reserved nodes -> GPUs on them a run outlasting the start may still take). A pass reuses it while the
        # count and the job are the same, so a pool that stays blocked does not rebuild it at every event.
        self.pool_gen = [0] * len(pools)
        # It also keeps the jobs found to end after its start (a job's planned length is fixed).
        self.reservation: list[tuple[int, int, float, dict[int, int], set[int]] | None] = [None] * len(pools)
        # Per pool, the policy in force: a scheduled change (a pilot) swaps one pool's rules at its time.
        self.pool_policy = [policy] * len(pools)
        self.pool_protect = [protect_share] * len(pools)
        # preemptlens's action in force (PolicyConfig.protection), replayed by `_act`: per held job [run it holds,
        # level, held since, applied at, pool, GPUs]; jobs not held again before a time; the last cycle run; the
        # runs seen so far and the restarts among them not started yet (what slurm_protect may hold).
        self.holds: dict[int, list[Any]] = {}
        self.hold_cooling: dict[int, float] = {}
        self.acted_at = -math.inf
        self.runs_seen = 0
        self.restarts: set[int] = set()
        self.preemptor = -1  # the job whose victims are being searched
        self.victim_ranks: list[list[tuple[bool, ...]]] = [[] for _ in pools]
        self.victim_floor: list[list[int]] = [[] for _ in pools]
        self.rank_preempts: list[list[bool]] = [[] for _ in pools]
        self.preempting_ranks: list[list[int]] = [[] for _ in pools]
        for p in range(len(pools)):
            self._set_policy(p, policy, protect_share)
        # A job is kept in the victim lists when any policy it may meet can evict it.
        can_be_victim = {v for pol in (policy, *(c.policy for c in self.changes))
                         for t in TIER_RANK for v in pol.victims_of(t)}
        for k, change in enumerate(self.changes):
            for name in change.pools:
                if name not in self.pool_index:
                    raise ValueError(f"policy change at {change.at_s:g} s: pool {name!r} is not in the cluster")
            if change.at_s < horizon_s:
                self._push(change.at_s, _CHANGE, k)
        for job in jobs:
            self._check(job)
        self.job_pool = [self.pool_index[job.pool] for job in jobs]
        self.job_rank = [TIER_RANK[job.tier] for job in jobs]
        self.job_victim = [job.preemptible and job.tier in can_be_victim for job in jobs]
        # Arrivals are known up front: kept sorted outside the event heap, and at one
        # instant they come before every other event, as they would if pushed first.
        self.arrivals = sorted((job.submit_s, j) for j, job in enumerate(jobs) if job.submit_s < horizon_s)

    def _set_policy(self, pool: int, policy: PolicyConfig, protect_share: float | None) -> None:
        self.pool_policy[pool] = policy
        self.pool_protect[pool] = protect_share
        victim_tiers = {t: policy.victims_of(t) for t in TIER_RANK}
        ranks = range(len(_RANK_TIER))
        # Per preemptor tier rank: which tier ranks it may evict, and the lowest of them.
        self.victim_ranks[pool] = [tuple(_RANK_TIER[v] in victim_tiers[_RANK_TIER[p]] for v in ranks) for p in ranks]
        self.victim_floor[pool] = [min((TIER_RANK[v] for v in victim_tiers[_RANK_TIER[p]]), default=0) for p in ranks]
        self.rank_preempts[pool] = [any(self.victim_ranks[pool][rank]) for rank in ranks]
        self.preempting_ranks[pool] = [rank for rank in ranks if self.rank_preempts[pool][rank]]

    def _change(self, k: int, t: float) -> None:
        """Put change `k` in force in its pools; runs that the new minimum run time frees later get their event."""
        change = self.changes[k]
        for name in change.pools:
            pool = self.pool_index[name]
            self._set_policy(pool, change.policy, change.protect_share)
            self.pool_gen[pool] += 1
            self.dirty.add(pool)
            for free_at in sorted({_exempt_until(change.policy, -e[1], change.policy.min_run_of(_RANK_TIER[e[0]]))
                                   for n in self.pool_nodes[pool] for e in self.node_victims[n]}):
                if free_at > t:
                    self._push(free_at, _MINRUN, pool)
            trigger = change.policy.trigger_wait_s
            for eligible in sorted({e[0] for queues in self.pending[pool] for q in queues.values() for e in q}):
                if trigger > 0 and eligible + trigger > t:
                    self._push(eligible + trigger, _MINRUN, pool)

    def _check(self, job: JobSpec) -> None:
        if job.pool not in self.pool_index:
            raise ValueError(f"job {job.job_id}: pool {job.pool!r} is not in the cluster")
        pool = self.layout.pools[self.pool_index[job.pool]]
        if job.gpus < 1 or job.gpus > pool.gpus:
            raise ValueError(f"job {job.job_id}: gpus={job.gpus} does not fit pool {pool.name} ({pool.gpus})")
        if job.gpus > pool.gpus_per_node and job.gpus % pool.gpus_per_node:
            raise ValueError(f"job {job.job_id}: gpus={job.gpus} spans nodes but is not whole nodes")
        if job.tier not in TIER_RANK:
            raise ValueError(f"job {job.job_id}: unknown tier {job.tier!r}")

    def _push(self, t: float, kind: int, item: int) -> None:
        heapq.heappush(self.events, (t, self.seq, kind, item))
        self.seq += 1

    # -- GPU bookkeeping ---------------------------------------------------

    def _node_free_delta(self, node: int, delta: int) -> None:
        bucket = self.buckets[self.layout.node_pool[node]]
        free = self.node_free[node]
        nodes = bucket[free]
        del nodes[bisect_left(nodes, node)]
        self.node_free[node] = free + delta
        insort(bucket[free + delta], node)

    def _place(self, pool: int, gpus: int) -> list[int]:
        gpn = self.gpn[pool]
        buckets = self.buckets[pool]
        first = self.layout.node_first_gpu
        if gpus <= gpn:
            k = gpus
            while not buckets[k]:
                k += 1
            node = buckets[k][0]
            owner = self.owner
            reserved = self.reserved
            return [g for g in range(first[node], first[node] + gpn) if owner[g] < 0 and reserved[g] < 0][:gpus]
        nodes = buckets[gpn][: gpus // gpn]
        return [g for n in nodes for g in range(first[n], first[n] + gpn)]

    # -- runs ----------------------------------------------------------------

    def _enqueue(self, j: int, submit: float, eligible: float, restored: float) -> None:
        job_runs = self.job_runs[j]
        run = Run(j, len(job_runs) + 1, submit, eligible, restored)
        job_runs.append(len(self.runs))
        self.runs.append(run)
        if eligible <= submit:
            self._make_pending(j, eligible)
        else:
            self._push(eligible, _ELIGIBLE, j)

    def _make_pending(self, j: int, eligible: float) -> None:
        job = self.jobs[j]
        pool = self.job_pool[j]
        queue = self.pending[pool][self.job_rank[j]].setdefault(job.gpus, [])
        entry: tuple[float, int, int]
        if self.pool_policy[pool].queue_order == "submit":
            # A requeued run keeps its job's place: sorted in by the first submission.
            entry = (job.submit_s, j, j)
            insort(queue, entry)
        else:
            # It turns pending now, so appending keeps the order.
            entry = (eligible, self.seq, j)
            if queue and queue[-1] > entry:
                self.unindexed.add(pool)  # after entries of the other order: the queue left start order
            queue.append(entry)
            self.seq += 1
        # The run's planned length: `_planned_end` adds it to the start (exactly: at 0 it is the length).
        length = self._planned_end(j, 0.0)
        if length != length:
            self.unindexed.add(pool)  # NaN: no order to go by
        insort(self.pending_lengths[pool][self.job_rank[j]].setdefault(job.gpus, []), (length, entry))
        self.dirty.add(pool)
        trigger = self.pool_policy[pool].trigger_wait_s
        if trigger > 0 and self.rank_preempts[pool][self.job_rank[j]]:
            # Reaching the trigger threshold matters like a run turning old enough to evict.
            self._push(eligible + trigger, _MINRUN, pool)

    def _start(self, j: int, t: float, gpu_ids: list[int], backfill: bool = False) -> None:
        job = self.jobs[j]
        r = self.job_runs[j][-1]
        run = self.runs[r]
        run.start_s = t
        run.state = "running"
        run.gpu_ids = tuple(gpu_ids)
        gpu_node = self.gpu_node
        reserved = self.reserved
        owner = self.owner
        node_reserved = self.node_reserved
        taken: dict[int, int] = {}  # node -> GPUs taken from its free ones
        promised = False
        for g in gpu_ids:
            node = gpu_node[g]
            if reserved[g] >= 0:
                promised = True
                reserved[g] = -1
                node_reserved[node] -= 1
                taken.setdefault(node, 0)
            else:
                taken[node] = taken.get(node, 0) + 1
            owner[g] = r
        node_runs = self.node_runs
        for node, count in taken.items():
            node_runs[node].add(r)
            if count:
                self._node_free_delta(node, -count)
        self.run_nodes[r] = tuple(taken)
        planned = self._planned_end(j, t)
        self._plan(job, run, t)
        assert run.end_s is not None
        self.planned[r] = planned
        insort(self.pool_ends[self.job_pool[j]], (planned, r))
        if not backfill:
            self._keep_reservation(self.job_pool[j], planned, taken, promised)
        heapq.heappush(self.events, (run.end_s, self.seq, _END, r))
        self.seq += 1
        if self.job_victim[j]:
            entry = (self.job_rank[j], -t, -j, r, job.gpus)
            node_victims = self.node_victims
            for node in taken:
                insort(node_victims[node], entry)
            policy = self.pool_policy[self.job_pool[j]]
            min_run = policy.min_run_of(job.tier)
            if min_run > 0:
                self._push(_exempt_until(policy, t, min_run), _MINRUN, self.job_pool[j])

    def _lay_out(self, job: JobSpec, run_no: int, restored: float, start: float,
                 work: list[tuple[float, float, float]], idle: list[tuple[float, float]]) -> tuple[float, float, bool]:
        """(end, end of the start-up or warm-up, fails) of a run that nothing interrupts, filling `work` and
        `idle`."""
        t = start + (job.warmup_s if run_no > 1 else job.startup_s)
        warmup_end = t
        done = restored
        target = job.work_s
        fails = False
        if run_no == 1 and job.fail_after_work_s is not None and job.fail_after_work_s < job.work_s:
            target = job.fail_after_work_s
            fails = True
        if job.hoard_active_s is not None and job.hoard_idle_s is not None:
            while done < target and t < self.horizon:
                # Idle stretches follow the user's clock, so they begin on the sample grid.
                idle_at = math.ceil((t + job.hoard_active_s) / self.grid) * self.grid
                if idle_at - t >= target - done:
                    break
                work.append((t, idle_at, done))
                done += idle_at - t
                idle.append((idle_at, idle_at + job.hoard_idle_s))
                t = idle_at + job.hoard_idle_s
        if done < target:
            work.append((t, t + (target - done), done))
            t += target - done
        return t, warmup_end, fails

    def _planned_end(self, j: int, start: float) -> float:
        """When job j's latest run, started at `start`, is planned to end: at its start plus the job's time
        limit where the source states one (inf where it states none), as Slurm's backfill plans a running job's
        end (src/plugins/sched/backfill/backfill.c, slurm-22-05-11-1: start plus the time limit, a year for an
        unlimited one, so no reservation behind it falls within bf_window); else once it has done the work it
        has left, which a reservation then reads as the run's time limit.

        Not its start-up or warm-up, idle stretches or a failure: a replay of the recorded window cannot know
        them for a run the window never showed (a job still pending at its end, a victim's restart that never
        came, one preempted before it would have failed), and a reservation built on them would make its own
        past unreproducible: the simulated demo's replay missed it by half the lost GPU-hours. Slurm plans
        with the job's time limit, which states no more than that either. A run may so outlast its planned
        end: a reservation then expects its GPUs at once (`_reserved_start`).
        """
        job = self.jobs[j]
        if job.time_limit_s is not None:
            return start + job.time_limit_s
        left = job.work_s - self.runs[self.job_runs[j][-1]].restored_step
        return start + left if left > 0 else start

    def _keep_reservation(self, pool: int, end: float, taken: dict[int, int], promised: bool) -> None:
        """Whether the pool's last reservation still holds after a start other than a backfill (which keeps
        it by construction): a run ending by the reserved start, or taking only GPUs the reservation leaves
        over, keeps it (and uses those up); any other start, or a preemptor's (its end was an estimate),
        invalidates it and the next blocked pass rebuilds it."""
        cached = self.reservation[pool]
        if cached is None or cached[0] != self.pool_gen[pool]:
            return
        if not promised:
            if end <= cached[2]:
                return
            spare = cached[3]
            for node, count in taken.items():
                if node in spare:
                    spare[node] -= count
                    if spare[node] < 0:
                        break
            else:
                return
        self.pool_gen[pool] += 1

    def _plan(self, job: JobSpec, run: Run, start: float) -> None:
        """Lay out a run that nothing interrupts: work, idle stretches, checkpoints, end."""
        work = run.work
        t, run.warmup_end_s, fails = self._lay_out(job, run.run, run.restored_step, start, work, run.idle)
        if fails:
            run.fails = True
        run.end_s = t
        interval = job.checkpoint_interval_s
        if interval:
            since = run.restored_step
            add = run.checkpoints.append
            schedule = job.checkpoint_schedule
            k = 1
            at = since + (schedule_interval(schedule, 0.0) if schedule else interval)
            for ws, we, w0 in work:
                top = w0 + (we - ws)
                while at <= top:
                    when = ws + (at - w0)
                    if when >= t:
                        break
                    add((when, at))
                    k += 1
                    # a fixed cadence multiplies (no drift over thousands of checkpoints); a schedule steps
                    at = at + schedule_interval(schedule, at - since) if schedule else since + k * interval

    def _signal(self, r: int, preemptor: int, t: float) -> None:
        run = self.runs[r]
        j = run.job
        job = self.jobs[j]
        assert run.start_s is not None and run.end_s is not None
        entry = (self.job_rank[j], -run.start_s, -j, r, job.gpus)
        for node in self.run_nodes[r]:
            self.node_victims[node].remove(entry)
        self.pool_gen[self.job_pool[j]] += 1
        policy = self.pool_policy[self.job_pool[j]]
        grace = policy.grace_of(job.tier)
        final = job.final_checkpoint and bool(job.checkpoint_interval_s) and 0 < job.save_s <= grace
        stop = t + job.save_s if final and not policy.kill_at_grace_end else t + grace
        run.signal_s = t
        planned = self.planned[r]
        if stop < planned:
            # The kill time is known: the run is let go by then whatever its plan.
            ends = self.pool_ends[self.job_pool[j]]
            del ends[bisect_left(ends, (planned, r))]
            insort(ends, (stop, r))
            self.planned[r] = stop
        if run.end_s <= stop:
            return  # finishes on its own before the kill; the preemptor just waits for it
        run.preemptor = preemptor
        run.end_s = stop
        worked_until = t if final else stop
        step = run.step_at(worked_until)
        run.work = [(ws, min(we, worked_until), w0) for ws, we, w0 in run.work if ws < worked_until]
        run.idle = [(a, min(b, stop)) for a, b in run.idle if a < stop]
        run.checkpoints = [(c, s) for c, s in run.checkpoints if c < worked_until]
        if final:
            run.final_checkpoint = True
            run.checkpoints.append((t, step))
        self._push(stop, _END, r)

    def _end(self, r: int, t: float) -> None:
        run = self.runs[r]
        if run.state != "running" or run.end_s != t:
            return  # superseded by a preemption
        j = run.job
        job = self.jobs[j]
        run.state = "preempted" if run.preemptor is not None else ("failed" if run.fails else "completed")
        self.dirty.add(self.job_pool[j])
        nodes = self.run_nodes.pop(r)
        ends = self.pool_ends[self.job_pool[j]]
        del ends[bisect_left(ends, (self.planned.pop(r), r))]
        for node in nodes:
            self.node_runs[node].discard(r)
        if self.job_victim[j] and run.signal_s is None:
            assert run.start_s is not None
            entry = (self.job_rank[j], -run.start_s, -j, r, job.gpus)
            for node in nodes:
                self.node_victims[node].remove(entry)
        gpu_node = self.gpu_node
        owner = self.owner
        reserved = self.reserved
        awaiting = self.awaiting
        freed: dict[int, int] = {}  # node -> GPUs back to its free ones
        for g in run.gpu_ids:
            owner[g] = -1
            promised = reserved[g]
            if promised < 0:
                node = gpu_node[g]
                freed[node] = freed.get(node, 0) + 1
                continue
            awaiting[promised] -= 1
            if awaiting[promised] == 0:
                del awaiting[promised]
                self._start(promised, t, self.waiting_slots.pop(promised))
        for node, count in freed.items():
            self._node_free_delta(node, count)
        if run.state == "preempted":
            last = run.last_checkpoint()
            restored = run.restored_step if last is None else last[1]
            self._enqueue(j, t, t + self.pool_policy[self.job_pool[j]].requeue_hold_s, restored)

    # -- scheduling ------------------------------------------------------------

    def _room(self, pool: int) -> int:
        """The biggest ask that starts now: whole free nodes, else the most free GPUs on one node.

        Asks of more than one node are whole nodes (see `_check`), so one number decides both.
        """
        buckets = self.buckets[pool]
        gpn = self.gpn[pool]
        whole = len(buckets[gpn])
        if whole:
            return whole * gpn
        for k in range(gpn - 1, 0, -1):
            if buckets[k]:
                return k
        return 0

    def _waits_to_preempt(self, pool: int) -> bool:
        pending = self.pending[pool]
        return any(pending[rank] for rank in self.preempting_ranks[pool])

    def _schedule(self, pool: int, t: float) -> None:
        room = self._room(pool)
        pending = self.pending[pool]
        reserve = self.pool_policy[pool].backfill == "reserve"
        # Under "reserve", the first job in start order that can neither start nor preempt gets a reserved start
        # (`_reserve`); the jobs after it only backfill (`_outlasting_gpus`), and preempt only off the reserved
        # GPUs (`_preempt`). One reservation per pool and pass: Slurm's backfill reserves
        # for every job it considers (up to bf_max_job_test), but the first one is what keeps a big job from
        # starving, and one keeps the pass cheap.
        held: tuple[int, float, dict[int, int], set[int]] | None = None
        outlast_fails = math.inf  # the fewest GPUs a run outlasting the reserved start found no room for
        indexed = pool not in self.unindexed
        for rank in range(len(pending) - 1, -1, -1):
            by_size = pending[rank]
            # Per size, the jobs of this rank that end by the reserved start, in start order (`_ending_by`).
            ending: dict[int, list[tuple[float, int, int]]] = {}
            may_preempt = self.rank_preempts[pool][rank]
            looking = reserve and held is None  # this rank's first blocked job would get the reservation
            if not by_size or (room == 0 and not may_preempt and not looking):
                continue
            # The fewest GPUs no preemption could free in this pass: bigger asks fail too.
            unfreeable = math.inf
            trigger = self.pool_policy[pool].trigger_wait_s
            # Room and unfreeable only shrink during a pass, so an ask above both is
            # skipped unseen: merge the size queues that can act, in start order. A job
            # that may be reserved for is seen whatever its size.
            heads: list[tuple[tuple[float, int, int], int, int]] = []
            for size, queue in by_size.items():
                if size <= room or (may_preempt and size < unfreeable) or looking:
                    heads.append((queue[0], size, 0))
            if not heads:
                continue
            heapq.heapify(heads)
            done: dict[int, list[int]] = {}  # size -> positions taken out of its queue
            while heads:
                entry, size, i = heads[0]
                if size <= room and held is None:
                    self._start(entry[2], t, self._place(pool, size))
                    room = self._room(pool)
                    done.setdefault(size, []).append(i)
                elif size <= room and held is not None:
                    gpu_ids = None
                    late = held[3]
                    if size >= outlast_fails and indexed:
                        # Only a job that ends by the reserved start could: go straight to the next one.
                        ahead = ending.get(size)
                        if ahead is None:
                            ahead = ending[size] = self._ending_by(pool, rank, size, t, held[1])
                        k = bisect_left(ahead, entry)
                        if k == len(ahead):
                            heapq.heappop(heads)
                            continue
                        if ahead[k] != entry:
                            heapq.heapreplace(heads, (ahead[k], size, bisect_left(by_size[size], ahead[k], i)))
                            continue
                        # Gone by the reserved start: it may go anywhere (EASY backfill).
                        gpu_ids = self._place(pool, size)
                    else:
                        if size >= outlast_fails and entry[2] in late:
                            # Only a job that ends by the reserved start could: step over those known not to.
                            queue = by_size[size]
                            k = i + 1
                            while k < len(queue) and queue[k][2] in late:
                                k += 1
                            if k < len(queue):
                                heapq.heapreplace(heads, (queue[k], size, k))
                            else:
                                heapq.heappop(heads)
                            continue
                        if entry[2] not in late:
                            if self._planned_end(entry[2], t) <= held[1]:
                                # Gone by the reserved start: it may go anywhere (EASY backfill).
                                gpu_ids = self._place(pool, size)
                            else:
                                # Started in a later pass it ends later still.
                                late.add(entry[2])
                        if gpu_ids is None and size < outlast_fails:
                            gpu_ids = self._outlasting_gpus(pool, size, held[2])
                            if gpu_ids is None:
                                # Nothing of this size or more fits off the reservation in the rest of the pass.
                                outlast_fails = size
                        if gpu_ids is None:
                            # It would delay the reserved start; a later job of the same size may not.
                            queue = by_size[size]
                            if i + 1 < len(queue):
                                heapq.heapreplace(heads, (queue[i + 1], size, i + 1))
                            else:
                                heapq.heappop(heads)
                            continue
                    self._start(entry[2], t, gpu_ids, backfill=True)
                    room = self._room(pool)
                    done.setdefault(size, []).append(i)
                elif may_preempt and size < unfreeable and t - entry[0] >= trigger:
                    if self._preempt(pool, entry[2], t, held):
                        room = self._room(pool)
                        done.setdefault(size, []).append(i)
                    else:
                        unfreeable = size
                        if reserve and held is None:
                            held = self._reserve(pool, entry[2], t)
                        heapq.heappop(heads)
                        continue
                else:
                    if reserve and held is None:
                        held = self._reserve(pool, entry[2], t)
                    heapq.heappop(heads)
                    continue
                queue = by_size[size]
                if i + 1 < len(queue):
                    heapq.heapreplace(heads, (queue[i + 1], size, i + 1))
                else:
                    heapq.heappop(heads)
            lengths_of = self.pending_lengths[pool][rank]
            for size, taken in done.items():
                queue = by_size[size]
                lengths = lengths_of[size]
                for i in reversed(taken):
                    entry = queue.pop(i)
                    # The run started keeps the pending run's planned length (its restore point is the same).
                    del lengths[bisect_left(lengths, (self._planned_end(entry[2], 0.0), entry))]
                if not queue:
                    del by_size[size]
                    del lengths_of[size]

    def _ending_by(self, pool: int, rank: int, size: int, t: float, start: float) -> list[tuple[float, int, int]]:
        """The pending jobs of `rank` asking `size` GPUs that, started at t, are planned to end by `start`
        (`_planned_end`), in start order: the first ones by planned length, as t + length grows with it."""
        lengths = self.pending_lengths[pool][rank][size]
        cut = bisect_left(lengths, True, key=lambda e: t + e[0] > start)
        return sorted(e[1] for e in lengths[:cut])

    def _reserve(self, pool: int, j: int, t: float) -> tuple[int, float, dict[int, int], set[int]]:
        """Job j's reserved start and the GPUs on its reserved nodes that a run outlasting it may still take:
        (j, start, node -> GPUs, jobs found to end after the start). Reused from an earlier pass while nothing
        that could move it happened."""
        cached = self.reservation[pool]
        if cached is not None and cached[0] == self.pool_gen[pool] and cached[1] == j and t < cached[2]:
            return cached[1], cached[2], cached[3], cached[4]
        start, spare = self._reserved_start(pool, j, t)
        late: set[int] = set()
        self.reservation[pool] = (self.pool_gen[pool], j, start, spare, late)
        return j, start, spare, late

    def _reserved_start(self, pool: int, j: int, t: float) -> tuple[float, dict[int, int]]:
        """The earliest time job j fits, as the GPUs held now are let go (a run at its planned end or kill time,
        a GPU promised to a preemptor when that preemptor's run would end), and the nodes it would take then,
        each with the GPUs left on it beyond the job's (none on whole nodes). (inf, {}) if it never fits or
        only beyond the policy's backfill window (Slurm's bf_window: no reservation, so nothing is held back
        for it); now if it would have fitted earlier (a run outlasting its planned end is expected to go at
        once)."""
        need = self.jobs[j].gpus
        gpn = self.gpn[pool]
        runs, owner, reserved, gpu_node = self.runs, self.owner, self.reserved, self.gpu_node
        node_reserved = self.node_reserved
        # The free GPUs of the nodes that gain some, over node_free: a copy of every node's per reservation
        # would cost the cluster's size at every blocked pass.
        free = self.node_free
        avail: dict[int, int] = {}
        jobs, run_nodes, planned = self.jobs, self.run_nodes, self.planned

        def from_runs() -> Iterator[tuple[float, int, int]]:
            for end, r in self.pool_ends[pool]:
                nodes = run_nodes[r]
                if len(nodes) == 1 and not node_reserved[nodes[0]]:
                    yield end, nodes[0], jobs[runs[r].job].gpus
                    continue
                for n in nodes:
                    if node_reserved[n]:
                        break
                else:
                    for n in nodes:
                        yield end, n, gpn
                    continue
                for g in runs[r].gpu_ids:
                    # A GPU promised to a preemptor is let go when the preemptor's run ends (below).
                    if reserved[g] < 0:
                        yield end, gpu_node[g], 1

        promised: list[tuple[float, int, int]] = []
        for p, slots in self.waiting_slots.items():
            if self.job_pool[p] != pool:
                continue
            # The preemptor starts when its last victim lets go, then runs its planned length.
            begins = max((planned[owner[g]] for g in slots if owner[g] >= 0), default=t)
            end = self._planned_end(p, begins)
            promised.extend((end, gpu_node[g], 1) for g in slots)
        releases = heapq.merge(from_runs(), sorted(promised)) if promised else from_runs()
        whole = set(self.buckets[pool][gpn])
        wanted = need // gpn
        touched: list[int] = []
        at = -math.inf
        horizon = t + self.pool_policy[pool].backfill_window_s
        # Slurm's backfill reserves whole nodes (backfill.c, slurm-22-05-11-1: its node_space map holds node
        # bitmaps): no run outlasting the reserved start may use the reserved node, even on GPUs left over.
        whole_node = self.pool_policy[pool].scheduler == "slurm"
        # The GPUs let go at one time, then whether the job fits: a sentinel closes the last time.
        for end, n, count in itertools.chain(releases, ((math.inf, -1, 0),)):
            if end > horizon or end == math.inf:
                # Beyond the window, or never (runs without a time limit): no reservation there.
                end, n, count = math.inf, -1, 0
            if end != at and touched:
                if need <= gpn:
                    # Only a node that just gained GPUs can fit it now: none did before.
                    fits = [m for m in touched if avail[m] >= need]
                    if fits:
                        m = min(fits, key=lambda m: (avail[m], m))
                        return max(at, t), {m: 0 if whole_node else avail[m] - need}
                else:
                    whole.update(m for m in touched if avail[m] >= gpn)
                    if len(whole) >= wanted:
                        # As `_place`, the lowest-numbered whole nodes.
                        return max(at, t), {m: 0 for m in sorted(whole)[:wanted]}
                touched = []
            if n < 0:
                break
            at = end
            avail[n] = avail.get(n, free[n]) + count
            touched.append(n)
        return math.inf, {}

    def _outlasting_gpus(self, pool: int, size: int, spare: dict[int, int]) -> list[int] | None:
        """The GPUs a job that fits now but would outlast the reserved start takes: off the reserved nodes,
        except for the GPUs there beyond the reserved job's (`spare`, which it uses up); None if there are none.

        A run planned to end by the reserved start goes anywhere instead. The engine plans a run from the job's
        time limit where the source states one, else for the work it needs (`_planned_end`).
        """
        gpn = self.gpn[pool]
        buckets = self.buckets[pool]
        first = self.layout.node_first_gpu
        if size <= gpn:
            barred = {n for n, left in spare.items() if left < size}
            node = -1
            for k in range(size, gpn + 1):
                # The lowest node of the bucket that is not barred: at most len(barred) steps.
                node = next((n for n in buckets[k] if n not in barred), -1)
                if node >= 0:
                    break
            else:
                return None
            if node in spare:
                spare[node] -= size
            owner, reserved = self.owner, self.reserved
            return [g for g in range(first[node], first[node] + gpn) if owner[g] < 0 and reserved[g] < 0][:size]
        nodes = [n for n in buckets[gpn] if n not in spare][: size // gpn]
        if len(nodes) < size // gpn:
            return None
        return [g for n in nodes for g in range(first[n], first[n] + gpn)]

    def _protected(self, r: int, t: float) -> bool:
        """Near-completion protection (the engine's own knob), or a hold of preemptlens's action on this run."""
        run = self.runs[r]
        share = self.pool_protect[self.job_pool[run.job]]
        if share is not None and not run.step_at(t) < share * self.jobs[run.job].work_s:
            return True
        hold = self.holds.get(run.job)
        if hold is None or hold[0] != r:
            return False
        protection = self.pool_policy[hold[4]].protection
        if protection is None or protection.action != "kueue_boost":
            return True  # a non-preemptible PodGroup, or a QOS nothing preempts
        # Kueue's candidates have a lower priority than the preemptor's: a boost keeps the run only from the
        # preemptors its boosted priority reaches (unknown priorities: the boost only orders the candidates).
        mine, theirs = self.jobs[run.job].priority_value, self.jobs[self.preemptor].priority_value
        return mine is not None and theirs is not None and mine + hold[1] >= theirs

    def _boost(self, r: int) -> int:
        """The Kueue boost on run r (0 when none): it orders the candidates of one class."""
        hold = self.holds.get(self.runs[r].job)
        return hold[1] if hold is not None and hold[0] == r else 0

    # -- preemptlens's actions, replayed (PolicyConfig.protection) ---------------------

    def _act(self, t: float) -> None:
        """Run the action's cycles up to the last one at or before t, as analytics/actions.py runs one
        (model.Protection), when a victim search needs the holds. Every cycle since the last search is run, so
        hysteresis, the caps and the victims slurm_protect saw waiting are as the action had them; a run that
        ended before t is not seen by the cycles before its end (no search could have evicted it then)."""
        protections = [p.protection for p in self.pool_policy]
        cycle = min((p.cycle_s for p in protections if p is not None), default=None)
        if cycle is None:
            if self.holds:
                self.holds.clear()  # the action is no longer in force (a policy change)
            return
        last = math.floor(t / cycle)
        first = 0 if self.acted_at == -math.inf else math.floor(self.acted_at / cycle) + 1
        for k in range(first, last + 1):
            self._cycle(protections, k * cycle)
        self.acted_at = max(self.acted_at, last * cycle)

    def _cycle(self, protections: Sequence[Protection | None], now: float) -> None:
        """One cycle of the action at `now`: releases, Kueue boost steps, then new holds within the caps."""
        live = self._live(protections, now)
        released: set[int] = set()
        for j, hold in list(self.holds.items()):
            protection = protections[hold[4]]
            if protection is None or self._releases(protection, j, hold, live.get(j), now):
                del self.holds[j]
                released.add(j)
        held_gpus: dict[int, int] = {}
        for hold in self.holds.values():
            held_gpus[hold[4]] = held_gpus.get(hold[4], 0) + hold[5]
        candidates = []
        for j, (r, pool, cost, share) in live.items():
            protection = protections[pool]
            assert protection is not None
            if (j not in self.holds and j not in released and self.hold_cooling.get(j, -math.inf) <= now
                    and _reaches(protection.cost_high_gpu_s, protection.near_completion_high, cost, share)):
                candidates.append((-(cost or 0.0), -(share or 0.0), self.jobs[j].job_id, j, r, pool))
        candidates.sort()
        for _, _, _, j, r, pool in candidates:
            protection = protections[pool]
            assert protection is not None
            gpus = self.jobs[j].gpus
            if len(self.holds) >= protection.max_jobs:
                continue
            if protection.max_pool_share < 1 and (
                    held_gpus.get(pool, 0) + gpus > protection.max_pool_share * self.layout.pools[pool].gpus):
                continue
            self.holds[j] = [r, protection.boost_step, now, now, pool, gpus]
            held_gpus[pool] = held_gpus.get(pool, 0) + gpus

    def _live(self, protections: Sequence[Protection | None], now: float
              ) -> dict[int, tuple[int, int, float, float | None]]:
        """What the action reads at `now`, per job: (its run, pool, live cost, near-completion share). Running
        runs, or (slurm_protect) victims waiting to restart, within max_hold_s of their preemption, with the
        cost they had when preempted (before any final checkpoint at the signal)."""
        live: dict[int, tuple[int, int, float, float | None]] = {}
        runs, jobs = self.runs, self.jobs
        for idx in range(self.runs_seen, len(runs)):
            if runs[idx].run > 1:
                self.restarts.add(idx)
        self.runs_seen = len(runs)
        for pool, protection in enumerate(protections):
            if protection is None:
                continue
            hold_s = self.pool_policy[pool].requeue_hold_s
            if not protection.while_waiting:
                cost_mark, share_mark = protection.cost_high_gpu_s, protection.near_completion_high
                holds = self.holds
                for n in self.pool_nodes[pool]:
                    for r in self.node_runs[n]:
                        run = runs[r]
                        if run.start_s is None or run.start_s > now or (
                                run.signal_s is not None and run.signal_s <= now):
                            continue
                        job = jobs[run.job]
                        if run.job not in holds and not _may_reach(job, run, now, hold_s, cost_mark, share_mark):
                            # Neither held nor a candidate: the cycle reads nothing of it (at every cycle, most
                            # of a fleet's runs; their live cost was most of the cycle's time).
                            continue
                        live[run.job] = (r, pool, victim_cost_gpu_s(job, run, now, hold_s),
                                         run.step_at(now) / job.work_s if job.work_s > 0 else None)
                continue
            for r in sorted(self.restarts):
                run = runs[r]
                if run.start_s is not None and run.start_s <= now:
                    self.restarts.discard(r)
                    continue
                if self.job_pool[run.job] != pool or run.submit_s > now or run.submit_s < now - protection.max_hold_s:
                    continue
                before = runs[self.job_runs[run.job][run.run - 2]]
                if before.signal_s is None:
                    continue
                job = jobs[run.job]
                signal = math.nextafter(before.signal_s, -math.inf)
                live[run.job] = (r, pool, victim_cost_gpu_s(job, before, signal, hold_s),
                                 before.step_at(signal) / job.work_s if job.work_s > 0 else None)
        return live

    def _releases(self, protection: Protection, j: int, hold: list[Any],
                  seen: tuple[int, int, float, float | None] | None, now: float) -> bool:
        """Whether the cycle at `now` releases job j's hold, as actions._Cycle.release_reason decides; a Kueue
        boost still held steps one boost_step towards what its cost calls for, no more often than min_hold_s."""
        r, level, since, applied = hold[0], hold[1], hold[2], hold[3]
        run = self.runs[r]
        if protection.while_waiting and run.start_s is not None and run.start_s <= now:
            # its protected run ended by now; while it runs the QOS cannot change
            return run.state != "running" and run.end_s is not None and run.end_s <= now
        if seen is None or seen[0] != r:
            return True  # ended, or no longer waiting within max_hold_s
        if now - since >= protection.max_hold_s:
            self.hold_cooling[j] = now + protection.max_hold_s
            return True
        if protection.release_after_checkpoint and not protection.while_waiting:
            checkpoint = run.checkpoint_time_at(now)
            if checkpoint is not None and checkpoint > since:
                return True
        cost, share = seen[2], seen[3]
        if now - applied >= protection.min_hold_s and not _reaches(
                protection.cost_low_gpu_s, protection.near_completion_low, cost, share):
            return True
        if protection.max_boost > protection.boost_step and now - applied >= protection.min_hold_s:
            steps = max(1, math.floor(cost / protection.cost_high_gpu_s)) if protection.cost_high_gpu_s else 1
            step = protection.boost_step
            target = min(protection.max_boost, step * steps) // step * step
            if target != level:
                hold[1] = min(target, level + step) if target > level else max(target, level - step)
                hold[3] = now
        return False

    def _victim_order(self, r: int) -> tuple[int, float, int]:
        run = self.runs[r]
        assert run.start_s is not None
        return (self.job_rank[run.job], -run.start_s, -run.job)

    def _evictable(self, pool: int, rank: int, t: float) -> Callable[[int, float, int], bool]:
        """Whether a victim entry (its tier, -start and run, as node_victims holds them) may be evicted at t
        for a preemptor of `rank` in `pool`: a tier the policy lets it evict, run at least min_run_s, and not
        protected. One rule for every victim search, by fewest GPUs or by least cost."""
        allowed = self.victim_ranks[pool][rank]
        policy = self.pool_policy[pool]
        min_runs = [policy.min_run_of(_RANK_TIER[v]) for v in range(len(_RANK_TIER))]
        self._act(t)
        protected = self._protected if self.pool_protect[pool] is not None or self.holds else None
        exempt_above = policy.min_exempt_priority
        runs, jobs = self.runs, self.jobs
        whole = policy.scheduler == "slurm"  # see `_exempt_until`

        def exempt(r: int) -> bool:
            value = jobs[runs[r].job].priority_value
            return exempt_above is not None and value is not None and value > exempt_above

        def evictable(tier: int, neg_start: float, r: int) -> bool:
            old_enough = (t >= _exempt_until(policy, -neg_start, min_runs[tier]) if whole and min_runs[tier] > 0
                          else t + neg_start >= min_runs[tier])
            return (bool(allowed[tier]) and old_enough
                    and not (protected and protected(r, t)) and not (exempt_above is not None and exempt(r)))

        return evictable

    def _best_node(self, pool: int, need: int, rank: int, t: float) -> tuple[int, list[int]] | None:
        """The node whose eviction costs least, (evicted GPUs, highest victim tier, node), and its victims.

        Nodes are visited from most to fewest free GPUs, as `need - free` is a lower
        bound of a node's evicted GPUs; the search stops once no node left can beat
        the best so far, so the result is the minimum over all nodes of the pool.
        """
        gpn = self.gpn[pool]
        buckets = self.buckets[pool]
        node_victims = self.node_victims
        floor = self.victim_floor[pool][rank]
        evictable = self._evictable(pool, rank, t)
        best: tuple[int, int, int] | None = None
        best_victims: list[int] = []
        # The pass only preempts for a job that fits no node as it is, so every node has < need free.
        for free in range(need - 1, -1, -1):
            bound = need - free
            if best is not None and best[0] < bound:
                break
            for n in buckets[free]:
                if best is not None and best < (bound, floor, n):
                    break
                have = free
                cost = 0
                victims: list[int] = []
                for tier, neg_start, _, r, gpus in node_victims[n]:
                    if not evictable(tier, neg_start, r):
                        continue
                    victims.append(r)
                    cost += gpus
                    have += gpus if gpus < gpn else gpn
                    if have >= need or (best is not None and cost > best[0]):
                        break
                if have < need:
                    continue
                key = (cost, tier, n)  # the walk stopped at the last victim, the highest tier
                if best is None or key < best:
                    best, best_victims = key, victims
        return None if best is None else (best[2], best_victims)

    def _best_nodes(self, pool: int, need: int, rank: int, t: float) -> list[tuple[int, list[int]]] | None:
        """The `need` whole nodes cheapest to clear, cheapest first, with their victims.

        A node qualifies when it is free, or nothing on it is promised and every run
        on it may be evicted; its cost is (evicted GPUs, highest victim tier, node).
        Free nodes cost nothing; for the others `gpus per node - free` bounds the
        evicted GPUs from below, so nodes are visited from most free down and the
        search stops once no node left can make the cheapest `need`.
        """
        gpn = self.gpn[pool]
        buckets = self.buckets[pool]
        node_victims = self.node_victims
        floor = self.victim_floor[pool][rank]
        evictable = self._evictable(pool, rank, t)
        chosen: list[tuple[int, int, int]] = [(0, -1, n) for n in buckets[gpn]]
        costs: list[tuple[int, int, int]] = []
        wanted = need - len(chosen)
        if wanted <= 0:
            chosen.sort()
            return [(c[2], []) for c in chosen[:need]]
        for free in range(gpn - 1, -1, -1):
            bound = gpn - free
            if len(costs) >= wanted and costs[wanted - 1] < (bound, floor, -1):
                break
            for n in buckets[free]:
                if len(costs) >= wanted and costs[wanted - 1] < (bound, floor, n):
                    break
                victims = node_victims[n]
                # A holder no tier may evict, or one already signalled, is in node_runs but not in node_victims.
                if self.node_reserved[n] or len(victims) < len(self.node_runs[n]):
                    continue
                cost = 0
                for tier, neg_start, _, r, gpus in victims:
                    if not evictable(tier, neg_start, r):
                        break
                    cost += gpus
                else:
                    insort(costs, (cost, victims[-1][0], n))
        if len(costs) < wanted:
            return None
        chosen.sort()
        return [(c[2], [e[3] for e in node_victims[c[2]]]) for c in chosen + costs[:wanted]]

    def _victim_cost(self, r: int, t: float) -> float:
        run = self.runs[r]
        return victim_cost_gpu_s(self.jobs[run.job], run, t, self.pool_policy[self.job_pool[run.job]].requeue_hold_s)

    def _cheapest_node(self, pool: int, need: int, rank: int, t: float) -> tuple[int, list[int]] | None:
        """The node and the victims on it of the least live cost that free `need` GPUs, ties by (evicted GPUs,
        highest victim tier, node) as `_best_node`; every node of the pool is visited, as no bound on the cost
        is known before its victims are.

        On a node (at most one victim per GPU), a 0/1 knapsack over its eligible victims in today's order
        keeps, per GPUs freed (capped at what is missing), the cheapest set as (cost, victims, their positions):
        fewer victims and then today's order break ties, and the cheapest covering set is minimal.
        """
        gpn = self.gpn[pool]
        buckets = self.buckets[pool]
        node_victims = self.node_victims
        evictable = self._evictable(pool, rank, t)
        best: tuple[float, int, int, int] | None = None
        best_victims: list[int] = []
        for free in range(need - 1, -1, -1):
            short = need - free
            for n in buckets[free]:
                sets: list[tuple[float, int, tuple[int, ...]] | None] = [None] * (short + 1)
                sets[0] = (0.0, 0, ())
                entries = node_victims[n]
                for i, (tier, neg_start, _, r, gpus) in enumerate(entries):
                    if not evictable(tier, neg_start, r):
                        continue
                    cost = self._victim_cost(r, t)
                    gain = gpus if gpus < gpn else gpn
                    # Downwards, so a victim joins each set once (the capped top only feeds itself).
                    for have in range(short, -1, -1):
                        found = sets[have]
                        if found is None:
                            continue
                        candidate = (found[0] + cost, found[1] + 1, (*found[2], i))
                        into = min(short, have + gain)
                        current = sets[into]
                        if current is None or candidate < current:
                            sets[into] = candidate
                cover = sets[short]
                if cover is None:
                    continue
                chosen = [entries[i] for i in cover[2]]
                key = (cover[0], sum(e[4] for e in chosen), max(e[0] for e in chosen), n)
                if best is None or key < best:
                    best, best_victims = key, [e[3] for e in chosen]
        return None if best is None else (best[3], best_victims)

    def _cheapest_nodes(self, pool: int, need: int, rank: int, t: float) -> list[tuple[int, list[int]]] | None:
        """The `need` whole nodes of the least live cost to clear, as `_best_nodes` qualifies them (free, or
        every run on it may be evicted); a node's cost is the sum of its victims' (a victim spanning nodes
        counts on each); ties by (evicted GPUs, highest victim tier, node)."""
        gpn = self.gpn[pool]
        buckets = self.buckets[pool]
        node_victims = self.node_victims
        evictable = self._evictable(pool, rank, t)
        chosen: list[tuple[float, int, int, int]] = [(0.0, 0, -1, n) for n in buckets[gpn]]
        chosen.sort()
        wanted = need - len(chosen)
        if wanted <= 0:
            return [(c[3], []) for c in chosen[:need]]
        costs: list[tuple[float, int, int, int]] = []
        for free in range(gpn - 1, -1, -1):
            for n in buckets[free]:
                victims = node_victims[n]
                if self.node_reserved[n] or len(victims) < len(self.node_runs[n]):
                    continue
                cost = 0.0
                evicted = 0
                for tier, neg_start, _, r, gpus in victims:
                    if not evictable(tier, neg_start, r):
                        break
                    cost += self._victim_cost(r, t)
                    evicted += gpus
                else:
                    costs.append((cost, evicted, victims[-1][0], n))
        if len(costs) < wanted:
            return None
        costs.sort()
        return [(c[3], [e[3] for e in node_victims[c[3]]]) for c in chosen + costs[:wanted]]

    # -- the schedulers' own victim choice ------------------------------------------

    def _candidates(self, pool: int, rank: int, t: float) -> list[int]:
        """Every run of the pool that a preemptor of `rank` may evict at t, each once."""
        evictable = self._evictable(pool, rank, t)
        seen: set[int] = set()
        found = []
        for n in self.pool_nodes[pool]:
            for tier, neg_start, _, r, _ in self.node_victims[n]:
                if r not in seen and evictable(tier, neg_start, r):
                    seen.add(r)
                    found.append(r)
        return found

    def _run_nodes_gpus(self, r: int) -> dict[int, int]:
        gpu_node = self.gpu_node
        held: dict[int, int] = {}
        for g in self.runs[r].gpu_ids:
            held[gpu_node[g]] = held.get(gpu_node[g], 0) + 1
        return held

    def _first_fit(self, pool: int, need: int, order: Sequence[int], held: dict[int, dict[int, int]]
                   ) -> tuple[int, list[int]] | None:
        """Evict `order`'s runs one by one (as the schedulers simulate it) until the ask fits: the position of
        the run that made it fit and the nodes chosen (one node, the fullest that fits, then the lowest; or
        whole free nodes, those free before any eviction first)."""
        gpn = self.gpn[pool]
        avail = {n: self.node_free[n] for n in self.pool_nodes[pool]}
        wanted = need // gpn
        whole = [n for n in self.pool_nodes[pool] if avail[n] >= gpn] if need > gpn else []
        for k, r in enumerate(order):
            for n, c in held[r].items():
                before = avail[n]
                avail[n] = before + c
                if need > gpn and before < gpn <= avail[n]:
                    whole.append(n)
            if need <= gpn:
                fits = [n for n in held[r] if avail[n] >= need]
                if fits:
                    return k, [min(fits, key=lambda n: (avail[n], n))]
            elif len(whole) >= wanted:
                base = self.node_free
                return k, sorted(whole, key=lambda n: (base[n] < gpn, n))[:wanted]
        return None

    def _free_without(self, pool: int, out: Sequence[int], held: dict[int, dict[int, int]]) -> dict[int, int]:
        """Free GPUs per node of the pool once the runs `out` are gone."""
        avail = {n: self.node_free[n] for n in self.pool_nodes[pool]}
        for r in out:
            for n, c in held[r].items():
                avail[n] += c
        return avail

    def _fits_without(self, pool: int, need: int, out: Sequence[int], held: dict[int, dict[int, int]]) -> bool:
        """Whether the ask fits once the runs `out` are gone."""
        gpn = self.gpn[pool]
        avail = self._free_without(pool, out, held)
        if need <= gpn:
            return any(a >= need for a in avail.values())
        return sum(1 for a in avail.values() if a >= gpn) >= need // gpn

    def _modelled_victims(self, pool: int, j: int, rank: int, t: float) -> tuple[list[int], list[int]] | None:
        """The nodes and victims the modelled scheduler chooses for job j, None when no eviction makes it fit.

        - slurm (src/slurmctld/preempt.c, plugins/preempt/{partition_prio,qos}, select/cons_tres `_run_now`):
          candidates by (victim's PriorityTier or QOS priority, nodes used) and then the controller's job list
          order (job submission), or youngest first with PreemptParameters=youngest_first; the candidates are
          taken out in that order until the job fits, then `reorder_count` times the one that made it fit is
          moved first (with strict_order alone, else ahead of the others by the chosen nodes they use) and
          the search runs again; the victims are the candidates taken out that use the chosen nodes.
        - kueue (pkg/scheduler/preemption, classical): candidates by lower priority, then the most recently
          admitted; taken out until it fits, then added back in reverse order while it still fits.
        - kai (actions/preempt, the victims queue is the job order reversed): lowest priority, then the
          newest job; whole jobs are added until the preemptor fits.
        """
        policy = self.pool_policy[pool]
        need = self.jobs[j].gpus
        cands = self._candidates(pool, rank, t)
        if not cands:
            return None
        held = {r: self._run_nodes_gpus(r) for r in cands}
        runs, jobs, job_rank = self.runs, self.jobs, self.job_rank
        model = policy.scheduler
        if model == "slurm":
            if policy.youngest_first:
                order = sorted(cands, key=lambda r: (-(runs[r].start_s or 0.0), runs[r].job))
            else:
                order = sorted(cands, key=lambda r: (job_rank[runs[r].job], len(held[r]), runs[r].job))
            passes = 0
            while True:
                found = self._first_fit(pool, need, order, held)
                if found is None:
                    return None
                k, nodes = found
                passes += 1
                if passes - 1 > policy.reorder_count or len(order) <= passes:
                    break
                last = order[k]
                if policy.strict_order:
                    order = [last, *order[:k], *order[k + 1:]]
                else:
                    chosen = set(nodes)
                    usable = {r: sum(1 for n in held[r] if n in chosen) for r in order[:k]}
                    usable[last] = 1 << 30
                    order = sorted(order, key=lambda r: -usable.get(r, 0))
            on = set(nodes)
            victims = [r for r in order[: k + 1] if on.intersection(held[r])]
            return nodes, victims
        if model == "kueue":
            # by priority, boosted (kueue_boost) above its class's unboosted runs, then the most recently admitted
            boost = self._boost
            order = sorted(cands, key=lambda r: (job_rank[runs[r].job], boost(r), -(runs[r].start_s or 0.0),
                                                 runs[r].job))
        else:
            order = sorted(cands, key=lambda r: (job_rank[runs[r].job], -jobs[runs[r].job].submit_s, -runs[r].job))
        found = self._first_fit(pool, need, order, held)
        if found is None:
            return None
        k, nodes = found
        taken = list(order[: k + 1])
        if model == "kueue":
            for i in range(len(taken) - 2, -1, -1):
                rest = taken[:i] + taken[i + 1:]
                if self._fits_without(pool, need, rest, held):
                    taken = rest
            nodes = self._fitting_nodes(pool, need, taken, held)
        on = set(nodes)
        return nodes, [r for r in taken if on.intersection(held[r])]

    def _fitting_nodes(self, pool: int, need: int, out: Sequence[int], held: dict[int, dict[int, int]]) -> list[int]:
        """The nodes the ask takes once `out` are gone: the fullest node that fits, or whole free nodes."""
        gpn = self.gpn[pool]
        avail = self._free_without(pool, out, held)
        if need <= gpn:
            return [min((n for n, a in avail.items() if a >= need), key=lambda n: (avail[n], n))]
        return sorted((n for n, a in avail.items() if a >= gpn), key=lambda n: (self.node_free[n] < gpn, n))[
            : need // gpn]

    def _preempt(self, pool: int, j: int, t: float,
                 held: tuple[int, float, dict[int, int], set[int]] | None = None) -> bool:
        job = self.jobs[j]
        rank = self.job_rank[j]
        gpn = self.gpn[pool]
        policy = self.pool_policy[pool]
        by_cost = policy.victim_order == "cost"
        self.preemptor = j
        lay = self.layout
        first = lay.node_first_gpu
        gpu_node = self.gpu_node
        owner = self.owner
        reserved = self.reserved
        if not by_cost and policy.scheduler != "generic":
            chosen = self._modelled_victims(pool, j, rank, t)
            if chosen is None:
                return False
            nodes, victims = chosen
            if job.gpus <= gpn:
                n = nodes[0]
                free = [g for g in range(first[n], first[n] + gpn) if owner[g] < 0 and reserved[g] < 0]
                gained = [g for r in victims for g in self.runs[r].gpu_ids if gpu_node[g] == n]
                gpu_ids = (free + gained)[: job.gpus]
            else:
                gpu_ids = [g for n in nodes for g in range(first[n], first[n] + gpn)]
            victims = sorted(victims, key=self._victim_order)
        elif job.gpus <= gpn:
            one = (self._cheapest_node if by_cost else self._best_node)(pool, job.gpus, rank, t)
            if one is None:
                return False
            n, victims = one
            free = [g for g in range(first[n], first[n] + gpn) if owner[g] < 0 and reserved[g] < 0]
            # In victim order, so every victim evicted gives the preemptor at least one GPU.
            gained = [g for r in victims for g in self.runs[r].gpu_ids if gpu_node[g] == n]
            gpu_ids = (free + gained)[: job.gpus]
        else:
            several = (self._cheapest_nodes if by_cost else self._best_nodes)(pool, job.gpus // gpn, rank, t)
            if several is None:
                return False
            victims = sorted({r for _, vs in several for r in vs}, key=self._victim_order)
            gpu_ids = [g for n, _ in several for g in range(first[n], first[n] + gpn)]
        if held is not None:
            # Behind a reserved start the victims are chosen as ever, but the preemptor may not take the
            # reserved nodes' GPUs beyond the spare ones (it would hold them past the start): then it waits.
            spare = held[2]
            taking: dict[int, int] = {}
            for g in gpu_ids:
                if gpu_node[g] in spare:
                    taking[gpu_node[g]] = taking.get(gpu_node[g], 0) + 1
            if any(spare[n] < c for n, c in taking.items()):
                return False
            for n, c in taking.items():
                spare[n] -= c
        still_held = 0
        for g in gpu_ids:
            node = gpu_node[g]
            if owner[g] < 0:
                self._node_free_delta(node, -1)
            else:
                still_held += 1
            reserved[g] = j
            self.node_reserved[node] += 1
        self.waiting_slots[j] = list(gpu_ids)
        self.awaiting[j] = still_held
        self.pool_gen[pool] += 1
        for r in victims:
            self._signal(r, j, t)
        return True

    # -- loop ----------------------------------------------------------------------

    def run(self, progress: Callable[[float], None] | None) -> Outcome:
        with paused_gc():
            self._loop(progress)
        for run in self.runs:
            if run.state == "running":
                run.end_s = None
                run.preemptor = None
        return Outcome(self.jobs, self.layout, self.policy, self.horizon, self.runs, self.job_runs)

    def _loop(self, progress: Callable[[float], None] | None) -> None:
        events = self.events
        arrivals = self.arrivals
        pop = heapq.heappop
        dirty = self.dirty
        horizon = self.horizon
        next_arrival = arrivals[0][0] if arrivals else math.inf
        a = 0
        next_report = 86400.0
        latency = self.policy.latency_s
        submit_latency = self.policy.submit_latency_s
        pass_pending: set[int] = set()
        while True:
            t = events[0][0] if events and events[0][0] < next_arrival else next_arrival
            if t >= horizon:
                break
            while next_arrival == t:
                self._enqueue(arrivals[a][1], t, t + submit_latency, 0.0)
                a += 1
                next_arrival = arrivals[a][0] if a < len(arrivals) else math.inf
            # A submission is scheduled at once; any other change waits for the next pass.
            due: set[int] = set(dirty) if latency else set()
            while events and events[0][0] == t:
                _, _, kind, item = pop(events)
                if kind == _END:
                    self._end(item, t)
                elif kind == _ELIGIBLE:
                    self._make_pending(item, t)
                    if latency and len(self.job_runs[item]) == 1:
                        # A submission, seen once submit_latency has passed: acted on in that pass.
                        due.add(self.job_pool[item])
                elif kind == _CHANGE:
                    self._change(item, t)
                elif kind == _PASS:
                    due.add(item)
                    pass_pending.discard(item)
                    if not latency:
                        dirty.add(item)  # a periodic pass (below)
                elif item not in dirty and self._waits_to_preempt(item):
                    # A run turning old enough to evict matters only to a job waiting to
                    # preempt: with none, the pool is as its last pass left it.
                    period = self.pool_policy[item].pass_interval_s
                    at = math.ceil(t / period) * period if period else t
                    if at > t:
                        # No event wakes the scheduler for it: its next periodic pass acts on it (an event's
                        # pass before then does too). One pass per such run at most: the cost stays per event.
                        self._push(at, _PASS, item)
                    else:
                        dirty.add(item)
            if latency:
                # The scheduler acts on other changes `latency` later (its pass after the event): one pass
                # covers every change before it.
                for pool in sorted(due):
                    self._schedule(pool, t)
                for pool in sorted(dirty - due - pass_pending):
                    self._push(t + latency, _PASS, pool)
                    pass_pending.add(pool)
            else:
                for pool in sorted(dirty):
                    self._schedule(pool, t)
            dirty.clear()
            if progress is not None and t >= next_report:
                progress(t)
                next_report = (t // 86400.0 + 1) * 86400.0


def simulate_jobs(
    jobs: Sequence[JobSpec],
    pools: Sequence[PoolSpec],
    policy: PolicyConfig,
    horizon_s: float,
    grid_s: float = 60.0,
    progress: Callable[[float], None] | None = None,
    changes: Sequence[PolicyChange] = (),
) -> Outcome:
    """Schedule `jobs` on `pools` under `policy` until `horizon_s`, switching pools to other policies at the
    times `changes` give (a pilot); deterministic."""
    return _Scheduler(jobs, pools, policy, horizon_s, grid_s, changes=changes).run(progress)
