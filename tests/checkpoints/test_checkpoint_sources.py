"""The checkpoint collector's files and logs streams on real trees, from recorded listings and hostile input.

Frameworks that cannot run here (Megatron, DeepSpeed, Orbax, NeMo, Hugging Face, Keras) are read from
recorded listings (tests/cases/checkpoints/*.json, each naming the framework code that defines the names
and order of its files), laid out on disk with their modification times: the walker reads a real
directory tree, as on a cluster's storage. Hostile trees and logs check that nothing is read outside the
roots, that symlinks are never followed, that a 10 GB line costs one bounded buffer, that a step going
back within a run is quarantined with both steps named, and that the rest loads.
"""

from __future__ import annotations

import json
import os
import pwd
import resource
import shutil
import subprocess
import tempfile
from collections.abc import Callable, Iterator
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import polars as pl
import pytest

from preemptlens.collectors.checkpoints import CheckpointCollector
from preemptlens.collectors.checkpoints.files import Cursor, Walker, root_of
from preemptlens.collectors.checkpoints.jobs import Runs
from preemptlens.collectors.checkpoints.logs import LogReader, patterns
from preemptlens.config import Config
from preemptlens.warehouse import Warehouse

CASES = Path(__file__).resolve().parents[1] / "cases" / "checkpoints"
BASE = 1_790_000_000.0  # the recorded listings' times are offsets from here
CLUSTER = "c1"
ME = pwd.getpwuid(os.getuid()).pw_name


def _runs(jobs: dict[str, tuple[float, float | None]], folder: Path | None = None,
          stdout: dict[str, str] | None = None, user: str | None = None) -> tuple[pl.DataFrame, pl.DataFrame]:
    """Recorded runs as Warehouse.recorded_runs gives them: one run per job over (start, end), of `user` (this
    process's own by default: a job's log is read only when its user owns it)."""
    user = user or ME
    rows = []
    for job, (start, end) in jobs.items():
        rows.append({
            "cluster": CLUSTER, "job_id": job, "run": 1,
            "start_time": datetime.fromtimestamp(start, UTC),
            "end_time": None if end is None else datetime.fromtimestamp(end, UTC),
            "user_name": user, "team": "vision", "name": f"name-{job}",
            "work_dir": str(folder / job) if folder else None,
            "stdout_path": (stdout or {}).get(job), "stderr_path": None, "source": "slurm",
        })
    runs = pl.DataFrame(rows, schema={
        "cluster": pl.String, "job_id": pl.String, "run": pl.Int32, "start_time": pl.Datetime("us", "UTC"),
        "end_time": pl.Datetime("us", "UTC"), "user_name": pl.String, "team": pl.String, "name": pl.String,
        "work_dir": pl.String, "stdout_path": pl.String, "stderr_path": pl.String, "source": pl.String})
    return runs, pl.DataFrame(schema={"cluster": pl.String, "label": pl.String, "job_id": pl.String})


def _lay_out(root: Path, listing: list[list[Any]]) -> None:
    dirs: dict[Path, float] = {}
    for path, kind, offset, *content in listing:
        target = root / path
        target.parent.mkdir(parents=True, exist_ok=True)
        if kind == "f":
            target.write_text(content[0] if content else "x")
            os.utime(target, (BASE + offset, BASE + offset))
        for parent in [target.parent, *target.parent.parents]:
            if parent == root.parent:
                break
            dirs[parent] = max(dirs.get(parent, 0.0), BASE + offset)
    for folder, t in dirs.items():
        os.utime(folder, (t, t))


def _collect(wh: Warehouse, settings: dict[str, Any], runs: tuple[pl.DataFrame, pl.DataFrame],
             streams: list[str]) -> list[Any]:
    collector = CheckpointCollector(Config(values={"checkpoints": settings}), CLUSTER, streams)
    collector.use_runs(*runs)
    return [wh.load_batch(b) for b in collector.batches(wh.watermarks(collector.name))]


@pytest.fixture
def wh(tmp_path: Path) -> Iterator[Warehouse]:
    with Warehouse(tmp_path / "w.duckdb") as w:
        yield w


