"""The load contract: what every collector hands to the load API, and the rules SQL types alone do not state.

A collector never opens the warehouse. It reads its source and yields
`Batch`es: frames per raw table, the records it could not parse (`Reject`),
and the cursor that the batch completes (`Watermark`). The runner loads each
batch in one transaction, so data and cursor always land together.

Column names, types and NOT NULL come from the schema itself (sql/schema,
read back from the database catalog); this module adds each table's natural
key, the allowed values of enumerated columns and value ranges, and the
checks every value of a type must pass whatever its table (`value_checks`):
finite numbers, times between 1970 and now plus a slack, text without control
characters and within a length. The load API applies all of them, so every
collector and importer is held to the same contract (docs/import-format.md).
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from typing import ClassVar, Protocol, runtime_checkable

import polars as pl

TIERS: tuple[str, ...] = ("critical", "high", "normal", "low")
# Higher rank outranks lower; used wherever tiers are compared.
TIER_RANK: dict[str, int] = {"critical": 3, "high": 2, "normal": 1, "low": 0}

RUN_STATES: tuple[str, ...] = (
    "pending",
    "running",
    "completed",
    "failed",
    "cancelled",
    "preempted",
    "requeued",
    "timeout",
    "node_fail",
)
CHECKPOINT_KINDS: tuple[str, ...] = ("checkpoint", "progress", "restore")
# scheduler_policy: which scheduler states the policy, and what a row's subject is.
POLICY_SCHEDULERS: tuple[str, ...] = ("slurm", "kueue", "kai", "volcano", "kubernetes", "simulator")
POLICY_SCOPES: tuple[str, ...] = ("cluster", "partition", "qos", "cluster_queue", "queue", "tier")


@dataclass(frozen=True)
class Reject:
    """A record the collector could not turn into a row.

    `record` locates it in the source (``file.jsonl:12``, ``JobId=123``,
    ``series {...} @ 2026-11-02T10:00Z``); `field` names the offending field.
    """

    table: str
    record: str
    field: str
    reason: str
    raw: str | None = None


class RecordError(ValueError):
    """A record a collector cannot turn into a row: `field` names the culprit and `reason` says what is wrong,
    as the record's `Reject` will."""

    def __init__(self, field: str, reason: str) -> None:
        super().__init__(f"{field}: {reason}")
        self.field = field
        self.reason = reason


@dataclass(frozen=True)
class Watermark:
    collector: str
    cluster: str
    stream: str
    cursor: str


@dataclass
class Batch:
    source: str
    frames: dict[str, pl.DataFrame] = field(default_factory=dict)
    rejects: list[Reject] = field(default_factory=list)
    watermarks: list[Watermark] = field(default_factory=list)


class Collector(Protocol):
    """A source adapter. `tables` lists the raw tables it writes."""

    name: ClassVar[str]
    tables: ClassVar[tuple[str, ...]]

    def batches(self, watermarks: Mapping[tuple[str, str], str]) -> Iterator[Batch]:
        """Yield batches from the cursors last committed, keyed by (cluster, stream)."""
        ...


@runtime_checkable
class UsesRuns(Protocol):
    """A collector whose records name their job only by where it ran (a checkpoint under a job's working
    directory, a job's output file, an exporter's label): before its batches, the shell hands it the runs
    recorded since `runs_since()` with their jobs' fields, and every label that names a job
    (Warehouse.recorded_runs)."""

    def runs_since(self) -> datetime:
        ...

    def use_runs(self, runs: pl.DataFrame, labels: pl.DataFrame) -> None:
        ...


class Effector(Protocol):
    """What an action changes in a scheduler (analytics/actions.py decides, an effector does).

    `job_id` is the warehouse's jobs.job_id (a Kueue Workload's or KAI PodGroup's UID, a Slurm job id): the
    effector finds the scheduler's object itself. `held` reads the scheduler, not the audit table, so a
    restart can compare the two. `undo` must also accept an empty `detail`: the process may have died
    between the scheduler's change and the audit row recording what apply returned.
    """

    scheduler: str  # "kueue" | "kai" | "slurm"

    def held(self) -> dict[str, int]:
        """job_id -> level the scheduler holds now, for every job preemptlens marked (0: marked, no longer held)."""
        ...

    def apply(self, job_id: str, level: int) -> dict[str, str]:
        """Make the scheduler hold `level` (> 0) for the job; return what undo needs (stored in the audit row)."""
        ...

    def undo(self, job_id: str, detail: dict[str, str]) -> None:
        """Remove what apply did, given the detail apply returned ({} when it was never recorded)."""
        ...


@dataclass(frozen=True)
class Check:
    column: str
    reason: str
    ok: pl.Expr  # true where the value is acceptable (nulls are NOT NULL's business)


@dataclass(frozen=True)
class TableRules:
    key: tuple[str, ...]
    # Column whose min/max bounds the merge's scan of the existing table.
    range_column: str | None = None
    # Columns whose stored value survives a later load that leaves them NULL
    # (a source that sees a record again with less detail than before).
    sticky: tuple[str, ...] = ()
    checks: tuple[Check, ...] = field(default_factory=tuple)


def _one_of(column: str, values: tuple[str, ...]) -> Check:
    return Check(column, f"must be one of {', '.join(values)}", pl.col(column).is_in(list(values)))


def _at_least(column: str, low: float) -> Check:
    return Check(column, f"must be >= {low:g}", pl.col(column) >= low)


def _between(column: str, low: float, high: float) -> Check:
    return Check(column, f"must be between {low:g} and {high:g}", pl.col(column).is_between(low, high))


