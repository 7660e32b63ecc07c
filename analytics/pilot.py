"""Pilot evaluation: did turning preemption on (or changing its rules) in some pools help?

A pilot names the pools that changed, when, and control pools that did not.
Every figure is a difference in differences: (pilot pools after - before) minus
(control pools after - before), so that what moved everywhere (a busier month)
cancels and what is left is the change's effect, as far as the control pools
share the pilot pools' other circumstances.

Intervals come from a block bootstrap over UTC days: each replicate draws, per
period, the days of that period with replacement and gives pilot and control
pools the same draw. Days, not jobs, because waits within a day are not
independent (one congested afternoon makes many long waits together), and a
job bootstrap would make the intervals too narrow; days, not weeks, because a
pilot of a few weeks has too few weeks to resample. Drawing the same days for
both groups keeps a busy day busy in both, which is what the control absorbs.
Each figure is computed from per-day sums (means, rates) or per-day
histograms (quantiles), so a replicate is one matrix product: thousands of
replicates over a month of a 4,096-GPU cluster take well under a second.

The verdict follows the article's adoption order: widen when the time-
sensitive work gained clearly and others' completion time and retry cost did
not clearly get worse; roll back when the costs clearly exceed the gains; keep
piloting otherwise, with the weeks of data that would settle it at the
current rate.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field, replace
from datetime import UTC, datetime, timedelta
from typing import Any

import numpy as np
import polars as pl

from preemptlens.analytics import scarcity
from preemptlens.analytics.whatif import counterfactual
from preemptlens.analytics.whatif.scorecard import verdict_text
from preemptlens.config import ClusterSettings, Config, section, setting
from preemptlens.contract import TIERS
from preemptlens.errors import ConfigError
from preemptlens.reading.words import change, duration, measure, measure_label, pct, quantity

DAY_S = 86400.0
_SEED = 20260105  # fixed: the same data always gives the same intervals
_BINS = 256  # rank resolution of a bootstrapped quantile (1/256 of the observations)

VERDICTS = ("widen", "keep piloting", "roll back")


@section("pilot", "Pilot evaluation (`preemptlens pilot NAME`, the dashboard's Pilot page; docs/figures.md, Pilot).")
@dataclass(frozen=True)
class PilotSettings:
    pilots: dict[str, Any] = setting(
        {},
        "Declared pilots by name, each a table: pools (list, the pools that changed), control (list, pools "
        "that did not), start (ISO 8601 time of the change), what (what changed), and optionally cluster "
        "(default cluster.name), tiers (list, the tiers the change concerns) and end (ISO 8601).",
    )
    before_days: float = setting(
        28.0,
        "Days before the change that a pilot compares against (fewer when the data starts later).",
        bounds=(1, 3660),
    )
    confidence: float = setting(
        0.9, "Confidence level of every pilot interval (bootstrap percentile).",
        bounds=(0.5, 0.999),
    )
    bootstrap_samples: int = setting(
        1000,
        "Bootstrap replicates per pilot evaluation (days resampled with replacement).",
        bounds=(100, 100_000),
    )
    min_wait_gain_s: float = setting(
        60.0,
        "Smallest cut (seconds) of the critical-plus-high median or p90 queue wait that counts as a gain.",
        bounds=(0, 86_400),
    )
    max_completion_increase_share: float = setting(
        0.10,
        "Rise of a normal or low tier's median completion time, as a share of its pilot pools' value "
        "before, that counts as clearly worse once the interval lies above it.",
    )
    max_retries_increase: float = setting(
        0.10,
        "Rise of retries per job that counts as clearly worse once the interval lies above it.",
        bounds=(0, 1000),
    )
    max_thrown_away_increase_share: float = setting(
        0.01,
        "Rise of GPU-hours of work thrown away (lost progress plus warm-up) per capacity GPU-hour of the "
        "pools that counts as clearly worse once the interval lies above it.",
    )
    min_control_pools: int = setting(
        3,
        "Fewest control pools below which a pilot's evaluation warns that its intervals are too narrow (the "
        "bootstrap draws pools, and from one or two it cannot see how much pools differ on their own).",
        bounds=(1, 1000),
    )
    min_days_after: int = setting(
        7,
        "Fewest days of data after the change before a pilot can be judged other than keep piloting "
        "(a bootstrap over fewer days understates the spread).",
        bounds=(1, 366),
    )

    def __post_init__(self) -> None:
        problems = []
        if not 0.5 <= self.confidence < 1.0:
            problems.append("confidence must be in [0.5, 1)")
        if self.bootstrap_samples < 100:
            problems.append("bootstrap_samples must be >= 100")
        if self.before_days <= 0:
            problems.append("before_days must be > 0")
        if problems:
            raise ConfigError("pilot: " + "; ".join(problems), "see docs/configuration.md, [pilot]")


SETTINGS = PilotSettings

# SQL of the observations; every value is a bound parameter.
_WAITS_SQL = """
SELECT pool, epoch(submit_time) AS t, wait_s AS value
FROM pilot_waits
WHERE cluster = $cluster AND list_contains(CAST($pools AS VARCHAR[]), pool)
  AND submit_time >= $start AND submit_time < $end
