"""Hand-built and simulated clusters loaded through the real load API, analysed for real.

Imported by the tests of this folder as `analytics_scenario` (pytest puts the
folder on sys.path; a package here would shadow the real `analytics`); tests/lake
and tests/spark put this folder on sys.path in their conftest to use `small_hoarding_cluster` and
`simulated_and_analysed`."""

from __future__ import annotations

import dataclasses
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import polars as pl

from preemptlens.analytics.params import AnalyticsSettings
from preemptlens.analytics.refresh import AnalyzeReport, analyze
from preemptlens.analytics.simulator import DEMO, PoolSpec, SimConfig, simulate_into
from preemptlens.analytics.whatif.settings import TuningSettings
from preemptlens.config import load_config
from preemptlens.warehouse import Warehouse

T0 = datetime(2026, 11, 2, 8, 0, tzinfo=UTC)


def at(seconds: float) -> datetime:
    return T0 + timedelta(seconds=seconds)


def default_params(**overrides: Any) -> AnalyticsSettings:
    return AnalyticsSettings(**overrides)


class Scenario:
    """Rows of a small cluster; `load()` writes them through `Warehouse.load`."""

    def __init__(self, wh: Warehouse) -> None:
        self.wh = wh
        self.rows: dict[str, list[dict[str, Any]]] = {}

    def add(self, table: str, **row: Any) -> None:
        self.rows.setdefault(table, []).append({"cluster": "c1", **row})

    def pool(self, pool: str, gpus: int, valid_from: float = -86400) -> None:
        self.add("pools", pool=pool, gpus=gpus, valid_from=at(valid_from))

    def job(self, job_id: str, tier: str, gpus: int, pool: str, submit: float, **extra: Any) -> None:
        row = {
            "job_id": job_id,
            "tier": tier,
            "gpus": gpus,
            "pool": pool,
            "submit_time": at(submit),
            "preemptible": tier in ("low", "normal"),
            "team": extra.pop("team", "team-" + job_id),
            "user_name": extra.pop("user_name", "user-" + job_id),
        }
        row.update(extra)
        self.add("jobs", **row)

    def run(
        self, job_id: str, run: int, gpus: int, pool: str, start: float, end: float | None, state: str, **extra: Any
    ) -> None:
        self.add(
            "job_runs",
            job_id=job_id,
            run=run,
            gpus=gpus,
            pool=pool,
            submit_time=at(extra.pop("submit")) if "submit" in extra else None,
            start_time=at(start),
            end_time=None if end is None else at(end),
            state=state,
            **extra,
        )

    def checkpoint(self, job_id: str, run: int | None, t: float, step: float, kind: str = "checkpoint") -> None:
        self.add("checkpoints", job_id=job_id, run=run, time=at(t), kind=kind, step=step)

    def link(self, victim: str, t: float, preemptor: str | None, reason: str | None) -> None:
        self.add("preemption_links", victim_job_id=victim, time=at(t), preemptor_job_id=preemptor, reason=reason)

    def samples(
        self, job_id: str | None, host: str, gpu: int, start: float, end: float, busy: float, step: float = 60
    ) -> None:
        t = start
        while t < end:
            self.add(
                "gpu_samples", host=host, gpu_uuid=f"GPU-{host}-{gpu}", gpu_index=gpu, time=at(t), busy=busy,
                job_id=job_id,
            )
            t += step

    def load(self) -> None:
        order = ("pools", "jobs", "job_runs", "preemption_links", "checkpoints", "gpu_samples")
        for table in order:
            if table in self.rows:
                frame = pl.DataFrame(self.rows.pop(table), infer_schema_length=None)
                self.wh.load(table, frame, "test")

    def analyze(self, **overrides: Any) -> AnalyzeReport:
        self.load()
        return analyze(self.wh, default_params(**overrides))

    def view(self, name: str, order: str) -> pl.DataFrame:
        return self.wh.query(f"SELECT * FROM {name} ORDER BY {order}")


@contextmanager
def analysed(folder: Path, build: Callable[[Scenario], None]) -> Iterator[Scenario]:
    """A new warehouse in `folder` holding the scenario `build` writes, loaded and analysed with the default
    settings, open for reading: the ledger and live-cost tests each set up their hand-made cluster this way,
    so that they read their figures off one and the same set-up."""
    with Warehouse(folder / "w.duckdb") as wh:
        sc = Scenario(wh)
        build(sc)
        sc.analyze()
        yield sc


def small_hoarding_cluster(cluster: str, days: float) -> SimConfig:
    """Four A100 nodes, a fifth of the jobs hoarding, from 20:00 UTC so that even one day's rows fall on
    two UTC dates (two date partitions): the lake and Spark tests compare storages and engines row for row
    on this one cluster shape, so it is defined once."""
    return SimConfig(
        cluster=cluster,
        start=datetime(2026, 10, 5, 20, tzinfo=UTC),
        days=days,
        pools=(PoolSpec("a100", nodes=4),),
        workload=dataclasses.replace(DEMO.workload, seed=3, hoarding_share=0.2),
        # Greedy backfill: the comparisons need preemptions, and with reservations the 2-day cluster has none.
        policy=dataclasses.replace(DEMO.policy, backfill="greedy"),
    )


@contextmanager
def simulated_and_analysed(path: Path, sim: SimConfig, *, full: bool = False,
                           tuning: TuningSettings | None = None) -> Iterator[Warehouse]:
    """A warehouse at `path` holding `sim` simulated (raw tables and ground truth) and analysed with the
    settings a fresh installation reads (`tuning` as given, for a test of the intervals' jittered replays, which
    the suite's configuration leaves out: tests/conftest.py): the ground-truth, lake and Spark tests compare
    figures on one cluster built the same way, so a change to how a simulated cluster is analysed reaches them
    all."""
    config = load_config(overrides={"warehouse.path": str(path)})
    with Warehouse(path) as wh:
        simulate_into(wh, sim)
        analyze(wh, config.of(AnalyticsSettings), full=full, tuning=tuning or config.of(TuningSettings))
        yield wh
