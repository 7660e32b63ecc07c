"""Files on a shared machine, tried by a second Unix user: the warehouse, its snapshot, the lake and the
reports are the service user's alone whatever umask it started with; a configuration file, a `$file` secret,
`slurm.bin_dir`, a report folder or a lake others can change is refused, and others' reading the config, a
secret or the warehouse's folder is warned about. Names planted in a shared folder (symlinks, FIFOs) are never
written through or waited on, and a forged lake manifest removes nothing outside the lake. Needs root, to create
the second user (tests run as root in CI)."""

from __future__ import annotations

import json
import os
import pwd
import shutil
import stat
import subprocess
import sys
import tempfile
import time
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
    assert done.returncode == 2 and f"{loose} is writable by every user" in done.stderr, done.stderr


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


# -- paths in shared places (issue 33, class 4) ---------------------------------------------------------------


def run_as_service(*argv: str, cwd: Path, config: Path, timeout: float = 300) -> subprocess.CompletedProcess[str]:
    """preemptlens's command line with a deadline of its own: a command that hangs (on a FIFO) fails the test."""
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    env.pop("PREEMPTLENS_CONFIG", None)
    return subprocess.run([sys.executable, "-m", "preemptlens.cli", "--config", str(config), *argv], cwd=cwd,
                          env=env, capture_output=True, text=True, timeout=timeout)


def owned_by(path: Path, user: str) -> None:
    entry = pwd.getpwnam(user)
    os.lchown(path, entry.pw_uid, entry.pw_gid)


def imported(shared: Path) -> Path:
    config = shared / "preemptlens.toml"
    config.write_text('[warehouse]\npath = "w.duckdb"\n')
    config.chmod(0o600)
    done = run_as_service("import", str(CASES / "jobs.jsonl"), str(CASES / "job_runs.csv"), cwd=shared,
                          config=config)
    assert done.returncode == 0, done.stderr
    return config


def test_a_report_is_never_written_through_a_planted_name_nor_into_a_folder_others_can_write(
    other: str, shared: Path
) -> None:
    config = imported(shared)
    assert run_as_service("analyze", "--quiet", cwd=shared, config=config).returncode == 0
    victim = shared / "root-owned.conf"  # what a planted link would have the service overwrite
    victim.write_text("precious\n")
    loot = shared / "loot"  # where a planted link would have every team's figures written
    loot.write_text("")
    loot.chmod(0o666)
    owned_by(loot, other)

    def plant(folder: Path) -> None:
        for suffix, target in ((".md", loot), (".html", victim)):
            link = folder / f".preemptlens-2025-W10{suffix}.tmp"
            link.symlink_to(target)
            owned_by(link, other)

    def untouched() -> None:
        assert victim.read_text() == "precious\n" and loot.read_text() == ""

    theirs = shared / "theirs"
    theirs.mkdir()
    owned_by(theirs, other)
    cases = [(0o777, shared / "open", "is writable by every user"),
             (0o1777, shared / "sticky", "is writable by every user"),
             (0o770, shared / "group", "is writable by its group"),
             (0o700, theirs / "reports", "belongs to another user")]
    for mode, folder, said in cases:
        folder.mkdir()
        folder.chmod(mode)
        plant(folder)
        done = run_as_service("report", "--week", "2025-W10", "--out", str(folder), cwd=shared, config=config)
        assert done.returncode != 0 and said in done.stderr and "report folder" in done.stderr, done.stderr
        assert "Traceback" not in done.stderr
        untouched()
        assert not [p for p in folder.iterdir() if not p.is_symlink()], f"{folder}: something was written"

    # The service's own folder, with names planted before it was closed and an interrupted run's temporary file.
    own = shared / "reports"
    own.mkdir(mode=0o700)
    plant(own)
    leftover = own / f".preemptlens-2025-W10.md.{'0' * 32}.tmp"
    leftover.write_text("half a report")
    hour_ago = time.time() - 3600
    os.utime(leftover, (hour_ago, hour_ago))
    in_hand = own / f".preemptlens-2025-W11.md.{'1' * 32}.tmp"  # another run's, being written now
    in_hand.write_text("being written")
    done = run_as_service("report", "--week", "2025-W10", "--out", str(own), cwd=shared, config=config)
    assert done.returncode == 0, done.stderr
    untouched()
    assert not leftover.exists() and in_hand.exists()
    in_hand.unlink()
    for suffix in (".md", ".html"):
        info = os.lstat(own / f"preemptlens-2025-W10{suffix}")
        assert stat.S_ISREG(info.st_mode) and stat.S_IMODE(info.st_mode) == 0o600 and info.st_uid == os.geteuid()
    assert sorted(p.name for p in own.iterdir() if p.name.endswith(".tmp")) == [
        ".preemptlens-2025-W10.html.tmp", ".preemptlens-2025-W10.md.tmp"], "only the planted links are left"