"""
_JOBS_SQL = """
SELECT pool, tier, epoch(submit_time) AS t, epoch(finished_at) AS finished_t, completion_s, retries
FROM pilot_jobs
WHERE cluster = $cluster AND list_contains(CAST($pools AS VARCHAR[]), pool)
  AND ((submit_time >= $start AND submit_time < $end) OR (finished_at >= $start AND finished_at < $end))
"""
_VICTIMS_SQL = """
SELECT pool, epoch(time) AS t, repeat_victim, thrown_away_gpu_s, waiting_gpu_s
FROM pilot_preemption_costs
WHERE cluster = $cluster AND list_contains(CAST($pools AS VARCHAR[]), pool) AND time >= $start AND time < $end
"""
_POOL_DAYS_SQL = """
SELECT pool, epoch(day) AS t, capacity_gpu_hours, allocated_gpu_hours, hoarded_gpu_hours
FROM unallocated_idle
WHERE cluster = $cluster AND list_contains(CAST($pools AS VARCHAR[]), pool) AND day >= $start AND day < $end
"""
_NET_SQL = """
SELECT pool, epoch(window_start) AS t, net_weighted_gpu_s AS net_value
FROM net_benefit
WHERE cluster = $cluster AND period = 'day' AND team = '(all)' AND list_contains(CAST($pools AS VARCHAR[]), pool)
  AND window_start >= $start AND window_start < $end
"""
_SAMPLES_SQL = "SELECT count(*) AS n FROM (SELECT 1 FROM gpu_samples WHERE cluster = $cluster LIMIT 1)"
_POOLS_SQL = "SELECT DISTINCT pool FROM pilot_jobs WHERE cluster = $cluster"
_SPAN_SQL = """
SELECT min(submit_time) AS first, max(coalesce(finished_at, submit_time)) AS last
FROM pilot_jobs WHERE cluster = $cluster
"""
_CANDIDATES_SQL = """
SELECT * FROM pilot_candidates
WHERE len(CAST($clusters AS VARCHAR[])) = 0 OR list_contains(CAST($clusters AS VARCHAR[]), cluster)
ORDER BY candidate DESC NULLS LAST, checkpoint_coverage DESC NULLS LAST, cluster, pool, tier
"""

_READINESS_SQL = """
SELECT DISTINCT s.cluster, v.verdict, v.borderline, v.fix_first, v.adoption, s.yes_count, s.no_count, s.unknown_count
FROM readiness_scorecard AS s
INNER JOIN readiness_verdict AS v ON v.cluster = s.cluster
WHERE len(CAST($clusters AS VARCHAR[])) = 0 OR list_contains(CAST($clusters AS VARCHAR[]), s.cluster)
ORDER BY s.cluster
"""

Query = Callable[[str, dict[str, object]], pl.DataFrame]


# -- declaration ---------------------------------------------------------------


@dataclass(frozen=True)
class Pilot:
    name: str
    cluster: str
    pools: tuple[str, ...]
    control: tuple[str, ...]
    start: datetime
    what: str
    end: datetime | None = None
    tiers: tuple[str, ...] = ()

    def __post_init__(self) -> None:
        problems = []
        if not self.pools:
            problems.append("no pilot pools")
        if not self.control:
            problems.append("no control pools")
        overlap = sorted(set(self.pools) & set(self.control))
        if overlap:
            problems.append(f"pools both in the pilot and the control: {', '.join(overlap)}")
        bad = [t for t in self.tiers if t not in TIERS]
        if bad:
            problems.append(f"unknown tier(s) {', '.join(bad)} (tiers: {', '.join(TIERS)})")
        if self.start.tzinfo is None or (self.end is not None and self.end.tzinfo is None):
            problems.append("times must carry a time zone")
        elif self.end is not None and self.end <= self.start:
            problems.append("end must come after start")
        if problems:
            raise ConfigError(f"pilot {self.name!r}: " + "; ".join(problems), "see docs/configuration.md, [pilot]")

    def running(self, at: datetime) -> bool:
        return self.start <= at and (self.end is None or at < self.end)


def parse_time(text: object, where: str) -> datetime:
    if isinstance(text, datetime):
        value = text
    else:
        try:
            value = datetime.fromisoformat(str(text))
        except ValueError:
            raise ConfigError(
                f"{where}: not an ISO 8601 time: {text!r}", "write it like 2026-02-02T00:00:00Z"
            ) from None
    return value if value.tzinfo else value.replace(tzinfo=UTC)


def _names(value: object, where: str) -> tuple[str, ...]:
    if isinstance(value, str):
        return tuple(v.strip() for v in value.split(",") if v.strip())
    if isinstance(value, list | tuple) and all(isinstance(v, str) for v in value):
        return tuple(value)
    raise ConfigError(f"{where}: expected a list of names, got {value!r}")


_KEYS = {"cluster", "pools", "control", "start", "end", "what", "tiers"}


def pilot_from(name: str, spec: Mapping[str, Any], default_cluster: str) -> Pilot:
    where = f"pilot.pilots.{name}"
    unknown = sorted(set(spec) - _KEYS)
    if unknown:
        raise ConfigError(f"{where}: unknown key(s) {', '.join(unknown)}", f"known: {', '.join(sorted(_KEYS))}")
    missing = [k for k in ("pools", "control", "start", "what") if not spec.get(k)]
    if missing:
        raise ConfigError(f"{where}: missing {', '.join(missing)}", "see docs/configuration.md, [pilot]")
    return Pilot(
        name=name,
        cluster=str(spec.get("cluster") or default_cluster),
        pools=_names(spec["pools"], f"{where}.pools"),
        control=_names(spec["control"], f"{where}.control"),
        start=parse_time(spec["start"], f"{where}.start"),
        end=parse_time(spec["end"], f"{where}.end") if spec.get("end") else None,
        what=str(spec["what"]),
        tiers=_names(spec.get("tiers", []), f"{where}.tiers"),
    )


def on_cluster(pilot: Pilot, clusters: Sequence[str]) -> Pilot:
    """A pilot that names no cluster (no `cluster` of its own, nor cluster.name) is of the warehouse's only
    cluster; with none or several, ConfigError says which to name."""
    if pilot.cluster:
        return pilot
    if len(clusters) == 1:
        return replace(pilot, cluster=clusters[0])
    held = f"clusters {', '.join(clusters)}" if clusters else "no jobs"
    raise ConfigError(f"pilot {pilot.name}: no cluster given, and the warehouse holds {held}",
                      "give --cluster, or the pilot's cluster in [pilot] pilots.NAME, or set cluster.name")


def declared(config: Config) -> dict[str, Pilot]:
    """Every pilot of the configuration, validated."""
    default_cluster = config.of(ClusterSettings).name
    found = {}
    for name, spec in config.of(PilotSettings).pilots.items():
        if not isinstance(spec, dict):
            raise ConfigError(f"pilot.pilots.{name}: must be a table", "see docs/configuration.md, [pilot]")
        found[name] = pilot_from(name, spec, default_cluster)
    return found


# -- figures -------------------------------------------------------------------


@dataclass(frozen=True)
class Figure:
    """One figure of a pilot: its four cells, the difference in differences and its interval."""

    key: str
    label: str
    unit: str
    role: str  # gain | cost | balance | context
    pilot_before: float | None
    pilot_after: float | None
    control_before: float | None
    control_after: float | None
    n: tuple[int, int, int, int]  # observations behind pilot before/after, control before/after
    n_of: str  # what the observations are: runs, jobs, preemptions, pool-days
    did: float | None
    low: float | None
    high: float | None
    # Bootstrap standard deviations of the after and before parts, for the projection of more data.
    sd_after: float | None = None
    sd_before: float | None = None
    missing: str | None = None

    @property
    def known(self) -> bool:
        return self.did is not None and self.low is not None and self.high is not None


@dataclass
class _Cell:
    """Observations of one group in one period: values with their day and pool (index within the group)."""

    values: np.ndarray
    days: np.ndarray
    pools: np.ndarray
    weights: np.ndarray | None = None  # denominators of a ratio, per observation


@dataclass
class _Draws:
    """One bootstrap's weights for a cell: per replicate, how often each day of the period and each pool
    of the group is drawn."""

    day_w: np.ndarray  # (replicates, days)
    pool_w: np.ndarray  # (replicates, pools)

    @property
    def shape(self) -> tuple[int, int]:
        return self.day_w.shape[1], self.pool_w.shape[1]

    def replicate(self, per_pool_day: np.ndarray) -> np.ndarray:
        """Sum over pools and days of `per_pool_day` (pools, days, k) weighted by each replicate's draws."""
        by_pool = np.einsum("bd,pdk->bpk", self.day_w, per_pool_day)
        return np.einsum("bp,bpk->bk", self.pool_w, by_pool)


