"""Files on a shared machine, tried by a second Unix user: the warehouse, its snapshot, the lake and the
reports are the service user's alone whatever umask it started with; a configuration file others can change
is refused, and others' access to the config, a `$file` secret or the warehouse's folder is warned about.
Needs root, to create the second user (tests run as root in CI)."""

from __future__ import annotations

import os
import pwd
import shutil
import stat
import subprocess
import sys
import tempfile
from collections.abc import Iterator
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
CASES = ROOT / "tests" / "cases" / "import"
OTHER = "plens-other"


@pytest.fixture(scope="module")
def other() -> str:
    if os.geteuid() != 0:
        pytest.skip("needs root to create a second user")
    try:
        pwd.getpwnam(OTHER)
    except KeyError:
        subprocess.run(["useradd", "--system", "--no-create-home", "--shell", "/usr/sbin/nologin", OTHER],
                       check=True, capture_output=True)
    return OTHER


@pytest.fixture
def shared() -> Iterator[Path]:
    """A folder every user may enter, as a home or a project folder on a login node is."""
    folder = Path(tempfile.mkdtemp(prefix="plens-shared-", dir="/tmp"))
    folder.chmod(0o755)
    try:
        yield folder
    finally:
        shutil.rmtree(folder, ignore_errors=True)


def preemptlens(*argv: str, cwd: Path, config: Path | None = None) -> subprocess.CompletedProcess[str]:
    # Temporary folders of its own, so that what it leaves there is told apart from other processes'.
    temp = cwd / "tmp"
    temp.mkdir(mode=0o700, exist_ok=True)
    env = {**os.environ, "PYTHONPATH": str(ROOT), "TMPDIR": str(temp)}
    env.pop("PREEMPTLENS_CONFIG", None)
    args = [sys.executable, "-m", "preemptlens.cli", *(["--config", str(config)] if config else []), *argv]

    def loose_umask() -> None:
        os.umask(0o022)  # what a login shell usually has

    return subprocess.run(args, cwd=cwd, env=env, capture_output=True, text=True, timeout=600,
                          preexec_fn=loose_umask)


def readable_by(user: str, path: Path) -> bool:
    """Whether `user` can read the file or list the folder (the system's own tools: this interpreter may live
    where that user cannot go)."""
    tool = ["/bin/ls", "-A"] if path.is_dir() else ["/bin/cat"]
    return subprocess.run([*tool, str(path)], user=user, group=pwd.getpwnam(user).pw_gid, extra_groups=[],
                          capture_output=True).returncode == 0


def test_what_preemptlens_writes_is_its_users_alone(other: str, shared: Path) -> None:
    config = shared / "preemptlens.toml"
    config.write_text('[warehouse]\npath = "w.duckdb"\n')
    config.chmod(0o600)
    steps = [
        ("import", str(CASES / "jobs.jsonl"), str(CASES / "job_runs.csv"), str(CASES / "checkpoints.jsonl")),
        ("analyze", "--quiet"),
        ("sql", "SELECT count(*) FROM jobs"),
        ("export", "parquet", "lake"),
        ("report", "--week", "2025-W10", "--out", "reports"),
    ]
    for step in steps:
        done = preemptlens(*step, cwd=shared, config=config)
        assert done.returncode == 0, (step, done.stderr)
    # A reader's spill folder (and a query's) is removed when its process ends: none is left behind.
    assert list((shared / "tmp").iterdir()) == []
    made = [shared / "w.duckdb", shared / "w.duckdb.snapshot", shared / "lake", shared / "reports",
            *(shared / "lake").rglob("*"), *(shared / "reports").iterdir()]
    assert any(p.suffix == ".parquet" for p in made) and any(p.suffix == ".md" for p in made)
    for path in made:
        mode = stat.S_IMODE(path.stat().st_mode)
        assert mode == (0o700 if path.is_dir() else 0o600), f"{path} is {oct(mode)}"
        assert not readable_by(other, path), f"{other} can read {path}"


def test_a_warehouse_made_by_an_older_version_is_narrowed(other: str, shared: Path) -> None:
    config = shared / "preemptlens.toml"
    config.write_text('[warehouse]\npath = "w.duckdb"\n')
    config.chmod(0o600)
    assert preemptlens("import", str(CASES / "jobs.jsonl"), cwd=shared, config=config).returncode == 0
    for name in ("w.duckdb", "w.duckdb.snapshot"):
        (shared / name).chmod(0o644)
    assert readable_by(other, shared / "w.duckdb")
    assert preemptlens("import", str(CASES / "jobs.jsonl"), cwd=shared, config=config).returncode == 0
    for name in ("w.duckdb", "w.duckdb.snapshot"):
        assert stat.S_IMODE((shared / name).stat().st_mode) == 0o600
        assert not readable_by(other, shared / name)