def test_a_forged_lake_manifest_a_fifo_lock_and_leftovers_never_reach_outside_the_lake(
    other: str, shared: Path
) -> None:
    config = imported(shared)
    lake = shared / "lake"
    assert run_as_service("export", "parquet", str(lake), cwd=shared, config=config).returncode == 0
    # Files outside the lake that a forged manifest names, one through a symlink planted inside it.
    outside = shared / "outside"
    (outside / "date=2026-11-02").mkdir(parents=True)
    precious = [outside / "data.parquet", outside / "date=2026-11-02" / "data.parquet"]
    for path in precious:
        path.write_text("precious")
    (lake / "jobs" / "cluster=evil").symlink_to(outside)
    manifest_path = lake / "_lake.json"
    manifest = json.loads(manifest_path.read_text())
    forged = ["../../outside/data.parquet", "cluster=c1/../../../outside/data.parquet",
              "cluster=evil/date=2026-11-02/data.parquet", "/" + str(outside / "data.parquet")]
    for relpath in forged:
        manifest["tables"]["jobs"]["partitions"][relpath] = "forged"
    manifest_path.write_text(json.dumps(manifest))
    # An interrupted export's temporary files, as this version and the one before named them.
    first = min(p for p in manifest["tables"]["jobs"]["partitions"] if p.startswith("cluster=c1/date"))
    partition = lake / "jobs" / first
    leftovers = [partition.with_name(f".data.parquet.{'1' * 32}.tmp"),
                 partition.with_name(f"data.parquet.{'2' * 32}.tmp"),
                 lake / f"_lake.json.{'3' * 32}.tmp", lake / f"._lake.json.{'4' * 32}.tmp"]
    for path in leftovers:
        path.write_text("half")

    done = run_as_service("export", "parquet", str(lake), cwd=shared, config=config)
    assert done.returncode == 0, done.stderr
    assert all(p.read_text() == "precious" for p in precious), "export removed a file outside the lake"
    assert done.stderr.count("is not a partition's path; left alone") == 3, done.stderr
    assert "partition cluster=evil/date=2026-11-02/data.parquet of" in done.stderr
    assert "not removed: a symlink or a file where a folder should be" in done.stderr
    assert not [p for p in leftovers if p.exists()]

    # A table's name that leads out of the lake is not a manifest's: refused, nothing removed.
    manifest = json.loads(manifest_path.read_text())
    manifest["tables"]["../outside"] = manifest["tables"]["jobs"]
    manifest_path.write_text(json.dumps(manifest))
    done = run_as_service("export", "parquet", str(lake), cwd=shared, config=config)
    assert done.returncode != 0 and "is not a table's name" in done.stderr and "Traceback" not in done.stderr
    del manifest["tables"]["../outside"]
    manifest_path.write_text(json.dumps(manifest))

    # The lock: a FIFO (another user's, or even the service's own), a symlink, another user's file: refused at
    # once, never waited on.
    lock = lake / ".lake.lock"
    elsewhere = shared / "elsewhere.lock"
    elsewhere.write_text("")
    for make, owner in ((lambda: os.mkfifo(lock), other), (lambda: os.mkfifo(lock), "root"),
                        (lambda: lock.symlink_to(elsewhere), "root"), (lambda: lock.write_text(""), other)):
        lock.unlink(missing_ok=True)
        make()
        owned_by(lock, owner)
        began = time.monotonic()
        done = run_as_service("export", "parquet", str(lake), cwd=shared, config=config, timeout=120)
        assert done.returncode != 0 and f"lock file {lock}" in done.stderr, done.stderr
        assert "Traceback" not in done.stderr and time.monotonic() - began < 60
    lock.unlink()
    assert run_as_service("export", "parquet", str(lake), cwd=shared, config=config).returncode == 0

    # A lake others can write (and so forge its manifest or plant its lock) is not exported into.
    lake.chmod(0o777)
    done = run_as_service("export", "parquet", str(lake), cwd=shared, config=config)
    assert done.returncode != 0 and "is writable by every user" in done.stderr, done.stderr
    lake.chmod(0o700)