def _cells(frame: pl.DataFrame, value: str, pilot: set[str], pool_index: Mapping[str, int],
           weight: str | None = None) -> dict[tuple[str, str], _Cell]:
    out = {}
    frame = frame.with_columns(pl.col("pool").replace_strict(pool_index, default=-1).alias("pool_no"))
    for group in ("pilot", "control"):
        for period in ("before", "after"):
            sel = frame.filter(
                (pl.col("pool").is_in(list(pilot)) if group == "pilot" else ~pl.col("pool").is_in(list(pilot)))
                & (pl.col("period") == period)
                & (pl.col("pool_no") >= 0)
            )
            out[(group, period)] = _Cell(
                sel[value].to_numpy().astype(float),
                sel["block"].to_numpy().astype(np.int64),
                sel["pool_no"].to_numpy().astype(np.int64),
                None if weight is None else sel[weight].to_numpy().astype(float),
            )
    return out


def _per_pool_day(cell: _Cell, draws: _Draws, index: np.ndarray, k: int, weights: np.ndarray | None) -> np.ndarray:
    days, pools = draws.shape
    flat = (cell.pools * days + cell.days) * k + index
    return np.bincount(flat, weights=weights, minlength=pools * days * k).reshape(pools, days, k)


def _ratio_reps(cell: _Cell, draws: _Draws) -> tuple[float | None, np.ndarray]:
    """Sum of values over sum of weights (or count), exactly and per replicate."""
    den_obs = np.ones_like(cell.values) if cell.weights is None else cell.weights
    zero = np.zeros(cell.values.size, dtype=np.int64)
    num = _per_pool_day(cell, draws, zero, 1, cell.values)
    den = _per_pool_day(cell, draws, zero, 1, den_obs)
    total = den.sum()
    if total <= 0:
        return None, np.full(draws.day_w.shape[0], np.nan)
    with np.errstate(invalid="ignore", divide="ignore"):
        reps = draws.replicate(num)[:, 0] / draws.replicate(den)[:, 0]
    return float(num.sum() / total), reps


