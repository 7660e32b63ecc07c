"""The load API: idempotent upserts, quarantine, watermarks, migrations."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from pathlib import Path

import duckdb
import polars as pl
import pytest

from preemptlens.contract import Batch, Reject, Watermark
from preemptlens.errors import ContractError, SchemaError
from preemptlens.warehouse import Warehouse, migrations

T0 = datetime(2026, 11, 2, 8, 0, tzinfo=UTC)


def jobs_frame(n: int = 5) -> pl.DataFrame:
    return pl.DataFrame(
        {
            "cluster": ["c1"] * n,
            "job_id": [str(i) for i in range(n)],
            "tier": ["low", "high", "normal", "critical", "low"][:n],
            "preemptible": [True, False, True, False, True][:n],
            "gpus": [8, 4, 1, 64, 2][:n],
            "submit_time": [T0 + timedelta(minutes=i) for i in range(n)],
            "team": ["vision", "nlp", "vision", "infer", "rl"][:n],
        }
    )


def samples_frame(gpus: int, minutes: int, start: datetime = T0) -> pl.DataFrame:
    rows = gpus * minutes
    return pl.DataFrame(
        {
            "cluster": ["c1"] * rows,
            "host": [f"node{g // 8}" for g in range(gpus) for _ in range(minutes)],
            "gpu_uuid": [f"GPU-{g:04d}" for g in range(gpus) for _ in range(minutes)],
            "gpu_index": [g % 8 for g in range(gpus) for _ in range(minutes)],
            "time": [start + timedelta(minutes=m) for _ in range(gpus) for m in range(minutes)],
            "busy": [((g * 7 + m) % 10) / 10 for g in range(gpus) for m in range(minutes)],
        }
    )


def table(wh: Warehouse, name: str, order: str) -> pl.DataFrame:
    return wh.query(f"SELECT * FROM {name} ORDER BY {order}")


@pytest.fixture
def wh(tmp_path: Path) -> Warehouse:
    return Warehouse(tmp_path / "w.duckdb")


def test_loading_twice_changes_nothing(wh: Warehouse) -> None:
    first = wh.load("jobs", jobs_frame(), "test")
    assert (first.loaded, first.unchanged, first.quarantined) == (5, 0, 0)
    before = table(wh, "jobs", "job_id")
    second = wh.load("jobs", jobs_frame(), "test")
    assert (second.loaded, second.unchanged, second.quarantined) == (0, 5, 0)
    assert table(wh, "jobs", "job_id").equals(before)


def test_samples_merge_on_key_without_index(wh: Warehouse) -> None:
    wh.load("gpu_samples", samples_frame(16, 30), "test")
    # An overlapping window (minutes 20..49) is what an incremental re-read sends.
    overlap = samples_frame(16, 30, T0 + timedelta(minutes=20))
    report = wh.load("gpu_samples", overlap, "test")
    assert report.unchanged == 16 * 10
    assert report.loaded == 16 * 20
    counts = wh.query("SELECT count(*) AS n, count(DISTINCT (gpu_uuid, time)) AS distinct_keys FROM gpu_samples")
    assert counts["n"][0] == counts["distinct_keys"][0] == 16 * 50


def test_changed_record_replaces_row(wh: Warehouse) -> None:
    runs = pl.DataFrame(
        {
            "cluster": ["c1"],
            "job_id": ["7"],
            "run": [1],
            "gpus": [4],
            "start_time": [T0],
            "state": ["running"],
        }
    )
    wh.load("job_runs", runs, "test")
    ended = runs.with_columns(pl.lit("preempted").alias("state"), pl.lit(T0 + timedelta(hours=1)).alias("end_time"))
    report = wh.load("job_runs", ended, "test")
    assert report.loaded == 1
    got = table(wh, "job_runs", "job_id")
    assert got.height == 1
    assert got["state"][0] == "preempted"
    assert got["end_time"][0] == T0 + timedelta(hours=1)


def test_bad_rows_are_quarantined_with_field_and_reason(wh: Warehouse) -> None:
    frame = pl.DataFrame(
        {
            "cluster": ["c1", "c1", "c1", "c1"],
            "job_id": ["ok", "badtier", "badgpus", "notime"],
            "tier": ["low", "urgent", "low", "low"],
            "preemptible": ["true", "false", "yes", "no"],
            "gpus": ["8", "4", "four", "1"],
            "submit_time": ["2026-11-02T08:00:00Z", "2026-11-02 08:00:00", "1793606400", None],
        }
    )
    report = wh.load("jobs", frame, "unit")
    assert (report.loaded, report.quarantined) == (1, 3)
    q = table(wh, "quarantine", "record")
    reasons = {r: (f, why) for r, f, why in q.select("record", "field", "reason").iter_rows()}
    assert reasons["cluster=c1 job_id=badtier"][0] == "tier"
    assert "urgent" in reasons["cluster=c1 job_id=badtier"][1]
    assert reasons["cluster=c1 job_id=badgpus"][0] == "gpus"
    assert "INTEGER" in reasons["cluster=c1 job_id=badgpus"][1]
    assert reasons["cluster=c1 job_id=notime"] == ("submit_time", "submit_time is required")
    assert set(q["source"]) == {"unit"}
    # The same bad records again: nothing new in quarantine, nothing loaded twice.
    wh.load("jobs", frame, "unit")
    assert table(wh, "quarantine", "record").drop("_load_id").equals(q.drop("_load_id"))
    assert wh.query("SELECT count(*) AS n FROM jobs")["n"][0] == 1


def test_times_are_normalised_to_utc(wh: Warehouse) -> None:
    frame = jobs_frame(3).with_columns(
        pl.Series("submit_time", ["2026-11-02T10:00:00+02:00", "2026-11-02T08:00:00", "1793606400"])
    )
    wh.load("jobs", frame, "test")
    times = table(wh, "jobs", "job_id")["submit_time"].to_list()
    assert times == [T0, T0, T0]


def test_unknown_column_is_a_contract_error(wh: Warehouse) -> None:
    with pytest.raises(ContractError, match="colour"):
        wh.load("jobs", jobs_frame().with_columns(pl.lit("red").alias("colour")), "test")
    with pytest.raises(ContractError, match="no raw table"):
        wh.load("nope", jobs_frame(), "test")


def test_watermark_lands_with_its_data_or_not_at_all(wh: Warehouse) -> None:
    mark = Watermark("prom", "c1", "busy", "2026-11-02T09:00:00Z")
    wh.load_batch(Batch(source="prom", frames={"gpu_samples": samples_frame(2, 5)}, watermarks=[mark]))
    assert wh.watermarks("prom") == {("c1", "busy"): "2026-11-02T09:00:00Z"}

    # A batch that fails half-way (its second table's write fails inside the
    # transaction) leaves neither its first table's rows nor its cursor behind.
    later = Watermark("prom", "c1", "busy", "2026-11-02T10:00:00Z")
    pools = pl.DataFrame({"cluster": ["c1"], "pool": ["p"], "valid_from": [T0], "gpus": [8]})
    frames = {"gpu_samples": samples_frame(2, 5, T0 + timedelta(hours=1)), "pools": pools}
    original_merge = wh._merge

    def failing_merge(table_name: str, *args: object) -> tuple[int, int]:
        if table_name == "pools":
            raise RuntimeError("disk full")
        return original_merge(table_name, *args)  # type: ignore[arg-type]

    wh._merge = failing_merge  # type: ignore[method-assign]
    with pytest.raises(RuntimeError):
        wh.load_batch(Batch(source="prom", frames=frames, watermarks=[later]))
    wh._merge = original_merge  # type: ignore[method-assign]
    assert wh.watermarks("prom") == {("c1", "busy"): "2026-11-02T09:00:00Z"}
    assert wh.query("SELECT count(*) AS n FROM gpu_samples")["n"][0] == 10


def test_collector_rejects_go_to_quarantine(wh: Warehouse) -> None:
    reject = Reject("job_runs", "JobId=12", "state", "unknown state 'WEIRD'", raw='{"state": "WEIRD"}')
    report = wh.load_batch(Batch(source="slurm:c1", frames={"jobs": jobs_frame(2)}, rejects=[reject]))
    assert report.tables["job_runs"].quarantined == 1
    q = table(wh, "quarantine", "record")
    assert q.select("source", "target_table", "record", "field").row(0) == ("slurm:c1", "job_runs", "JobId=12", "state")


def test_loads_ledger_counts(wh: Warehouse) -> None:
    wh.load("jobs", jobs_frame(), "test")
    wh.load("jobs", jobs_frame(), "test")
    ledger = table(wh, "_loads", "started_at")
    assert ledger.select("loaded", "unchanged").rows() == [(5, 0), (0, 5)]
    # Unchanged rows keep the load id of the load that wrote them.
    assert set(table(wh, "jobs", "job_id")["_load_id"]) == {ledger["load_id"][0]}


def test_migrations_upgrade_an_older_warehouse(tmp_path: Path) -> None:
    path = tmp_path / "old.duckdb"
    con = duckdb.connect(str(path))
    con.execute(
        "CREATE TABLE _schema_version (version INTEGER PRIMARY KEY, name VARCHAR NOT NULL, "
        "applied_at TIMESTAMPTZ NOT NULL)"
    )
    first_version, first_file = migrations()[0]
    con.execute(first_file.read_text())
    con.execute("INSERT INTO _schema_version VALUES (1, $n, now())", {"n": first_file.name})
    con.execute(
        "INSERT INTO jobs (cluster, job_id, tier, preemptible, gpus, submit_time, source, _load_id) "
        "VALUES ('c1', '1', 'low', true, 4, now(), 'old', 'l0')"
    )
    con.close()
    wh = Warehouse(path)
    assert wh.schema_version() == len(migrations())
    assert wh.query("SELECT count(*) AS n FROM jobs")["n"][0] == 1
    assert wh.query("SELECT count(*) AS n FROM sim_truth_preemptions")["n"][0] == 0
    assert first_version == 1


def test_newer_warehouse_is_refused(tmp_path: Path) -> None:
    path = tmp_path / "new.duckdb"
    Warehouse(path).close()
    con = duckdb.connect(str(path))
    con.execute("INSERT INTO _schema_version VALUES (999, '0999_future.sql', now())")
    con.close()
    with pytest.raises(SchemaError, match="newer than this preemptlens knows"):
        Warehouse(path)
    with pytest.raises(SchemaError, match="newer"):
        Warehouse(path, read_only=True)


def test_read_only_open_of_missing_file_says_what_to_do(tmp_path: Path) -> None:
    with pytest.raises(SchemaError, match="demo"):
        Warehouse(tmp_path / "absent.duckdb", read_only=True)


def test_sticky_columns_survive_a_less_complete_reload(wh: Warehouse) -> None:
    full = pl.DataFrame(
        {"cluster": ["c1"], "job_id": ["9"], "run": [2], "gpus": [8], "start_time": [T0], "state": ["running"]}
    )
    wh.load("job_runs", full, "k8s")
    # The source later sees the run end but no longer knows when it started.
    later = full.with_columns(
        pl.lit(None, dtype=pl.Datetime("us", "UTC")).alias("start_time"),
        pl.lit("preempted").alias("state"),
        pl.lit(T0 + timedelta(hours=2)).alias("end_time"),
    )
    assert wh.load("job_runs", later, "k8s").loaded == 1
    row = table(wh, "job_runs", "job_id").row(0, named=True)
    assert (row["start_time"], row["state"], row["end_time"]) == (T0, "preempted", T0 + timedelta(hours=2))
    assert wh.load("job_runs", later, "k8s").unchanged == 1


def _stored(wh: Warehouse, name: str, order: str) -> pl.DataFrame:
    return table(wh, name, order).drop("_load_id")


def test_rows_with_new_keys_are_stored_as_the_merge_stores_them(tmp_path: Path) -> None:
    """A batch whose keys are all new is inserted without the merge's join;
    the rows, the source and the counts are what the merge gives."""
    runs = pl.DataFrame(
        {
            "cluster": ["c1"] * 3,
            "job_id": ["1", "2", "3"],
            "run": [1, 1, 2],
            "gpus": [4, 8, 1],
            "start_time": [T0, None, T0],
            "end_time": [T0 + timedelta(hours=1), None, None],
            "state": ["preempted", "pending", "running"],
        }
    )
    fresh = Warehouse(tmp_path / "fresh.duckdb")
    report = fresh.load("job_runs", runs, "slurm")
    assert (report.loaded, report.unchanged, report.quarantined) == (3, 0, 0)
    # The same rows through the merge: one key already stored, with other values.
    merged = Warehouse(tmp_path / "merged.duckdb")
    merged.load("job_runs", runs.head(1).with_columns(pl.lit(2).alias("gpus")), "slurm")
    report = merged.load("job_runs", runs, "slurm")
    assert (report.loaded, report.unchanged, report.quarantined) == (3, 0, 0)
    assert _stored(fresh, "job_runs", "job_id").equals(_stored(merged, "job_runs", "job_id"))
    assert set(_stored(fresh, "job_runs", "job_id")["source"]) == {"slurm"}
    load_id = fresh.query("SELECT load_id FROM _loads")["load_id"].to_list()
    assert table(fresh, "job_runs", "job_id")["_load_id"].to_list() == load_id * 3


def test_a_batch_mixing_new_and_stored_keys_still_dedupes(wh: Warehouse) -> None:
    wh.load("jobs", jobs_frame(3), "test")
    report = wh.load("jobs", jobs_frame(5), "test")
    assert (report.loaded, report.unchanged) == (2, 3)
    assert table(wh, "jobs", "job_id")["job_id"].to_list() == ["0", "1", "2", "3", "4"]
    # A key twice in one batch of new keys: the last record wins, as in the merge.
    last = jobs_frame(5).tail(1).with_columns(pl.lit("9").alias("job_id"))
    report = wh.load("jobs", pl.concat([last, last.with_columns(pl.col("gpus") + 1)]), "test")
    assert (report.loaded, report.unchanged) == (1, 0)
    assert wh.query("SELECT gpus FROM jobs WHERE job_id = '9'")["gpus"].to_list() == [3]


def test_samples_of_a_new_window_are_inserted_once(wh: Warehouse) -> None:
    wh.load("gpu_samples", samples_frame(4, 10), "test")
    # Later samples of the same GPUs: the stored rows share no key with them.
    report = wh.load("gpu_samples", samples_frame(4, 10, T0 + timedelta(minutes=10)), "test")
    assert (report.loaded, report.unchanged) == (40, 0)
    assert wh.load("gpu_samples", samples_frame(4, 20), "test").unchanged == 80
    assert wh.query("SELECT count(*) AS n FROM gpu_samples")["n"][0] == 80


def test_a_key_twice_in_a_sorted_batch_or_in_any_order_keeps_the_last_record(wh: Warehouse) -> None:
    """A batch sorted by its key skips the dedupe only when no key repeats: a repeated key, adjacent in a
    sorted batch or anywhere in another, still leaves the last record."""
    frame = samples_frame(2, 3)  # sorted by GPU, then time
    again = frame.slice(2, 1).with_columns(pl.lit(0.99).alias("busy"))
    sorted_twice = pl.concat([frame.head(3), again, frame.tail(frame.height - 3)])
    assert wh.load("gpu_samples", sorted_twice, "test").loaded == frame.height
    unsorted_twice = pl.concat([frame.tail(frame.height - 3), frame.head(3), again.with_columns(pl.lit(0.5).alias(
        "busy"))])
    assert wh.load("gpu_samples", unsorted_twice, "test").loaded == 1  # the one changed record
    stored = wh.query("SELECT busy FROM gpu_samples WHERE gpu_uuid = $g AND time = $t",
                      {"g": again["gpu_uuid"].item(), "t": again["time"].item()})
    assert stored["busy"].to_list() == [0.5]
    # A sorted batch with no key twice loads whole and stores every row once.
    later = samples_frame(2, 3, T0 + timedelta(hours=1))
    assert wh.load("gpu_samples", later, "test").loaded == later.height
    assert wh.query("SELECT count(*) FROM gpu_samples").item() == 2 * frame.height