@pytest.mark.parametrize("case", sorted(p.stem for p in CASES.glob("*.json") if not p.stem.startswith("log_")))
def test_recorded_layouts(case: str, tmp_path: Path, wh: Warehouse) -> None:
    spec = json.loads((CASES / f"{case}.json").read_text())
    assert spec["source"]
    job_dir = tmp_path / "scratch" / ME / "j1"
    _lay_out(job_dir, spec["listing"])
    settings = {"roots": [{"path": str(tmp_path / "scratch" / "{user}" / "{job_id}")}], "layouts": spec["layouts"],
                "keras_filepaths": spec.get("keras_filepaths", [])}
    _collect(wh, settings, _runs({"j1": (BASE - 100, BASE + 5000)}), ["files"])
    rows = wh.query("SELECT step, epoch(time) - $b AS time, save_s, origin, run FROM checkpoints ORDER BY time",
                    {"b": BASE}).to_dicts()
    got = [{"step": r["step"], "time": round(r["time"], 3), "save_s": None if r["save_s"] is None else
            round(r["save_s"], 3), "origin": r["origin"]} for r in rows]
    assert got == [{**e, "step": float(e["step"])} for e in spec["expect"]]
    assert {r["run"] for r in rows} == {1}


def test_a_save_completed_later_is_found_by_the_next_pass_and_nothing_twice(tmp_path: Path, wh: Warehouse) -> None:
    spec = json.loads((CASES / "hf_trainer.json").read_text())
    job_dir = tmp_path / "scratch" / ME / "j1"
    _lay_out(job_dir, spec["listing"])
    settings = {"roots": [{"path": str(tmp_path / "scratch" / "{user}" / "{job_id}")}]}
    runs = _runs({"j1": (BASE - 100, None)})
    _collect(wh, settings, runs, ["files"])
    assert wh.query("SELECT count(*) AS n FROM checkpoints")["n"][0] == 2
    # checkpoint-1500's trainer_state.json lands: its directory changes, its parent does not.
    state = job_dir / "checkpoint-1500" / "trainer_state.json"
    state.write_text("{}")
    os.utime(state, (BASE + 1503.0, BASE + 1503.0))
    reports = _collect(wh, settings, runs, ["files"])
    assert sum(r.loaded for r in reports) == 1
    assert wh.query("SELECT max(step) AS s FROM checkpoints")["s"][0] == 1500.0
    assert sum(r.loaded for r in _collect(wh, settings, runs, ["files"])) == 0


def test_work_dir_rule_gives_a_shared_directory_to_the_job_then_running(tmp_path: Path, wh: Warehouse) -> None:
    shared = tmp_path / "lustre" / "proj"
    _lay_out(shared / "out", [["step-10/.metadata", "f", 10.0], ["step-10/__0_0.distcp", "f", 9.0],
                              ["step-90/.metadata", "f", 90.0], ["step-50/.metadata", "f", 50.0]])
    runs = _runs({"early": (BASE, BASE + 40), "late": (BASE + 45, BASE + 100)})
    frame = runs[0].with_columns(pl.lit(str(shared)).alias("work_dir"))
    _collect(wh, {"roots": [{"path": str(tmp_path / "lustre" / "*" / "out"), "job": "work_dir"}]},
             (frame, runs[1]), ["files"])
    got = wh.query("SELECT job_id, step, origin FROM checkpoints ORDER BY step").rows()
    assert got == [("early", 10.0, "files:dcp"), ("late", 50.0, "files:dcp"), ("late", 90.0, "files:dcp")]


# -- hostile -------------------------------------------------------------------------------------------------


def test_symlinks_are_never_followed_and_nothing_outside_the_roots_is_read(tmp_path: Path, wh: Warehouse) -> None:
    outside = tmp_path / "outside"
    _lay_out(outside, [["checkpoint-5/trainer_state.json", "f", 5.0]])
    scratch = tmp_path / "scratch" / ME
    _lay_out(scratch / "j1", [["checkpoint-7/trainer_state.json", "f", 7.0]])
    (scratch / "j1" / "escape").symlink_to(outside)  # a symlink out of the root
    (scratch / "j1" / "loop").symlink_to(scratch / "j1")  # a loop
    (scratch / "j1" / "a").symlink_to(scratch / "j1" / "b")
    (scratch / "j1" / "b").symlink_to(scratch / "j1" / "a")
    (scratch / "j2").symlink_to(outside)  # a job directory that is itself a way out
    settings = {"roots": [{"path": str(tmp_path / "scratch" / "{user}" / "{job_id}")}]}
    _collect(wh, settings, _runs({"j1": (BASE, None), "j2": (BASE, None)}), ["files"])
    assert wh.query("SELECT job_id, step FROM checkpoints").rows() == [("j1", 7.0)]
    quarantined = dict(wh.query("SELECT record, reason FROM quarantine").rows())
    for name in ("escape", "loop", "a", "b"):
        assert "symlink" in quarantined[str(scratch / "j1" / name)]
    assert "not followed" in quarantined[str(scratch / "j2")] or "leaves" in quarantined[str(scratch / "j2")]