def _quantile_reps(cell: _Cell, draws: _Draws, q: float) -> tuple[float | None, np.ndarray]:
    """The q-quantile, exactly and per replicate from per-pool-day histograms over rank bins."""
    if cell.values.size == 0:
        return None, np.full(draws.day_w.shape[0], np.nan)
    exact = float(np.quantile(cell.values, q))
    edges = np.unique(np.quantile(cell.values, np.linspace(0.0, 1.0, _BINS + 1)))
    k = max(len(edges) - 1, 1)
    bins = np.clip(np.searchsorted(edges, cell.values, side="right") - 1, 0, k - 1)
    counts = _per_pool_day(cell, draws, bins, k, None)
    sums = np.bincount(bins, weights=cell.values, minlength=k)
    sizes = np.bincount(bins, minlength=k)
    with np.errstate(invalid="ignore", divide="ignore"):
        centre = sums / sizes  # mean of each bin's observations
    cum = np.cumsum(draws.replicate(counts), axis=1)
    total = cum[:, -1]
    pick = np.minimum((cum < (q * total)[:, None]).sum(axis=1), k - 1)
    reps = np.where(total > 0, centre[pick], np.nan)
    return exact, reps


def _figure(key: str, label: str, unit: str, role: str, n_of: str,
            cells: dict[tuple[str, str], _Cell], draws: Mapping[tuple[str, str], _Draws],
            stat: Callable[[_Cell, _Draws], tuple[float | None, np.ndarray]],
            confidence: float, scale: float = 1.0, missing_hint: str = "") -> Figure:
    values: dict[tuple[str, str], float | None] = {}
    reps: dict[tuple[str, str], np.ndarray] = {}
    for (group, period), cell in cells.items():
        values[(group, period)], reps[(group, period)] = stat(cell, draws[(group, period)])
    pb_n, pa_n, cb_n, ca_n = (int(cells[(g, p)].values.size) for g in ("pilot", "control") for p in ("before", "after"))

    def scaled(v: float | None) -> float | None:
        return None if v is None else v * scale

    empty = [f"{g} pools {p} the change" for (g, p), v in values.items() if v is None]
    base = dict(
        key=key, label=label, unit=unit, role=role, n=(pb_n, pa_n, cb_n, ca_n), n_of=n_of,
        pilot_before=scaled(values[("pilot", "before")]), pilot_after=scaled(values[("pilot", "after")]),
        control_before=scaled(values[("control", "before")]), control_after=scaled(values[("control", "after")]),
    )
    if empty:
        why = f"no {n_of} in " + ", ".join(empty) + (f" ({missing_hint})" if missing_hint else "")
        return Figure(**base, did=None, low=None, high=None, missing=why)  # type: ignore[arg-type]
    pb, pa, cb, ca = (values[k] for k in (("pilot", "before"), ("pilot", "after"),
                                           ("control", "before"), ("control", "after")))
    assert pb is not None and pa is not None and cb is not None and ca is not None
    did = ((pa - pb) - (ca - cb)) * scale
    after = (reps[("pilot", "after")] - reps[("control", "after")]) * scale
    before = (reps[("pilot", "before")] - reps[("control", "before")]) * scale
    theta = after - before
    ok = np.isfinite(theta)
    if ok.sum() < 0.9 * theta.size:
        return Figure(**base, did=did, low=None, high=None,  # type: ignore[arg-type]
                      missing=f"too few days with {n_of} to bootstrap an interval")
    alpha = (1.0 - confidence) / 2.0
    low, high = np.quantile(theta[ok], [alpha, 1.0 - alpha])
    # The estimate is exact, a quantile's replicates are binned: where the replicates all fall on one side
    # of a discrete estimate (a median of 0 s), the interval still reaches it.
    return Figure(
        **base,  # type: ignore[arg-type]
        did=did, low=float(min(low, did)), high=float(max(high, did)),
        sd_after=float(np.std(after[ok])), sd_before=float(np.std(before[ok])),
    )


@dataclass(frozen=True)
class Evaluation:
    pilot: Pilot
    thresholds: PilotSettings
    before_start: datetime
    after_end: datetime
    days_before: int
    days_after: int
    figures: tuple[Figure, ...]
    verdict: str
    reasons: tuple[str, ...]
    more_weeks: float | None = None
    notes: tuple[str, ...] = field(default_factory=tuple)
    # What makes the verdict less sure than its intervals say (too few control pools).
    warnings: tuple[str, ...] = field(default_factory=tuple)

    def figure(self, key: str) -> Figure:
        return next(f for f in self.figures if f.key == key)

    @property
    def clear_loss(self) -> bool:
        return self.verdict == "roll back"

    def table(self) -> pl.DataFrame:
        """The figures as rows, for the dashboard and the report."""
        return pl.DataFrame(
            [
                {
                    "figure": f.label, "unit": f.unit, "role": f.role,
                    "pilot_before": f.pilot_before, "pilot_after": f.pilot_after,
                    "control_before": f.control_before, "control_after": f.control_after,
                    "difference_in_differences": f.did, "low": f.low, "high": f.high,
                    "n": "/".join(str(x) for x in f.n), "n_of": f.n_of, "unknown_because": f.missing,
                }
                for f in self.figures
            ],
            schema_overrides={k: pl.Float64 for k in ("pilot_before", "pilot_after", "control_before",
                                                      "control_after", "difference_in_differences", "low", "high")},
        )