def test_a_warehouse_in_a_folder_others_can_write_is_refused(other: str, shared: Path) -> None:
    loot = shared / "loot"
    loot.write_text("")
    owned_by(loot, other)
    for mode in (0o777, 0o1777):
        folder = shared / f"open-{mode:o}"
        folder.mkdir()
        folder.chmod(mode)
        # What another user would plant: the name DuckDB gives the warehouse's write-ahead log.
        (folder / "w.duckdb.wal").symlink_to(loot)
        config = shared / "preemptlens.toml"
        config.write_text(f'[warehouse]\npath = "{folder / "w.duckdb"}"\n')
        config.chmod(0o600)
        done = run_as_service("import", str(CASES / "jobs.jsonl"), cwd=shared, config=config)
        assert done.returncode != 0 and f"the warehouse's folder {folder}" in done.stderr, done.stderr
        assert "is writable by every user" in done.stderr and "Traceback" not in done.stderr
        assert loot.read_text() == "" and not (folder / "w.duckdb").exists()


def test_slurm_programs_another_user_can_change_are_never_run(
    other: str, shared: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from datetime import UTC, datetime

    from preemptlens.collectors.slurm import Options, SlurmCollector
    from preemptlens.collectors.slurm.actions import QosEffectorOptions, SlurmQosEffector
    from preemptlens.errors import SourceError

    ran = shared / "ran"

    def bin_dir(folder: Path, mode: int = 0o755) -> Path:
        folder.mkdir(parents=True)
        script = folder / "scontrol"
        script.write_text(f"#!/bin/sh\necho scontrol >> {ran}\n")
        script.chmod(0o755)
        folder.chmod(mode)
        return folder

    def collector(folder: Path | str) -> SlurmCollector:
        return SlurmCollector(Options(cluster="c", bin_dir=str(folder), timeout_s=10,
                                      since=datetime(2026, 11, 1, tzinfo=UTC), until=datetime(2026, 11, 2, tzinfo=UTC)))

    theirs = bin_dir(shared / "theirs")
    owned_by(theirs, other)
    foreign_tool = bin_dir(shared / "foreign-tool")
    owned_by(foreign_tool / "scontrol", other)
    writable_tool = bin_dir(shared / "writable-tool")
    (writable_tool / "scontrol").chmod(0o777)
    above = shared / "home-of-other"
    above.mkdir()
    owned_by(above, other)
    cases = [(theirs, "belongs to another user"), (bin_dir(shared / "open", 0o777), "is writable by every user"),
             (bin_dir(shared / "sticky", 0o1777), "is writable by every user"),
             (bin_dir(shared / "group", 0o775), "is writable by its group"),
             (foreign_tool, "belongs to another user"), (writable_tool, "is writable by every user"),
             (bin_dir(above / "bin"), f"{above} belongs to another user")]
    for folder, said in cases:
        with pytest.raises(SourceError, match="refusing to run") as err:
            collector(folder)._run(["scontrol", "show", "config"])
        assert said in err.value.message, err.value.message
        effector = SlurmQosEffector(QosEffectorOptions("protected", str(folder), "", 10.0, "normal"))
        with pytest.raises(SourceError, match="refusing to run"):
            effector.command(["scontrol", "show", "config"], "reading ClusterName")
    assert not ran.exists(), "a program another user could change was run"
    # Found on $PATH rather than in bin_dir: the same check.
    monkeypatch.setenv("PATH", f"{shared / 'open'}:{os.environ['PATH']}")
    with pytest.raises(SourceError, match="refusing to run"):
        collector("")._run(["scontrol", "show", "config"])
    assert not ran.exists()
    # The service's own folder: run.
    own = bin_dir(shared / "own")
    collector(own)._run(["scontrol", "show", "config"])
    assert ran.read_text() == "scontrol\n"
    # The slurm.conf they read names the plugins they load as root: the same check.
    conf = shared / "open" / "slurm.conf"
    conf.write_text("ClusterName=c\n")
    for named in (str(conf), ""):
        monkeypatch.setenv("SLURM_CONF", str(conf))
        slurm = SlurmCollector(Options(cluster="c", bin_dir=str(own), slurm_conf=named, timeout_s=10))
        with pytest.raises(SourceError, match=f"refusing SLURM_CONF {conf}: {shared / 'open'} is writable"):
            slurm._run(["scontrol", "show", "config"])
        effector = SlurmQosEffector(QosEffectorOptions("protected", str(own), named, 10.0, "normal"))
        with pytest.raises(SourceError, match="refusing SLURM_CONF"):
            effector.command(["scontrol", "show", "config"], "reading ClusterName")
    assert ran.read_text() == "scontrol\n"


def test_a_secret_file_another_user_can_change_is_refused(other: str, shared: Path) -> None:
    from preemptlens.config import load_config
    from preemptlens.errors import ConfigError

    def config_naming(secret: Path) -> Path:
        config = shared / "preemptlens.toml"
        config.write_text(f'[prometheus]\nbearer_token = {{ "$file" = "{secret}" }}\n')
        config.chmod(0o600)
        return config

    def secret_in(folder: Path, mode: int = 0o600) -> Path:
        folder.mkdir(exist_ok=True)
        secret = folder / "token"
        secret.write_text("t0ken-value\n")
        secret.chmod(mode)
        return secret

    theirs = secret_in(shared / "theirs")
    owned_by(theirs, other)
    loose = shared / "loose"
    loose.mkdir()
    loose.chmod(0o777)
    above = shared / "home-of-other"
    above.mkdir()
    owned_by(above, other)
    cases = [(theirs, "belongs to another user"), (secret_in(shared / "g", 0o660), "is writable by its group"),
             (secret_in(shared / "o", 0o606), "is writable by every user"),
             (secret_in(loose), f"{loose} is writable by every user"),
             (secret_in(above / "s"), f"{above} belongs to another user")]
    link = shared / "link-to-theirs"
    link.symlink_to(theirs)
    cases.append((link, "belongs to another user"))
    for secret, said in cases:
        with pytest.raises(ConfigError) as err:
            load_config(str(config_naming(secret)))
        assert f"secret file {secret} is not the service's own" in err.value.message and said in err.value.message
        assert "t0ken-value" not in str(err.value)
    sticky = shared / "sticky"
    sticky.mkdir()
    sticky.chmod(0o1777)
    config = load_config(str(config_naming(secret_in(sticky))))
    from preemptlens.collectors.prometheus import PrometheusSettings

    token = config.of(PrometheusSettings).bearer_token
    assert token is not None and token.reveal() == "t0ken-value"


def test_a_kubeconfig_or_ca_bundle_another_user_can_change_is_refused(other: str, shared: Path) -> None:
    """A kubeconfig runs the programs its exec plugins name, as the collector's user: one another user owns
    (or can write) is refused before it is read, and so is a CA bundle that decides whom the collector trusts."""
    theirs = shared / "kubeconfig"
    theirs.write_text("apiVersion: v1\nkind: Config\nusers:\n- name: u\n  user:\n    exec:\n"
                      "      apiVersion: client.authentication.k8s.io/v1\n      command: /bin/true\n")
    theirs.chmod(0o600)
    owned_by(theirs, other)
    config = shared / "preemptlens.toml"
    config.write_text('[cluster]\nname = "c"\n')
    config.chmod(0o600)
    done = preemptlens("collect", "kubernetes", "--kubeconfig", str(theirs), cwd=shared, config=config)
    assert done.returncode != 0
    assert "kubernetes.kubeconfig" in done.stderr and "belongs to another user" in done.stderr, done.stderr
    assert "Traceback" not in done.stderr
    ca = shared / "ca.pem"
    ca.write_text("not a certificate\n")
    ca.chmod(0o666)
    config.write_text(f'[cluster]\nname = "c"\n[kubernetes]\napi_url = "https://127.0.0.1:1"\nca_file = "{ca}"\n')
    done = preemptlens("collect", "kubernetes", cwd=shared, config=config)
    assert done.returncode != 0 and "kubernetes.ca_file" in done.stderr, done.stderr
    assert "Traceback" not in done.stderr
    config.write_text(f'[cluster]\nname = "c"\n[prometheus]\nurl = "https://127.0.0.1:1"\nca_file = "{ca}"\n')
    done = preemptlens("collect", "prometheus", cwd=shared, config=config)
    assert done.returncode != 0 and "prometheus.ca_file" in done.stderr, done.stderr
    assert "Traceback" not in done.stderr