def test_a_path_template_value_cannot_climb_out(tmp_path: Path, wh: Warehouse) -> None:
    _lay_out(tmp_path / "scratch" / "secret", [["checkpoint-1/trainer_state.json", "f", 1.0]])
    runs = _runs({"..": (BASE, None)})
    _collect(wh, {"roots": [{"path": str(tmp_path / "scratch" / ME / "{job_id}")}]}, runs, ["files"])
    assert wh.query("SELECT count(*) AS n FROM checkpoints")["n"][0] == 0


def _as_nobody(read: Callable[[], Any]) -> Any:
    """What `read` returns when a child process that dropped root for `nobody` runs it, as a collector run by an
    unprivileged user would see the tree (root reads everything). The child touches no polars (its thread pool
    does not survive a fork): `read` walks and reads in plain Python and returns JSON-ready values."""
    if os.geteuid() != 0:
        pytest.skip("needs root to drop to an unprivileged user")
    read_end, write_end = os.pipe()
    pid = os.fork()
    if pid == 0:  # the child: no return from here
        code = 0
        try:
            os.close(read_end)
            os.setgroups([])
            os.setresgid(65534, 65534, 65534)
            os.setresuid(65534, 65534, 65534)
            os.write(write_end, json.dumps(read()).encode())
        except BaseException:  # noqa: BLE001 -- the child reports by its exit status
            code = 1
        finally:
            os._exit(code)
    os.close(write_end)
    with os.fdopen(read_end, "rb") as pipe:
        data = pipe.read()
    _, status = os.waitpid(pid, 0)
    assert status == 0
    return json.loads(data)


def test_unreadable_directories_and_logs_are_named_and_the_rest_loads() -> None:
    top = Path(tempfile.mkdtemp(prefix="ckpt-unreadable-"))
    try:
        scratch = top / "scratch"
        _lay_out(scratch / "j1", [["checkpoint-3/trainer_state.json", "f", 3.0],
                                  ["private/checkpoint-4/trainer_state.json", "f", 4.0]])
        log = scratch / "j1" / "train.log"
        log.write_text("2026-09-21 12:00:01,000 x successfully saved checkpoint from iteration 3 to /c\n")
        locked = scratch / "j1" / "locked.log"
        locked.write_text("2026-09-21 12:00:02,000 x successfully saved checkpoint from iteration 9 to /c\n")
        for p in [top, *top.rglob("*")]:
            p.chmod(0o755 if p.is_dir() else 0o644)
        (scratch / "j1" / "private").chmod(0o700)
        locked.chmod(0o600)
        runs = Runs.from_frames(*_runs({"j1": (BASE, None)}))
        walker = Walker([root_of({"path": str(scratch / "{job_id}")})], ["hf_trainer"], [], 4, 1000)
        reader = LogReader(patterns(["megatron"], "", ""), UTC, 65536, 1 << 20)

        def read() -> dict[str, Any]:
            scan, _ = walker.scan(CLUSTER, runs, Cursor())
            logs = [reader.read(str(p), None)[0] for p in (log, locked)]
            return {"files": [r.step for r in scan.rows], "files_rejects": [[r.record, r.reason] for r in scan.rejects],
                    "logs": [line.step for got in logs for line in got.lines],
                    "logs_rejects": [[r.record, r.reason] for got in logs for r in got.rejects]}

        seen = _as_nobody(read)
        assert seen["files"] == [3.0]
        assert [r for r in seen["files_rejects"] if "Permission denied" in r[1]] == [
            [str(scratch / "j1" / "private"), "cannot be listed: Permission denied"]]
        assert seen["logs"] == [3.0]
        assert seen["logs_rejects"] == [[str(locked), "cannot be read: Permission denied"]]
    finally:
        shutil.rmtree(top, ignore_errors=True)