def _periodise(frame: pl.DataFrame, time_col: str, start: float, change: float, end: float) -> pl.DataFrame:
    """Observations inside [start, end) with their period and UTC day (block) index within it: every kind
    of observation, per run, per job or per pool-day, falls into the same calendar day's block."""
    t = pl.col(time_col)
    day = (t / DAY_S).floor()
    return frame.filter(t.is_not_null() & (t >= start) & (t < end)).with_columns(
        pl.when(t >= change).then(pl.lit("after")).otherwise(pl.lit("before")).alias("period"),
        pl.when(t >= change)
        .then(day - math.floor(change / DAY_S))
        .otherwise(day - math.floor(start / DAY_S))
        .cast(pl.Int64)
        .alias("block"),
    )


def _days(start: float, end: float) -> int:
    """UTC days that [start, end) touches."""
    return max(1, math.ceil(end / DAY_S) - math.floor(start / DAY_S))


def _bootstrap(days: Mapping[str, int], groups: Mapping[str, Sequence[str]], replicates: int
               ) -> dict[tuple[str, str], _Draws]:
    """Per replicate: the days of each period drawn with replacement, the same for both groups (a busy day
    stays busy in both), and the pools of each group drawn with replacement, the same before and after
    (a pool's own run of bad luck after the change is not the change's effect)."""
    rng = np.random.default_rng(_SEED)

    def draw(n: int) -> np.ndarray:
        return rng.multinomial(n, np.full(n, 1.0 / n), size=replicates).astype(float)

    day_w = {p: draw(d) for p, d in days.items()}
    pool_w = {g: draw(len(names)) for g, names in groups.items()}
    return {(g, p): _Draws(day_w[p], pool_w[g]) for g in groups for p in days}