RULES: dict[str, TableRules] = {
    "pools": TableRules(key=("cluster", "pool", "valid_from"), checks=(_at_least("gpus", 0),)),
    "jobs": TableRules(
        key=("cluster", "job_id"),
        # Kueue clears a Workload's admission when it is evicted: the pool it ran in stays known.
        sticky=("pool",),
        checks=(
            _one_of("tier", TIERS),
            _at_least("gpus", 0),
            Check(
                "checkpoint_interval_s",
                "must be > 0",
                pl.col("checkpoint_interval_s") > 0,
            ),
            _at_least("work_s", 0),
            Check("time_limit_s", "must be > 0", pl.col("time_limit_s") > 0),
        ),
    ),
    "job_runs": TableRules(
        key=("cluster", "job_id", "run"),
        sticky=("pool", "hosts", "submit_time", "eligible_time", "start_time", "preemptor_job_id", "reason",
                "ended_by", "restarts_before"),
        checks=(
            _one_of("state", RUN_STATES),
            _at_least("run", 1),
            _at_least("gpus", 0),
            _at_least("restarts_before", 0),
            Check(
                "end_time",
                "must not be before start_time",
                pl.col("start_time").is_null() | (pl.col("end_time") >= pl.col("start_time")),
            ),
        ),
    ),
    "preemption_links": TableRules(key=("cluster", "victim_job_id", "time")),
    # Ids are reused (Slurm's counter wraps): an alias may name several jobs,
    # and attribution picks the one that ran at a sample's time.
    "job_aliases": TableRules(key=("cluster", "alias", "job_id")),
    "checkpoints": TableRules(
        key=("cluster", "job_id", "kind", "time"),
        checks=(_one_of("kind", CHECKPOINT_KINDS), _at_least("save_s", 0)),
    ),
    "gpu_samples": TableRules(
        key=("cluster", "host", "gpu_uuid", "gpu_instance", "time"),
        range_column="time",
        checks=(
            _between("busy", 0.0, 1.0),
            _at_least("mem_used_mib", 0),
            _at_least("power_w", 0),
        ),
    ),
    "scheduler_policy": TableRules(
        key=("cluster", "valid_from", "scope", "subject", "setting"),
        checks=(_one_of("scheduler", POLICY_SCHEDULERS), _one_of("scope", POLICY_SCOPES)),
    ),
    "scheduler_quotas": TableRules(
        key=("cluster", "scheduler", "kind", "name"),
        checks=(
            _one_of("scheduler", ("slurm", "kueue", "kai")),
            _one_of("kind", ("partition", "qos", "account", "cluster_queue", "queue")),
            _at_least("gpu_quota", 0),
            _at_least("gpu_limit", 0),
        ),
    ),
    "sim_truth_preemptions": TableRules(key=("cluster", "victim_job_id", "victim_run")),
    "sim_truth_hoarding": TableRules(key=("cluster", "job_id", "run", "idle_start")),
}


# -- checks by column type, for every table ------------------------------------

# Ids and names (keys, *_id, cluster, host, pool, team, user, job name, ...): at most this many characters.
MAX_ID_CHARS = 256
# Any other text (reasons, node lists): at most this many characters.
MAX_TEXT_CHARS = 8192
# Text columns that are not ids or names (paths run to PATH_MAX; a policy value or its raw line is free text);
# every other text column is held to MAX_ID_CHARS.
FREE_TEXT_COLUMNS: frozenset[str] = frozenset(
    {"reason", "hosts", "work_dir", "stdout_path", "stderr_path", "value", "raw"})
# Default of warehouse.future_slack_s: a time later than now plus this is quarantined (clocks drift a
# little; a year-2999 end time would become the data's end and stretch every window to it).
def encodable(text: str) -> bool:
    """Whether text can be stored: JSON may escape half a surrogate pair (\\ud800), which no text column holds."""
    try:
        text.encode("utf-8")
    except UnicodeEncodeError:
        return False
    return True


FUTURE_SLACK_S = 86_400.0
EARLIEST = datetime(1970, 1, 1, tzinfo=UTC)
# Epoch seconds beyond year 9999 cannot be a time (and 1e20 overflows the conversion).
MAX_EPOCH_S = 253_402_300_799.0

# C0 controls and DEL; free text may keep tab, newline and carriage return.
_ID_CONTROL = r"[\x00-\x1f\x7f]"
_TEXT_CONTROL = r"[\x00-\x08\x0b\x0c\x0e-\x1f\x7f]"


def value_checks(column: str, dtype: pl.DataType, now: datetime, future_slack_s: float) -> tuple[Check, ...]:
    """The checks every value of `column`'s type must pass, in any table."""
    col = pl.col(column)
    if dtype == pl.Float64:
        return (Check(column, "must be a finite number", col.is_finite()),)
    if isinstance(dtype, pl.Datetime):
        latest = now + timedelta(seconds=future_slack_s)
        return (
            Check(column, "is before 1970-01-01", col >= EARLIEST),
            # The reason names the setting, not the moment: loading the file again finds the same reason.
            Check(column, f"is later than now plus warehouse.future_slack_s ({future_slack_s:g} s)", col <= latest),
        )
    if dtype == pl.String:
        free = column in FREE_TEXT_COLUMNS
        limit = MAX_TEXT_CHARS if free else MAX_ID_CHARS
        return (
            Check(column, f"is longer than {limit:,} characters", col.str.len_chars() <= limit),
            Check(column, "contains a control character", ~col.str.contains(_TEXT_CONTROL if free else _ID_CONTROL)),
        )
    return ()