def test_a_10_gb_log_line_is_skipped_in_one_bounded_buffer(tmp_path: Path, wh: Warehouse) -> None:
    log = tmp_path / "logs" / "slurm-j1.out"
    log.parent.mkdir()
    head = b"2026-09-21 12:00:01,000 x successfully saved checkpoint from iteration 3 to /c\n"
    tail = b"\n2026-09-21 12:05:00,000 x successfully saved checkpoint from iteration 4 to /c\n"
    with log.open("wb") as f:
        f.write(head)
        f.seek(len(head) + 10 * 2**30)  # a sparse 10 GB line of NUL bytes, no newline in it
        f.write(tail)
    runs = _runs({"j1": (datetime(2026, 9, 21, 11, tzinfo=UTC).timestamp(), None)}, stdout={"j1": str(log)})
    settings = {"log_roots": [str(tmp_path / "logs")], "max_read_bytes": 64 << 20}
    before = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    _collect(wh, settings, runs, ["logs"])
    grown_mib = (resource.getrusage(resource.RUSAGE_SELF).ru_maxrss - before) / 1024
    assert grown_mib < 256, grown_mib
    assert wh.query("SELECT step FROM checkpoints").rows() == [(3.0,)]
    reasons = wh.query("SELECT record, reason FROM quarantine").rows()
    assert any("max_line_bytes" in reason and record.startswith(str(log)) for record, reason in reasons)
    # The next pass goes on from the cursor: still inside the line, it keeps nothing and reads no further than allowed.
    report = _collect(wh, settings, runs, ["logs"])
    assert sum(r.loaded for r in report) == 0


def test_the_line_after_an_overlong_one_loads(tmp_path: Path, wh: Warehouse) -> None:
    log = tmp_path / "logs" / "slurm-j1.out"
    log.parent.mkdir()
    with log.open("wb") as f:
        f.write(b"2026-09-21 12:00:01,000 x successfully saved checkpoint from iteration 3 to /c\n")
        f.write(b"x" * (100 << 20))  # 100 MB without a newline: longer than max_line_bytes and than one pass
        f.write(b"\n2026-09-21 12:05:00,000 x successfully saved checkpoint from iteration 4 to /c\n")
    runs = _runs({"j1": (datetime(2026, 9, 21, 11, tzinfo=UTC).timestamp(), None)}, stdout={"j1": str(log)})
    settings = {"log_roots": [str(tmp_path / "logs")], "max_read_bytes": 40 << 20}
    for _ in range(4):  # 40 MB a pass: the line's end is found on the third
        _collect(wh, settings, runs, ["logs"])
    assert wh.query("SELECT step FROM checkpoints ORDER BY step").rows() == [(3.0,), (4.0,)]


def test_a_log_read_in_pieces_truncated_and_replaced(tmp_path: Path, wh: Warehouse) -> None:
    log = tmp_path / "logs" / "out.log"
    log.parent.mkdir()
    log.write_text("2026-09-21 12:00:01,000 x successfully saved checkpoint from iteration 1 to /c\n2026-09-21 12:00:0")
    runs = _runs({"j1": (datetime(2026, 9, 21, 11, tzinfo=UTC).timestamp(), None)}, stdout={"j1": str(log)})
    settings = {"log_roots": [str(tmp_path / "logs")]}
    _collect(wh, settings, runs, ["logs"])
    with log.open("a") as f:  # the half-written line is finished
        f.write("2,000 x successfully saved checkpoint from iteration 2 to /c\n")
    _collect(wh, settings, runs, ["logs"])
    assert wh.query("SELECT step FROM checkpoints ORDER BY step").rows() == [(1.0,), (2.0,)]
    # truncated, rewritten
    log.write_text("2026-09-21 13:00:00,000 x successfully saved checkpoint from iteration 3 to /c\n")
    _collect(wh, settings, runs, ["logs"])
    log.unlink()
    line4 = "2026-09-21 14:00:00,000 x successfully saved checkpoint from iteration 4 to /c\n"
    # replaced
    log.write_text(line4 + "2026-09-21 14:10:00,000 x successfully saved checkpoint from iteration 5 to /c\n")
    _collect(wh, settings, runs, ["logs"])
    # Rewritten from its start with the same first line and grown past the old offset (a requeued job's log
    # opens with the same warnings): the old offset falls inside another line, which is not where to go on.
    line7 = "2026-09-21 16:00:00,000 x successfully saved checkpoint from iteration 7 to /c"
    log.write_text(line4 + line7 + " " * 80 + "\n")
    _collect(wh, settings, runs, ["logs"])
    steps = [r[0] for r in wh.query("SELECT step FROM checkpoints ORDER BY step").rows()]
    assert steps == [1.0, 2.0, 3.0, 4.0, 5.0, 7.0]