def evaluate(query: Query, pilot: Pilot, th: PilotSettings, now: datetime | None = None) -> Evaluation:
    """Every figure of `pilot` with its interval, and the verdict. `query` runs SQL with bound parameters
    (Warehouse.query, or the dashboard's read-only Reader.frame)."""
    span = query(_SPAN_SQL, {"cluster": pilot.cluster}).row(0, named=True)
    if span["first"] is None:
        raise ConfigError(f"pilot {pilot.name!r}: cluster {pilot.cluster!r} has no jobs in the warehouse",
                          "check pilot.pilots.<name>.cluster, or load data and run `preemptlens analyze`")
    known = set(query(_POOLS_SQL, {"cluster": pilot.cluster})["pool"].to_list())
    unknown = [p for p in (*pilot.pools, *pilot.control) if p not in known]
    if unknown:
        raise ConfigError(f"pilot {pilot.name!r}: no jobs in pool(s) {', '.join(unknown)} of cluster {pilot.cluster!r}",
                          f"pools with jobs: {', '.join(sorted(known))}")
    data_end = span["last"] + timedelta(seconds=1)
    after_end = min(pilot.end or data_end, data_end, now or data_end)
    if after_end <= pilot.start:
        raise ConfigError(f"pilot {pilot.name!r}: no data after its start {pilot.start.isoformat()}",
                          "the data ends " + span["last"].isoformat())
    # From midnight, so that the first day's pool-day row counts too.
    first = max(pilot.start - timedelta(days=th.before_days), span["first"])
    before_start = first.replace(hour=0, minute=0, second=0, microsecond=0)
    start, change, end = before_start.timestamp(), pilot.start.timestamp(), after_end.timestamp()
    days = {"before": _days(start, change), "after": _days(change, end)}
    pools = sorted(set(pilot.pools) | set(pilot.control))
    draws = _bootstrap(days, {"pilot": sorted(pilot.pools), "control": sorted(pilot.control)}, th.bootstrap_samples)
    pool_index = {p: i for group in (sorted(pilot.pools), sorted(pilot.control)) for i, p in enumerate(group)}
    params = {"cluster": pilot.cluster, "pools": pools, "start": before_start, "end": after_end}
    pset = set(pilot.pools)
    waits = _periodise(query(_WAITS_SQL, params), "t", start, change, end)
    jobs_all = query(_JOBS_SQL, params)
    jobs = _periodise(jobs_all, "t", start, change, end)
    finished = _periodise(jobs_all.with_columns(pl.lit(1.0).alias("one")), "finished_t", start, change, end)
    victims = _periodise(
        query(_VICTIMS_SQL, params).with_columns(pl.lit(1.0).alias("one"), pl.col("repeat_victim").cast(pl.Float64)),
        "t", start, change, end,
    )
    # A pool-day straddling the change belongs to neither period.
    pool_days = query(_POOL_DAYS_SQL, params)
    pool_days = pool_days.filter((pl.col("t") + DAY_S <= change) | (pl.col("t") >= change))
    pool_days = _periodise(pool_days, "t", start, change, end)
    net = query(_NET_SQL, params)
    net = _periodise(net.filter((pl.col("t") + DAY_S <= change) | (pl.col("t") >= change)), "t", start, change, end)
    has_samples = int(query(_SAMPLES_SQL, {"cluster": pilot.cluster})["n"][0]) > 0
    cf = th.confidence
    figures: list[Figure] = []

    def cells_of(frame: pl.DataFrame, value: str, weight: str | None = None) -> dict[tuple[str, str], _Cell]:
        return _cells(frame, value, pset, pool_index, weight)

    def add(key: str, label: str, unit: str, role: str, n_of: str, cells: dict[tuple[str, str], _Cell],
            stat: Callable[[_Cell, _Draws], tuple[float | None, np.ndarray]], scale: float = 1.0,
            hint: str = "") -> None:
        figures.append(_figure(key, label, unit, role, n_of, cells, draws, stat, cf, scale, hint))

    wait_cells = cells_of(waits, "value")
    add("high_wait_p50_s", "critical+high queue wait, median", "s", "gain", "runs", wait_cells,
        lambda c, p: _quantile_reps(c, p, 0.5))
    add("high_wait_p90_s", "critical+high queue wait, p90", "s", "gain", "runs", wait_cells,
        lambda c, p: _quantile_reps(c, p, 0.9))
    done = jobs.filter(pl.col("completion_s").is_not_null())
    for tier in TIERS:
        role = "cost" if tier in ("normal", "low") else "context"
        add(f"completion_p50_s_{tier}", f"completion time, median, {tier}", "s", role, "finished jobs",
            cells_of(done.filter(pl.col("tier") == tier), "completion_s"),
            lambda c, p: _quantile_reps(c, p, 0.5))
    add("completion_p50_s_all", "completion time, median, all tiers", "s", "context", "finished jobs",
        cells_of(done, "completion_s"), lambda c, p: _quantile_reps(c, p, 0.5))
    add("retries_per_job", "retries per job", "retries", "cost", "jobs", cells_of(jobs, "retries"),
        _ratio_reps)
    # Rates per week and 1,000 GPUs: counts per day over capacity GPU-hours of the same days.
    capacity = pool_days.select("pool", "period", "block", pl.col("capacity_gpu_hours").alias("cap"))
    per_1000_gpu_weeks = 1000 * 24 * 7.0

    def rate_cells(frame: pl.DataFrame, value: str) -> dict[tuple[str, str], _Cell]:
        counts = frame.group_by("pool", "period", "block").agg(pl.col(value).sum().alias("v"))
        joined = capacity.join(counts, on=["pool", "period", "block"], how="left").with_columns(
            pl.col("v").fill_null(0.0)
        )
        return cells_of(joined, "v", weight="cap")

    add("victims_per_week", "victims per week per 1,000 GPUs", "victims", "context", "pool-days",
        rate_cells(victims, "one"), _ratio_reps, scale=per_1000_gpu_weeks)
    add("repeat_victims_per_week", "repeat victims per week per 1,000 GPUs", "victims", "context", "pool-days",
        rate_cells(victims, "repeat_victim"), _ratio_reps, scale=per_1000_gpu_weeks)
    add("thrown_away_share", "work thrown away (lost progress + warm-up) per capacity GPU-hour", "share", "cost",
        "pool-days", rate_cells(victims, "thrown_away_gpu_s"), _ratio_reps, scale=1 / 3600.0)
    add("waiting_share", "victims' requeue waiting (GPUs x delay) per capacity GPU-hour", "share", "context",
        "pool-days", rate_cells(victims, "waiting_gpu_s"), _ratio_reps, scale=1 / 3600.0)
    add("net_benefit_share", "net benefit (tier-weighted gains minus costs) per capacity GPU-hour", "share",
        "balance", "pool-days", rate_cells(net, "net_value"), _ratio_reps, scale=1 / 3600.0)
    add("throughput_per_day", "jobs finished per day per 1,000 GPUs", "jobs", "context", "pool-days",
        rate_cells(finished, "one"), _ratio_reps, scale=1000 * 24.0)
    add("allocated_share", "allocated GPU-hours per capacity GPU-hour", "share", "context", "pool-days",
        cells_of(pool_days, "allocated_gpu_hours", weight="capacity_gpu_hours"), _ratio_reps)
    samples_hint = "no GPU samples for this cluster: idle hoarding is unknown"
    busy = pool_days.with_columns((pl.col("allocated_gpu_hours") - pl.col("hoarded_gpu_hours")).alias("busy"))
    if not has_samples:
        busy = busy.clear()
    add("busy_share", "busy GPU-hours per capacity GPU-hour (allocated, not idle-hoarded)", "share", "context",
        "pool-days", cells_of(busy, "busy", weight="capacity_gpu_hours"), _ratio_reps, hint=samples_hint)
    add("hoarded_share", "idle-hoarded GPU-hours per capacity GPU-hour", "share", "context", "pool-days",
        cells_of(busy, "hoarded_gpu_hours", weight="capacity_gpu_hours"), _ratio_reps, hint=samples_hint)
    verdict, reasons, weeks = decide(figures, th, days["after"])
    notes = []
    if pilot.tiers:
        notes.append(f"the change concerns tier(s) {', '.join(pilot.tiers)}")
    notes.append(
        f"intervals: {pct(th.confidence)} bootstrap percentile intervals, {th.bootstrap_samples} replicates "
        "resampling UTC days (the same for pilot and control pools) and pools (the same before and after)"
    )
    warnings = []
    if len(pilot.control) < th.min_control_pools:
        warnings.append(
            f"only {len(pilot.control)} control pool(s), fewer than pilot.min_control_pools ({th.min_control_pools}): "
            "the bootstrap cannot see how much pools differ on their own, so the intervals come out too narrow and "
            "a 'clearly' may be chance; add control pools"
        )
    return Evaluation(
        pilot=pilot, thresholds=th, before_start=before_start, after_end=after_end,
        days_before=days["before"], days_after=days["after"], figures=tuple(figures),
        verdict=verdict, reasons=tuple(reasons), more_weeks=weeks, notes=tuple(notes), warnings=tuple(warnings),
    )


