"""Synthetic workloads: job specs drawn from a `WorkloadConfig` under one seed.

Arrivals are a Poisson process thinned by a daily and weekly rhythm, with a
rate chosen so that the work submitted is `load` times the cluster's capacity.
Tier shares drift: teams with `high_share_growth` submit a growing share of
high-tier jobs week after week (scope creep). All durations are whole seconds
so the times the simulator writes are exact.
"""

from __future__ import annotations

import math

import numpy as np

from preemptlens.analytics.simulator.model import PRIORITY_CLASSES, JobSpec, SimConfig, WorkloadConfig

_WEEK_S = 7 * 86400.0


def rhythm(cfg: WorkloadConfig, t_s: np.ndarray, start_weekday: int, start_hour: float) -> np.ndarray:
    """Relative arrival rate at `t_s` seconds from the start (peak 1 on a weekday at peak_hour)."""
    hour = (start_hour + t_s / 3600.0) % 24.0
    day = (start_weekday + (start_hour + t_s / 3600.0) // 24.0) % 7
    daily = 1.0 + cfg.rhythm_amplitude * np.cos(2 * math.pi * (hour - cfg.peak_hour) / 24.0)
    weekly = np.where(day >= 5, cfg.weekend_factor, 1.0)
    return daily * weekly / (1.0 + cfg.rhythm_amplitude)


def high_share(cfg: WorkloadConfig, growth: np.ndarray | float, t_s: np.ndarray | float) -> np.ndarray:
    return np.minimum(cfg.high_share + growth * np.asarray(t_s) / _WEEK_S, cfg.high_share_max)


def _sizes(cfg: WorkloadConfig, rng: np.random.Generator, n: int, cap: int) -> np.ndarray:
    weights = np.asarray(cfg.size_weights, dtype=float)
    sizes = np.asarray(cfg.sizes)
    weights = np.where(sizes <= cap, weights, 0.0)
    return rng.choice(sizes, size=n, p=weights / weights.sum())


def _work(cfg: WorkloadConfig, rng: np.random.Generator, n: int) -> np.ndarray:
    raw = rng.lognormal(math.log(cfg.work_median_s), cfg.work_sigma, size=n)
    return np.round(np.clip(raw, cfg.work_min_s, cfg.work_max_s))


def generate_jobs(sim: SimConfig) -> list[JobSpec]:
    """The job specs of one simulation, deterministic under `sim.workload.seed`."""
    cfg = sim.workload
    rng = np.random.default_rng(cfg.seed)
    horizon = sim.horizon_s
    pool_gpus = np.array([p.gpus for p in sim.pools], dtype=float)
    largest = max(p.gpus for p in sim.pools)

    # Rate from the mean GPU-seconds a job asks for, estimated on its own stream so
    # that changing the estimate's sample size never shifts the jobs themselves.
    probe = np.random.default_rng([cfg.seed, 1])
    mean_gpu_s = float(np.mean(_sizes(cfg, probe, 20_000, largest) * _work(cfg, probe, 20_000)))
    grid = np.arange(0.0, horizon, 600.0)
    weekday, hour = sim.start.weekday(), sim.start.hour + sim.start.minute / 60.0
    mean_rhythm = float(np.mean(rhythm(cfg, grid, weekday, hour))) if grid.size else 1.0
    peak_rate = cfg.load * sim.gpus / mean_gpu_s / mean_rhythm

    candidates = rng.poisson(peak_rate * horizon)
    t = np.sort(np.floor(rng.uniform(0.0, horizon, size=candidates)))
    t = t[rng.uniform(size=t.size) < rhythm(cfg, t, weekday, hour)]
    n = t.size

    team_w = np.array([tm.weight for tm in cfg.teams])
    team = rng.choice(len(cfg.teams), size=n, p=team_w / team_w.sum())
    growth = np.array([tm.high_share_growth for tm in cfg.teams])[team]
    p_high = high_share(cfg, growth, t)
    p_crit = np.full(n, cfg.critical_share)
    rest = 1.0 - p_crit - p_high
    p_low = rest * cfg.low_share
    u = rng.uniform(size=n)
    tier = np.where(u < p_crit, "critical",
                    np.where(u < p_crit + p_high, "high",
                             np.where(u < p_crit + p_high + p_low, "low", "normal")))
    preempt_p = np.array([cfg.preemptible_share[str(x)] for x in tier])
    preemptible = rng.uniform(size=n) < preempt_p

    pool_idx = rng.choice(len(sim.pools), size=n, p=pool_gpus / pool_gpus.sum())
    gpus = np.empty(n, dtype=int)
    for p, pool in enumerate(sim.pools):
        sel = pool_idx == p
        gpus[sel] = _sizes(cfg, rng, int(sel.sum()), pool.gpus)
    # Multi-node jobs take whole nodes: round sizes above a node up to whole nodes.
    gpn = np.array([pool.gpus_per_node for pool in sim.pools])[pool_idx]
    gpus = np.where(gpus > gpn, np.ceil(gpus / gpn) * gpn, gpus).astype(int)
    work = _work(cfg, rng, n)

    hoards = rng.uniform(size=n) < cfg.hoarding_share
    # Notebooks and stalled jobs are small.
    gpus = np.where(hoards, np.minimum(gpus, gpn), gpus)
    checkpoints = (~hoards) & (rng.uniform(size=n) < cfg.checkpoint_share)
    interval = rng.choice(np.asarray(cfg.checkpoint_intervals_s), size=n)
    final = checkpoints & (rng.uniform(size=n) < cfg.final_checkpoint_share)
    save_s = np.round(rng.uniform(*cfg.save_s_range, size=n))
    warmup = np.round(rng.uniform(*cfg.warmup_s_range, size=n))
    step = sim.sample_step_s
    active = np.round(rng.uniform(*cfg.hoard_active_s_range, size=n))
    idle = np.round(rng.uniform(*cfg.hoard_idle_s_range, size=n) / step) * step
    idle = np.maximum(idle, step)
    fails = rng.uniform(size=n) < cfg.fail_share
    fail_at = np.round(work * rng.uniform(0.05, 0.95, size=n))
    busy = rng.uniform(0.55, 0.92, size=n)
    mem = np.round(rng.uniform(0.3, 0.95, size=n) * 81_559.0)
    users = rng.integers(1, 9, size=n)
    # Drawn last and only when asked for, so that workloads without a start-up stay as they were.
    low, high = cfg.startup_s_range
    startup = np.round(rng.uniform(low, high, size=n)) if high > 0 else np.zeros(n)

    jobs = []
    for i in range(n):
        tier_i = str(tier[i])
        team_name = cfg.teams[team[i]].name
        priority_class, priority_value = PRIORITY_CLASSES[tier_i]
        kind = "notebook" if hoards[i] else "train"
        jobs.append(
            JobSpec(
                job_id=str(100_000 + i),
                tier=tier_i,
                preemptible=bool(preemptible[i]),
                pool=sim.pools[pool_idx[i]].name,
                gpus=int(gpus[i]),
                submit_s=float(t[i]),
                work_s=float(work[i]),
                team=team_name,
                user=f"{team_name}-user{users[i]}",
                name=f"{team_name}-{kind}-{i}",
                priority_class=priority_class,
                priority_value=priority_value,
                checkpoint_interval_s=float(interval[i]) if checkpoints[i] else None,
                final_checkpoint=bool(final[i]),
                save_s=float(save_s[i]),
                startup_s=float(startup[i]),
                warmup_s=float(warmup[i]),
                hoard_active_s=float(active[i]) if hoards[i] else None,
                hoard_idle_s=float(idle[i]) if hoards[i] else None,
                fail_after_work_s=float(fail_at[i]) if fails[i] else None,
                busy_level=float(busy[i]),
                mem_mib=float(mem[i]),
            )
        )
    return jobs