def test_a_step_going_back_without_a_restart_is_quarantined(tmp_path: Path, wh: Warehouse) -> None:
    log = tmp_path / "logs" / "out.log"
    log.parent.mkdir()
    log.write_text("".join(f"2026-09-21 12:00:{s:02d},000 iteration {n:8d}/    1000 |\n"
                           for s, n in ((1, 10), (2, 20), (3, 15), (4, 30))))
    runs = _runs({"j1": (datetime(2026, 9, 21, 11, tzinfo=UTC).timestamp(), None)}, stdout={"j1": str(log)})
    _collect(wh, {"log_roots": [str(tmp_path / "logs")], "log_presets": ["megatron"]}, runs, ["logs"])
    assert [r[0] for r in wh.query("SELECT step FROM checkpoints ORDER BY time").rows()] == [10.0, 20.0, 30.0]
    ((record, reason),) = wh.query("SELECT record, reason FROM quarantine").rows()
    assert record.startswith(str(log)) and "from 20 to 15 within run 1" in reason
    # A later pass continues from the job's last step: going back again is caught across passes too.
    with log.open("a") as f:
        f.write("2026-09-21 12:00:05,000 iteration       25/    1000 |\n")
    _collect(wh, {"log_roots": [str(tmp_path / "logs")], "log_presets": ["megatron"]}, runs, ["logs"])
    assert wh.query("SELECT count(*) AS n FROM quarantine")["n"][0] == 2


def test_a_log_outside_the_log_roots_is_never_read(tmp_path: Path, wh: Warehouse) -> None:
    secret = tmp_path / "home" / "out.log"
    secret.parent.mkdir()
    secret.write_text("2026-09-21 12:00:01,000 x successfully saved checkpoint from iteration 1 to /c\n")
    (tmp_path / "logs").mkdir()
    link = tmp_path / "logs" / "link.log"
    link.symlink_to(secret)
    runs = _runs({"j1": (datetime(2026, 9, 21, 11, tzinfo=UTC).timestamp(), None), "j2": (BASE, None)},
                 stdout={"j1": str(secret), "j2": str(link)})
    _collect(wh, {"log_roots": [str(tmp_path / "logs")]}, runs, ["logs"])
    assert wh.query("SELECT count(*) AS n FROM checkpoints")["n"][0] == 0
    assert "symlink" in dict(wh.query("SELECT record, reason FROM quarantine").rows())[str(link)]


@pytest.fixture
def two_users() -> Iterator[tuple[str, str]]:
    """Two real Unix users of this host (a tenant and another team's member), removed afterwards."""
    if os.geteuid() != 0:
        pytest.skip("creating Unix users needs root")
    names = [f"plt{os.getpid() % 100000}{k}" for k in ("a", "b")]
    for name in names:
        subprocess.run(["useradd", "--no-create-home", "--shell", "/usr/sbin/nologin", name], check=True,
                       capture_output=True)
    try:
        yield names[0], names[1]
    finally:
        for name in names:
            subprocess.run(["userdel", name], check=False, capture_output=True)


def test_a_job_reads_only_its_own_users_log(tmp_path: Path, wh: Warehouse, two_users: tuple[str, str]) -> None:
    """The collector runs as root: a tenant's job naming another user's 0600 file as its output loads nothing from
    it (the file is not its user's), while that user's own job, naming the same file, is read."""
    tenant, other = two_users
    logs = tmp_path / "logs"
    logs.mkdir()
    logs.chmod(0o755)
    private = logs / "other.out"
    private.write_text("2026-09-21 12:00:01,000 x successfully saved checkpoint from iteration 7 to /c\n")
    private.chmod(0o600)
    os.chown(private, pwd.getpwnam(other).pw_uid, -1)
    start = datetime(2026, 9, 21, 11, tzinfo=UTC).timestamp()
    settings = {"log_roots": [str(logs)]}
    _collect(wh, settings, _runs({"t1": (start, None)}, stdout={"t1": str(private)}, user=tenant), ["logs"])
    assert wh.query("SELECT count(*) AS n FROM checkpoints")["n"][0] == 0
    [(record, field, reason)] = wh.query("SELECT record, field, reason FROM quarantine").rows()
    assert (record, field) == (str(private), "owner")
    assert f"not to the job's user (uid {pwd.getpwnam(tenant).pw_uid})" in reason
    # A job whose user is unknown on this host is not read either: whose file it is cannot be told.
    _collect(wh, settings, _runs({"t2": (start, None)}, stdout={"t2": str(private)}, user="no-such-user-x"), ["logs"])
    assert wh.query("SELECT count(*) AS n FROM checkpoints")["n"][0] == 0
    # The owner's own job reads it.
    _collect(wh, settings, _runs({"o1": (start, None)}, stdout={"o1": str(private)}, user=other), ["logs"])
    assert wh.query("SELECT job_id, step FROM checkpoints").rows() == [("o1", 7.0)]