# -- verdict -------------------------------------------------------------------


def _cost_limit(f: Figure, th: PilotSettings) -> float:
    if f.key.startswith("completion_p50_s_"):
        return th.max_completion_increase_share * abs(f.pilot_before or 0.0)
    if f.key == "retries_per_job":
        return th.max_retries_increase
    if f.key == "thrown_away_share":
        return th.max_thrown_away_increase_share
    return 0.0


def _weeks_to_clear(f: Figure, boundary: float, days_after: int) -> float | None:
    """Weeks of data after the change that would put the interval on one side of `boundary`, if the
    estimate stays where it is and the after part's spread shrinks with the square root of its days."""
    if not f.known or f.sd_after is None or f.sd_before is None:
        return None
    assert f.did is not None
    gap = abs(f.did - boundary)
    if gap == 0:
        return math.inf
    sd_total = math.hypot(f.sd_after, f.sd_before)
    z = (f.high - f.low) / 2.0 / sd_total if sd_total > 0 else 0.0  # type: ignore[operator]
    if z <= 0:
        return 0.0
    var_after_needed = (gap / z) ** 2 - f.sd_before**2
    if var_after_needed <= 0:
        return math.inf  # the before period alone keeps the interval that wide
    days_needed = days_after * f.sd_after**2 / var_after_needed
    return max(0.0, (days_needed - days_after) / 7.0)


def decide(figures: Sequence[Figure], th: PilotSettings, days_after: int) -> tuple[str, list[str], float | None]:
    """The verdict, its reasons, and (for keep piloting) the weeks of data that would settle it."""
    by_key = {f.key: f for f in figures}
    gains = [by_key[k] for k in ("high_wait_p50_s", "high_wait_p90_s") if by_key[k].known]
    costs = [f for f in figures if f.role == "cost" and f.known]
    g = th.min_wait_gain_s

    def span(f: Figure) -> str:
        return f"{f.label} {change(f.did, f.unit)} [{change(f.low, f.unit)}, {change(f.high, f.unit)}]"

    def limit(f: Figure) -> str:
        return change(_cost_limit(f, th), f.unit)

    gained = [f for f in gains if f.high is not None and f.high < -g]
    no_gain = bool(gains) and all(f.low is not None and f.low > -g for f in gains)
    ts_worse = [f for f in gains if f.low is not None and f.low > g]
    worse = [f for f in costs if f.low is not None and f.low > _cost_limit(f, th)]
    balance = by_key["net_benefit_share"]
    net_loss = balance.known and balance.high is not None and balance.high < 0
    reasons: list[str] = []
    if not gains:
        unknown = by_key["high_wait_p50_s"].missing or "no interval"
        return "keep piloting", [f"the time-sensitive wait is unknown: {unknown}"], None
    if days_after < th.min_days_after:
        reasons.append(f"only {days_after} day(s) of data after the change; at least {th.min_days_after} are needed "
                       "before the intervals can be trusted")
        return "keep piloting", reasons, (th.min_days_after - days_after) / 7.0
    if ts_worse:
        reasons += [f"time-sensitive work waits clearly longer: {span(f)}" for f in ts_worse]
        return "roll back", reasons, None
    if gained and not worse:
        reasons += [f"time-sensitive work gained clearly: {span(f)}" for f in gained]
        reasons.append("no cost got clearly worse than its limit ("
                       + "; ".join(span(f) for f in costs) + ")")
        if net_loss:
            reasons.append(f"but the ledger's tier-weighted net benefit is clearly negative ({span(balance)}): "
                           "victims' requeue waiting outweighs the preemptors' gain; widen to pools where "
                           "victims requeue quickly")
        return "widen", reasons, None
    if net_loss:
        reasons.append(f"costs clearly exceed gains: {span(balance)}")
        reasons += [f"though time-sensitive work gained: {span(f)}" for f in gained]
        reasons += [f"clearly worse: {span(f)} (limit {limit(f)})" for f in worse]
        return "roll back", reasons, None
    if worse and not gained:
        # A cost is clearly worse and no gain is clear: the pilot has shown what it costs and not what it buys.
        reasons += [f"clearly worse: {span(f)} (limit {limit(f)})" for f in worse]
        reasons.append(f"and no clear gain of {duration(g)} or more for time-sensitive work: "
                       + "; ".join(span(f) for f in gains))
        return "roll back", reasons, None
    if worse and gained:
        total = by_key["completion_p50_s_all"]
        reasons += [f"time-sensitive work gained clearly: {span(f)}" for f in gained]
        reasons += [f"clearly worse: {span(f)} (limit {limit(f)})" for f in worse]
        if total.known and total.low is not None and total.low > _cost_limit(total, th):
            reasons.append(f"total completion time got clearly worse: {span(total)}")
            return "roll back", reasons, None
        reasons.append("gain and cost are both clear and total completion time did not clearly worsen: "
                       "weigh them (the evidence above), or narrow the pilot to recoverable victims")
        return "keep piloting", reasons, 0.0
    if no_gain:
        reasons.append(f"no gain of {duration(g)} or more for time-sensitive work, and no cost clearly worse: "
                       + "; ".join(span(f) for f in gains))
        reasons.append("more weeks will not show a gain the intervals already exclude")
        return "keep piloting", reasons, None
    # Undecided: how long until the gain's interval clears the gain line, or a cost's its limit.
    needs = []
    for f in gains:
        if f.low is not None and f.high is not None and f.low <= -g <= f.high:
            needs.append(_weeks_to_clear(f, -g, days_after))
            reasons.append(f"gain not yet clear: {span(f)}")
    weeks = [w for w in needs if w is not None]
    more = min(weeks) if weeks else None
    if more is not None and math.isinf(more):
        reasons.append("at the current estimate more data after the change alone would not settle it")
        more = None
    return "keep piloting", reasons, more


