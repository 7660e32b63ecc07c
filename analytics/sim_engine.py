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
- Pending jobs start in tier order, then eligible time, then arrival order, with
  greedy backfill. A job that does not fit and whose tier may preempt picks
  victims on the node(s) that cost the fewest evicted GPUs; on a node the
  lowest-tier, youngest runs go first and only until the job fits. Victims must
  be preemptible, of a tier the policy lets this tier evict, and have run for at
  least `min_run_s`. The GPUs it needs are reserved for the preemptor at once and
  it starts when the last victim has let go.
- Signal at time t: a job with `final_checkpoint` whose `save_s` fits in the
  grace time captures a final checkpoint at t, stops working and exits at
  t + save_s; any other victim keeps running until the kill at t + grace. A
  victim that finishes on its own before then completes normally. The run's end
  is the preemption time; lost GPU-seconds = gpus x (end - last checkpoint of
  the run, or run start when it has none), so warm-up counts as lost.
- A victim is requeued at its end (new run, submit = end) and is eligible after
  `requeue_hold_s`; it restarts from its last checkpoint.
"""

from __future__ import annotations

import heapq
import math
from bisect import insort
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field

from analytics.sim_model import JobSpec, PolicyConfig, PoolSpec
from preemptlens.contract import TIER_RANK

_ARRIVE, _END, _ELIGIBLE, _MINRUN = 0, 1, 2, 3
_RANK_TIER = {rank: tier for tier, rank in TIER_RANK.items()}


@dataclass
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
            for k, r in enumerate(run_ids):
                run = self.runs[r]
                if run.state != "preempted":
                    continue
                assert run.start_s is not None and run.end_s is not None and run.preemptor is not None
                nxt = self.runs[run_ids[k + 1]] if k + 1 < len(run_ids) else None
                last = run.last_checkpoint()
                since = run.start_s if last is None else last[0]
                found.append(
                    PreemptionTruth(
                        victim=j,
                        victim_run=run.run,
                        time_s=run.end_s,
                        preemptor=run.preemptor,
                        pool=self.jobs[j].pool,
                        gpus=self.jobs[j].gpus,
                        run_start_s=run.start_s,
                        last_checkpoint_s=None if last is None else last[0],
                        lost_gpu_s=self.jobs[j].gpus * (run.end_s - since),
                        restart_s=None if nxt is None else nxt.start_s,
                        warmup_s=self.jobs[j].warmup_s,
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


class _Scheduler:
    def __init__(
        self,
        jobs: Sequence[JobSpec],
        pools: Sequence[PoolSpec],
        policy: PolicyConfig,
        horizon_s: float,
        grid_s: float,
    ) -> None:
        self.jobs = jobs
        self.layout = Layout.of(pools)
        self.policy = policy
        self.horizon = horizon_s
        self.grid = grid_s
        self.pool_index = {p.name: i for i, p in enumerate(pools)}
        self.gpn = [p.gpus_per_node for p in pools]
        lay = self.layout
        self.owner = [-1] * lay.gpus  # run index holding the GPU
        self.reserved = [-1] * lay.gpus  # job index the GPU is promised to
        self.node_free = [self.gpn[lay.node_pool[n]] for n in range(len(lay.node_names))]
        # Per pool, per free-GPU count, the nodes with exactly that many free GPUs.
        self.buckets: list[list[set[int]]] = [[set() for _ in range(g + 1)] for g in self.gpn]
        for n, free in enumerate(self.node_free):
            self.buckets[lay.node_pool[n]][free].add(n)
        self.node_runs: list[set[int]] = [set() for _ in lay.node_names]
        # Per node, the runs that some tier may evict, as (victim order, run): the
        # victim search walks these instead of every GPU of the pool.
        self.node_victims: list[list[tuple[tuple[int, float, int], int]]] = [[] for _ in lay.node_names]
        self.node_reserved = [0] * len(lay.node_names)  # GPUs promised to a preemptor
        self.pool_nodes: list[list[int]] = [[] for _ in pools]
        for n, p in enumerate(lay.node_pool):
            self.pool_nodes[p].append(n)
        # Per pool, per tier rank, per GPU count, pending (eligible, seq, job) in start order:
        # split by size so a pass skips every ask too big to start or to preempt for. A job
        # turns pending at its eligible time, which is now, so appending keeps the order.
        self.pending: list[list[dict[int, list[tuple[float, int, int]]]]] = [
            [{} for _ in TIER_RANK] for _ in pools
        ]
        self.runs: list[Run] = []
        self.job_runs: list[list[int]] = [[] for _ in jobs]
        self.waiting_slots: dict[int, list[int]] = {}  # preemptor job -> GPUs reserved for it
        self.awaiting: dict[int, int] = {}  # preemptor job -> reserved GPUs still held by victims
        self.events: list[tuple[float, int, int, int]] = []
        self.seq = 0
        self.dirty: set[int] = set()
        self.victim_tiers = {t: self.policy.victims_of(t) for t in TIER_RANK}
        self.can_be_victim = {v for vs in self.victim_tiers.values() for v in vs}
        self.rank_preempts = [bool(self.victim_tiers[_RANK_TIER[rank]]) for rank in range(len(_RANK_TIER))]
        for j, job in enumerate(jobs):
            self._check(job)
            if job.submit_s < horizon_s:
                self._push(job.submit_s, _ARRIVE, j)

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
        pool = self.layout.node_pool[node]
        free = self.node_free[node]
        self.buckets[pool][free].discard(node)
        self.node_free[node] = free + delta
        self.buckets[pool][free + delta].add(node)

    def _is_free(self, gpu: int) -> bool:
        return self.owner[gpu] < 0 and self.reserved[gpu] < 0

    def _place(self, pool: int, gpus: int) -> list[int]:
        gpn = self.gpn[pool]
        first = self.layout.node_first_gpu
        if gpus <= gpn:
            k = next(k for k in range(gpus, gpn + 1) if self.buckets[pool][k])
            node = min(self.buckets[pool][k])
            return [g for g in range(first[node], first[node] + gpn) if self._is_free(g)][:gpus]
        nodes = sorted(self.buckets[pool][gpn])[: gpus // gpn]
        return [g for n in nodes for g in range(first[n], first[n] + gpn)]

    # -- runs ----------------------------------------------------------------

    def _enqueue(self, j: int, submit: float, eligible: float, restored: float) -> None:
        run = Run(job=j, run=len(self.job_runs[j]) + 1, submit_s=submit, eligible_s=eligible,
                  restored_step=restored)
        self.job_runs[j].append(len(self.runs))
        self.runs.append(run)
        if eligible <= submit:
            self._make_pending(j)
        else:
            self._push(eligible, _ELIGIBLE, j)

    def _make_pending(self, j: int) -> None:
        job = self.jobs[j]
        pool = self.pool_index[job.pool]
        run = self.runs[self.job_runs[j][-1]]
        entry = (run.eligible_s, self.seq, j)
        self.seq += 1
        self.pending[pool][TIER_RANK[job.tier]].setdefault(job.gpus, []).append(entry)
        self.dirty.add(pool)

    def _start(self, j: int, t: float, gpu_ids: list[int]) -> None:
        job = self.jobs[j]
        r = self.job_runs[j][-1]
        run = self.runs[r]
        run.start_s = t
        run.state = "running"
        run.gpu_ids = tuple(gpu_ids)
        gpu_node = self.layout.gpu_node
        reserved = self.reserved
        taken: dict[int, int] = {}  # node -> GPUs taken from its free ones
        for g in gpu_ids:
            node = gpu_node[g]
            if reserved[g] >= 0:
                reserved[g] = -1
                self.node_reserved[node] -= 1
            else:
                taken[node] = taken.get(node, 0) + 1
            self.owner[g] = r
        for node in {gpu_node[g] for g in gpu_ids}:
            self.node_runs[node].add(r)
        for node, count in taken.items():
            self._node_free_delta(node, -count)
        self._plan(job, run, t)
        assert run.end_s is not None
        self._push(run.end_s, _END, r)
        if job.preemptible and job.tier in self.can_be_victim:
            entry = ((TIER_RANK[job.tier], -t, -j), r)
            for node in sorted({gpu_node[g] for g in gpu_ids}):
                insort(self.node_victims[node], entry)
            if self.policy.min_run_s > 0:
                self._push(t + self.policy.min_run_s, _MINRUN, self.pool_index[job.pool])

    def _plan(self, job: JobSpec, run: Run, start: float) -> None:
        """Lay out a run that nothing interrupts: work, idle stretches, checkpoints, end."""
        t = start + (job.warmup_s if run.run > 1 else 0.0)
        run.warmup_end_s = t
        done = run.restored_step
        target = job.work_s
        if run.run == 1 and job.fail_after_work_s is not None and job.fail_after_work_s < job.work_s:
            target = job.fail_after_work_s
            run.fails = True
        if job.hoard_active_s is not None and job.hoard_idle_s is not None:
            while done < target and t < self.horizon:
                # Idle stretches follow the user's clock, so they begin on the sample grid.
                idle_at = math.ceil((t + job.hoard_active_s) / self.grid) * self.grid
                if idle_at - t >= target - done:
                    break
                run.work.append((t, idle_at, done))
                done += idle_at - t
                run.idle.append((idle_at, idle_at + job.hoard_idle_s))
                t = idle_at + job.hoard_idle_s
        if done < target:
            run.work.append((t, t + (target - done), done))
            t += target - done
        run.end_s = t
        interval = job.checkpoint_interval_s
        if interval:
            since = run.restored_step
            k = 1
            for ws, we, w0 in run.work:
                while since + k * interval <= w0 + (we - ws):
                    at = since + k * interval
                    when = ws + (at - w0)
                    if when >= t:
                        break
                    run.checkpoints.append((when, at))
                    k += 1

    def _signal(self, r: int, preemptor: int, t: float) -> None:
        run = self.runs[r]
        job = self.jobs[run.job]
        grace = self.policy.grace_s
        final = job.final_checkpoint and bool(job.checkpoint_interval_s) and 0 < job.save_s <= grace
        stop = t + job.save_s if final else t + grace
        run.signal_s = t
        assert run.end_s is not None
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
        pool = self.pool_index[job.pool]
        self.dirty.add(pool)
        gpu_node = self.layout.gpu_node
        nodes = {gpu_node[g] for g in run.gpu_ids}
        for node in nodes:
            self.node_runs[node].discard(r)
        if job.preemptible and job.tier in self.can_be_victim:
            entry = (self._victim_order(r), r)
            for node in nodes:
                self.node_victims[node].remove(entry)
        freed: dict[int, int] = {}  # node -> GPUs back to its free ones
        for g in run.gpu_ids:
            self.owner[g] = -1
            promised = self.reserved[g]
            if promised < 0:
                node = gpu_node[g]
                freed[node] = freed.get(node, 0) + 1
                continue
            self.awaiting[promised] -= 1
            if self.awaiting[promised] == 0:
                del self.awaiting[promised]
                self._start(promised, t, self.waiting_slots.pop(promised))
        for node, count in freed.items():
            self._node_free_delta(node, count)
        if run.state == "preempted":
            last = run.last_checkpoint()
            restored = run.restored_step if last is None else last[1]
            self._enqueue(j, t, t + self.policy.requeue_hold_s, restored)

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

    def _schedule(self, pool: int, t: float) -> None:
        room = self._room(pool)
        for rank in range(len(_RANK_TIER) - 1, -1, -1):
            by_size = self.pending[pool][rank]
            may_preempt = self.rank_preempts[rank]
            if not by_size or (room == 0 and not may_preempt):
                continue
            # The fewest GPUs no preemption could free in this pass: bigger asks fail too.
            unfreeable = math.inf
            # Room and unfreeable only shrink during a pass, so an ask above both is
            # skipped unseen: merge the size queues that can act, in start order.
            heads: list[tuple[tuple[float, int, int], int, int]] = []
            for size, queue in by_size.items():
                if size <= room or (may_preempt and size < unfreeable):
                    heads.append((queue[0], size, 0))
            if not heads:
                continue
            heapq.heapify(heads)
            done: dict[int, list[int]] = {}  # size -> positions taken out of its queue
            while heads:
                entry, size, i = heads[0]
                if size <= room:
                    self._start(entry[2], t, self._place(pool, size))
                    room = self._room(pool)
                    done.setdefault(size, []).append(i)
                elif may_preempt and size < unfreeable:
                    if self._preempt(pool, entry[2], t):
                        room = self._room(pool)
                        done.setdefault(size, []).append(i)
                    else:
                        unfreeable = size
                        heapq.heappop(heads)
                        continue
                else:
                    heapq.heappop(heads)
                    continue
                queue = by_size[size]
                if i + 1 < len(queue):
                    heapq.heapreplace(heads, (queue[i + 1], size, i + 1))
                else:
                    heapq.heappop(heads)
            for size, taken in done.items():
                queue = by_size[size]
                for i in reversed(taken):
                    del queue[i]
                if not queue:
                    del by_size[size]

    def _candidate(self, r: int, allowed: frozenset[str], t: float) -> bool:
        run = self.runs[r]
        job = self.jobs[run.job]
        return (
            job.preemptible
            and job.tier in allowed
            and run.signal_s is None
            and run.start_s is not None
            and t - run.start_s >= self.policy.min_run_s
        )

    def _victim_order(self, r: int) -> tuple[int, float, int]:
        run = self.runs[r]
        assert run.start_s is not None
        return (TIER_RANK[self.jobs[run.job].tier], -run.start_s, -run.job)

    def _best_node(self, pool: int, need: int, allowed: frozenset[str], t: float) -> tuple[int, list[int]] | None:
        """The node whose eviction costs least, (evicted GPUs, highest victim tier, node), and its victims.

        Nodes are visited from most to fewest free GPUs, as `need - free` is a lower
        bound of a node's evicted GPUs; the search stops once no node left can beat
        the best so far, so the result is the minimum over all nodes of the pool.
        """
        gpn = self.gpn[pool]
        jobs = self.jobs
        runs = self.runs
        candidate = self._candidate
        floor = min((TIER_RANK[v] for v in allowed), default=0)
        best: tuple[int, int, int] | None = None
        best_victims: list[int] = []
        # The pass only preempts for a job that fits no node as it is, so every node has < need free.
        for free in range(need - 1, -1, -1):
            bound = need - free
            if best is not None and best[0] < bound:
                break
            for n in sorted(self.buckets[pool][free]):
                if best is not None and best < (bound, floor, n):
                    break
                have = free
                cost = 0
                victims: list[int] = []
                for _, r in self.node_victims[n]:
                    if not candidate(r, allowed, t):
                        continue
                    victims.append(r)
                    gpus = jobs[runs[r].job].gpus
                    cost += gpus
                    have += min(gpus, gpn)
                    if have >= need or (best is not None and cost > best[0]):
                        break
                if have < need:
                    continue
                key = (cost, TIER_RANK[jobs[runs[victims[-1]].job].tier], n)
                if best is None or key < best:
                    best, best_victims = key, victims
        return None if best is None else (best[2], best_victims)

    def _best_nodes(self, pool: int, need: int, allowed: frozenset[str], t: float
                    ) -> list[tuple[int, list[int]]] | None:
        """The `need` whole nodes cheapest to clear, cheapest first, with their victims.

        A node qualifies when it is free, or nothing on it is promised and every run
        on it may be evicted; its cost is (evicted GPUs, highest victim tier, node).
        Free nodes cost nothing; for the others `gpus per node - free` bounds the
        evicted GPUs from below, so nodes are visited from most free down and the
        search stops once no node left can make the cheapest `need`.
        """
        gpn = self.gpn[pool]
        buckets = self.buckets[pool]
        jobs = self.jobs
        runs = self.runs
        candidate = self._candidate
        order = self._victim_order
        floor = min((TIER_RANK[v] for v in allowed), default=0)
        chosen: list[tuple[tuple[int, int, int], list[int]]] = [((0, -1, n), []) for n in buckets[gpn]]
        costs: list[tuple[int, int, int]] = []
        wanted = need - len(chosen)
        if wanted <= 0:
            chosen.sort()
            return [(c[2], vs) for c, vs in chosen[:need]]
        options: list[tuple[tuple[int, int, int], list[int]]] = []
        for free in range(gpn - 1, -1, -1):
            bound = gpn - free
            if len(costs) >= wanted and costs[wanted - 1] < (bound, floor, -1):
                break
            for n in sorted(buckets[free]):
                if len(costs) >= wanted and costs[wanted - 1] < (bound, floor, n):
                    break
                held = self.node_runs[n]
                # A holder no tier may evict is in node_runs but not in node_victims.
                if self.node_reserved[n] or len(self.node_victims[n]) < len(held):
                    continue
                if not all(candidate(r, allowed, t) for r in held):
                    continue
                victims = sorted(held, key=order)
                cost = (sum(jobs[runs[r].job].gpus for r in victims),
                        max(TIER_RANK[jobs[runs[r].job].tier] for r in victims), n)
                options.append((cost, victims))
                insort(costs, cost)
        if len(options) < wanted:
            return None
        options.sort()
        chosen.sort()
        return [(c[2], vs) for c, vs in chosen + options[:wanted]]

    def _preempt(self, pool: int, j: int, t: float) -> bool:
        job = self.jobs[j]
        allowed = self.victim_tiers[job.tier]
        gpn = self.gpn[pool]
        first = self.layout.node_first_gpu
        lay = self.layout
        if job.gpus <= gpn:
            one = self._best_node(pool, job.gpus, allowed, t)
            if one is None:
                return False
            n, victims = one
            free = [g for g in range(first[n], first[n] + gpn) if self._is_free(g)]
            # In victim order, so every victim evicted gives the preemptor at least one GPU.
            gained = [g for r in victims for g in self.runs[r].gpu_ids if lay.gpu_node[g] == n]
            gpu_ids = (free + gained)[: job.gpus]
        else:
            several = self._best_nodes(pool, job.gpus // gpn, allowed, t)
            if several is None:
                return False
            victims = sorted({r for _, vs in several for r in vs}, key=self._victim_order)
            gpu_ids = [g for n, _ in several for g in range(first[n], first[n] + gpn)]
        still_held = 0
        for g in gpu_ids:
            if self.owner[g] < 0:
                self._node_free_delta(lay.gpu_node[g], -1)
            else:
                still_held += 1
            self.reserved[g] = j
            self.node_reserved[lay.gpu_node[g]] += 1
        self.waiting_slots[j] = list(gpu_ids)
        self.awaiting[j] = still_held
        for r in victims:
            self._signal(r, j, t)
        return True

    # -- loop ----------------------------------------------------------------------

    def run(self, progress: Callable[[float], None] | None) -> Outcome:
        next_report = 86400.0
        while self.events and self.events[0][0] < self.horizon:
            t = self.events[0][0]
            while self.events and self.events[0][0] == t:
                _, _, kind, item = heapq.heappop(self.events)
                if kind == _ARRIVE:
                    job = self.jobs[item]
                    self._enqueue(item, job.submit_s, job.submit_s, 0.0)
                elif kind == _END:
                    self._end(item, t)
                elif kind == _ELIGIBLE:
                    self._make_pending(item)
                else:
                    self.dirty.add(item)
            for pool in sorted(self.dirty):
                self._schedule(pool, t)
            self.dirty.clear()
            if progress is not None and t >= next_report:
                progress(t)
                next_report = (t // 86400.0 + 1) * 86400.0
        for run in self.runs:
            if run.state == "running":
                run.end_s = None
                run.preemptor = None
        return Outcome(self.jobs, self.layout, self.policy, self.horizon, self.runs, self.job_runs)


def simulate_jobs(
    jobs: Sequence[JobSpec],
    pools: Sequence[PoolSpec],
    policy: PolicyConfig,
    horizon_s: float,
    grid_s: float = 60.0,
    progress: Callable[[float], None] | None = None,
) -> Outcome:
    """Schedule `jobs` on `pools` under `policy` until `horizon_s`; deterministic."""
    return _Scheduler(jobs, pools, policy, horizon_s, grid_s).run(progress)