def test_a_working_directory_of_another_user_is_not_walked(tmp_path: Path, wh: Warehouse,
                                                            two_users: tuple[str, str]) -> None:
    """Stream files with the work_dir rule: a tenant records another user's directory as its working directory;
    its checkpoints are not loaded under the tenant's job, while the owner's own job finds them."""
    tenant, other = two_users
    runs_dir = tmp_path / "lustre" / "runs"
    _lay_out(runs_dir / "theirs", [["checkpoint-5/trainer_state.json", "f", 5.0]])
    for p in [runs_dir / "theirs", *(runs_dir / "theirs").rglob("*")]:
        os.chown(p, pwd.getpwnam(other).pw_uid, -1)
    settings = {"roots": [{"path": str(runs_dir / "*"), "job": "work_dir"}], "layouts": ["hf_trainer"]}

    def job(user: str) -> tuple[pl.DataFrame, pl.DataFrame]:
        runs, labels = _runs({"j1": (BASE - 100, BASE + 5000)}, user=user)
        return runs.with_columns(pl.lit(str(runs_dir / "theirs")).alias("work_dir")), labels

    _collect(wh, settings, job(tenant), ["files"])
    assert wh.query("SELECT count(*) AS n FROM checkpoints")["n"][0] == 0
    [(record, field, reason)] = wh.query("SELECT record, field, reason FROM quarantine").rows()
    assert (record, field) == (str(runs_dir / "theirs"), "owner") and "not to the user of job j1" in reason
    with Warehouse(tmp_path / "owner.duckdb") as mine:
        _collect(mine, settings, job(other), ["files"])
        assert mine.query("SELECT step FROM checkpoints").rows() == [(5.0,)]


def test_reads_that_cut_lines_give_every_line_once(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """A read ends inside a line at every chunk size: the cut line is read whole by the next read (one longer
    than a read but within max_line_bytes in one wider read), an overlong one is skipped and named, and a line
    not ended yet waits for the next pass."""
    import preemptlens.collectors.checkpoints.logs as logs

    def line(step: int, pad: int) -> bytes:
        return (f"[2026-09-21 12:00:{step % 60:02d}.000000] " + "p" * pad + f" iteration {step}/ 1000 |\n").encode()

    pads = [0, 7, 70, 300, 0, 1500, 3, 0, 9000, 40]  # 9000: longer than max_line_bytes (4,096)
    log = tmp_path / "train.log"
    log.write_bytes(b"".join(line(step, pad) for step, pad in enumerate(pads, 1)) + b"[2026-09-21 12:01:00] iterat")
    expected = [float(step) for step, pad in enumerate(pads, 1) if pad < 4000]
    for chunk in (64, 100, 257, 1 << 20):
        monkeypatch.setattr(logs, "_CHUNK", chunk)
        reader = LogReader(patterns(["megatron"], "", ""), UTC, 4096, 1 << 20)
        read, cursor = reader.read(str(log), None)
        assert [x.step for x in read.lines] == expected, chunk
        assert [r.field for r in read.rejects] == ["line"], chunk
        assert cursor is not None and cursor.offset == log.stat().st_size - len(b"[2026-09-21 12:01:00] iterat")
        with log.open("ab") as f:
            f.write(b"ion 11/ 1000 |\n")
        read, _ = reader.read(str(log), cursor)
        assert [x.step for x in read.lines] == [11.0], chunk
        log.write_bytes(log.read_bytes()[: -len(b"ion 11/ 1000 |\n")])