def test_a_config_file_others_can_change_is_refused(other: str, shared: Path) -> None:
    config = shared / "preemptlens.toml"
    # What a second user would write to run their own scripts as the service's user.
    config.write_text(f'[slurm]\nbin_dir = "{shared}"\n')
    for mode, what in ((0o666, "writable by every user"), (0o664, "writable by its group")):
        config.chmod(mode)
        done = preemptlens("sql", "--list", cwd=shared, config=config)
        assert done.returncode == 2 and what in done.stderr and "chmod 600" in done.stderr, done.stderr
        assert "Traceback" not in done.stderr
    config.chmod(0o600)
    os.chown(config, pwd.getpwnam(other).pw_uid, -1)
    done = preemptlens("sql", "--list", cwd=shared, config=config)
    assert done.returncode == 2 and "belongs to another user" in done.stderr, done.stderr
    os.chown(config, 0, -1)
    # A folder others can write lets them swap the file itself.
    loose = shared / "loose"
    loose.mkdir()
    loose.chmod(0o777)
    swapped = loose / "preemptlens.toml"
    shutil.copy(config, swapped)
    swapped.chmod(0o600)
    done = preemptlens("sql", "--list", cwd=shared, config=swapped)
    assert done.returncode == 2 and "in a folder others can write" in done.stderr, done.stderr


def test_exposed_config_secret_and_warehouse_folder_are_warned_about(other: str, shared: Path) -> None:
    secret = shared / "token"
    secret.write_text("t0ken-value\n")
    secret.chmod(0o644)
    config = shared / "preemptlens.toml"
    config.write_text(f'[warehouse]\npath = "w.duckdb"\n[prometheus]\nbearer_token = {{ "$file" = "{secret}" }}\n')
    config.chmod(0o644)
    done = preemptlens("sql", "--list", cwd=shared, config=config)
    assert done.returncode == 0, done.stderr
    assert f"config file {config} is readable by every user" in done.stderr
    assert f"secret file {secret} is readable by every user" in done.stderr
    assert f"the warehouse's folder {shared} is readable by every user" in done.stderr
    assert "t0ken-value" not in done.stderr + done.stdout
    config.chmod(0o600)
    secret.chmod(0o600)
    shared.chmod(0o711)
    done = preemptlens("sql", "--list", cwd=shared, config=config)
    assert done.returncode == 0 and "WARNING" not in done.stderr, done.stderr


def test_a_port_below_1024_is_one_no_other_user_can_take(other: str) -> None:
    """What docs/deploy.md relies on for the dashboard behind a proxy: while the service is down, another user
    cannot listen on its privileged port (and receive the proxy's requests), and can on an ordinary one."""
    probe = ("import socket, sys\ns = socket.socket()\ns.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)\n"
             "try:\n    s.bind(('127.0.0.1', int(sys.argv[1])))\nexcept PermissionError:\n    sys.exit(3)\n")
    system_python = "/usr/bin/python3"
    if not Path(system_python).exists():
        pytest.skip("no system python the second user can run")

    def bind_as_other(port: int) -> int:
        return subprocess.run([system_python, "-c", probe, str(port)], user=other, group=pwd.getpwnam(other).pw_gid,
                              extra_groups=[], capture_output=True).returncode

    from preemptlens.commands.dashboard import unprivileged_ports_from

    assert bind_as_other(unprivileged_ports_from() - 173) == 3
    assert bind_as_other(unprivileged_ports_from() + 47_000) == 0


def test_a_dashboard_behind_a_proxy_on_an_ordinary_port_is_warned_about(
    caplog: pytest.LogCaptureFixture, monkeypatch: pytest.MonkeyPatch
) -> None:
    from preemptlens.commands.dashboard import options
    from preemptlens.config import load_config

    monkeypatch.delenv("PREEMPTLENS_CONFIG", raising=False)
    config = load_config(overrides={"access.proxy_headers": True})
    options(config, 8501)
    assert "dashboard.port 8501: any user of this host can listen on it" in caplog.text
    caplog.clear()
    options(config, 851)
    assert "any user of this host" not in caplog.text