# -- candidates ----------------------------------------------------------------


def candidates(query: Query, clusters: Sequence[str] = ()) -> pl.DataFrame:
    """Pools and preemptible tiers that suit a pilot: recoverable, shared and scarce (pilot_candidates), with
    their cluster's scarcity in words (`scarcity`: the word and figure Q1 and every other outlet print)."""
    found = query(_CANDIDATES_SQL, {"clusters": list(clusters)})
    said = {c: s.words() for c, s in scarcity.read(query, clusters).items()}
    return found.with_columns(pl.col("cluster").replace_strict(said, default="scarcity unknown (not analysed yet)",
                                                               return_dtype=pl.String).alias("scarcity"))


def readiness(query: Query, clusters: Sequence[str] = ()) -> list[str]:
    """Per cluster, the scorecard's verdict and what to fix first: the article puts quotas, queues and tiered
    pools before any pilot."""
    lines = []
    # the verdict's sentence ends with the best applicable alternative, read from the stored counterfactual
    stored = counterfactual.answers(*(query(sql, {}).to_dicts() for sql in (
        counterfactual.READ_RUNS, counterfactual.READ_SCENARIOS, counterfactual.READ_FIGURES)))
    for r in query(_READINESS_SQL, {"clusters": list(clusters)}).iter_rows(named=True):
        lines.append(f"readiness of {r['cluster']}: {verdict_text(r, stored.get(r['cluster']))}")
        lines.append(f"  adoption order: {r['adoption']}")
    return lines


# -- text ----------------------------------------------------------------------


def render(ev: Evaluation) -> str:
    p = ev.pilot
    lines = [
        f"pilot {p.name} on cluster {p.cluster}: {p.what}",
        f"  pilot pools {', '.join(p.pools)}; control pools {', '.join(p.control)}",
        f"  before {ev.before_start:%Y-%m-%d %H:%M} to {p.start:%Y-%m-%d %H:%M} UTC ({ev.days_before} days), "
        f"after to {ev.after_end:%Y-%m-%d %H:%M} UTC ({ev.days_after} days)"
        + ("" if p.end is None else f", pilot ended {p.end:%Y-%m-%d %H:%M} UTC"),
        "",
        f"  {'figure':58} {'pilot before':>14} {'pilot after':>14} {'control bef.':>14} {'control after':>14}"
        f" {'diff-in-diff [interval]':>34}  n (pilot b/a, control b/a)",
    ]
    for f in ev.figures:
        did = change(f.did, f.unit)
        ci = ("" if f.low is None or f.high is None
              else f" [{change(f.low, f.unit)}, {change(f.high, f.unit)}]")
        lines.append(
            f"  {f.label:58} {quantity(f.pilot_before, f.unit):>14} {quantity(f.pilot_after, f.unit):>14} "
            f"{quantity(f.control_before, f.unit):>14} {quantity(f.control_after, f.unit):>14} {did + ci:>34}  "
            f"{'/'.join(str(x) for x in f.n)} {f.n_of}"
        )
        if f.missing:
            lines.append(f"      unknown: {f.missing}")
    lines += [""] + [f"  WARNING: {w}" for w in ev.warnings]
    lines += [f"  verdict: {ev.verdict.upper()}"]
    lines += [f"    - {r}" for r in ev.reasons]
    if ev.verdict == "keep piloting" and ev.more_weeks:
        lines.append(f"    about {ev.more_weeks:.1f} more week(s) of data at the current rate would settle it")
    lines += [f"  note: {n}" for n in ev.notes]
    return "\n".join(lines)


def render_candidates(frame: pl.DataFrame) -> str:
    if frame.height == 0:
        return "pilot candidates: no preemptible runs in the warehouse yet"

    def yn(v: object) -> str:
        return "unknown" if v is None else ("yes" if v else "no")

    lines = ["pilot candidates (recoverable, shared and scarce pools and preemptible tiers):"]
    for r in frame.iter_rows(named=True):
        cov = f"{measure_label('checkpoint_coverage')} {measure('checkpoint_coverage', r['checkpoint_coverage'])}"
        lines.append(
            f"  {'*' if r['candidate'] else ' '} {r['cluster']}/{r['pool']} tier {r['tier']}: "
            f"recoverable {yn(r['recoverable'])} ({cov}), "
            f"shared {yn(r['shared'])} ({r['teams']} team(s)), {r['scarcity']}"
        )
    return "\n".join(lines)
