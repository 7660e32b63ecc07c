"""No Python process preemptlens starts reads code from the folder it was started in (issue 33, item 5): a
`json.py` and a `preemptlens/` package planted in a shared start folder are imported by none of them, from
`sql`'s query fork server to the dashboard of `dashboard` and of `serve`; nor does the dashboard read a
`.streamlit/config.toml` planted there. preemptlens runs as the installed command does (a script outside the
start folder), so that only its children can fall for the plant."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import tempfile
import time
import urllib.error
import urllib.request
from collections.abc import Iterator
from pathlib import Path

import pytest

from preemptlens.children import environment, python
from tests.prometheus.conftest import free_port

ROOT = Path(__file__).resolve().parents[1]
# Written by whatever imports a planted module (which then lacks all the real one has).
PLANT = """import os, sys
with open(os.environ["PLANTED_LOG"], "a") as out:
    out.write(f"{os.getpid()} {sys.argv!r}\\n")
"""
COMMAND = "import sys\nfrom preemptlens.cli import main\nsys.exit(main())\n"


@pytest.fixture
def planted() -> Iterator[Path]:
    """A folder every user may write (a project folder, /tmp), holding what another user planted."""
    folder = Path(tempfile.mkdtemp(prefix="plens-start-", dir="/tmp"))
    folder.chmod(0o1777)
    (folder / "json.py").write_text(PLANT)
    (folder / "preemptlens").mkdir()
    (folder / "preemptlens" / "__init__.py").write_text(PLANT)
    (folder / ".streamlit").mkdir()
    # Were it read, the health check would move to /planted/_stcore/health.
    (folder / ".streamlit" / "config.toml").write_text('[server]\nbaseUrlPath = "planted"\n')
    try:
        yield folder
    finally:
        subprocess.run(["rm", "-rf", str(folder)], check=False)


@pytest.fixture
def own(tmp_path: Path) -> Path:
    """The service's own folder: the warehouse, the configuration, the `preemptlens` command."""
    (tmp_path / "preemptlens").write_text(COMMAND)
    return tmp_path


def env_for(own: Path) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith("PREEMPTLENS_") and k != "PYTHONSAFEPATH"}
    env.update(PYTHONPATH=str(ROOT), PLANTED_LOG=str(own / "planted.log"))
    return env


def preemptlens(own: Path, *argv: str) -> list[str]:
    return [sys.executable, str(own / "preemptlens"), "--warehouse", str(own / "w.duckdb"), *argv]


def health(port: int, process: subprocess.Popen[bytes], seconds: float = 120) -> int:
    """The dashboard's health check once it answers 200 (or what it last answered when the process ended or
    the deadline passed)."""
    deadline = time.monotonic() + seconds
    status = 0
    while time.monotonic() < deadline and process.poll() is None:
        try:
            with urllib.request.urlopen(f"http://127.0.0.1:{port}/_stcore/health", timeout=5) as answer:
                return int(answer.status)
        except urllib.error.HTTPError as exc:
            status = exc.code
        except OSError:
            pass
        time.sleep(0.3)
    return status


def stop(process: subprocess.Popen[bytes]) -> None:
    process.send_signal(signal.SIGTERM)
    try:
        process.wait(timeout=60)
    except subprocess.TimeoutExpired:
        process.kill()
        process.wait()


def test_the_plant_would_run_in_a_plain_python_started_there(planted: Path, own: Path) -> None:
    """The control: `python -c` and `python -m` started in that folder import it."""
    env = env_for(own)
    subprocess.run([sys.executable, "-c", "import json"], cwd=planted, env=env, check=True)
    subprocess.run([sys.executable, "-m", "json.tool", "--help"], cwd=planted, env=env, capture_output=True)
    assert len((own / "planted.log").read_text().splitlines()) == 2


def test_no_child_imports_code_from_the_start_folder(planted: Path, own: Path) -> None:
    env = env_for(own)
    done = subprocess.run(preemptlens(own, "migrate"), cwd=planted, env=env, capture_output=True, text=True)
    assert done.returncode == 0, done.stderr
    # The query runs in a child of the fork server, a `python -c`.
    done = subprocess.run(preemptlens(own, "sql", "SELECT 40 + 2 AS answer", "--format", "csv"),
                          cwd=planted, env=env, capture_output=True, text=True)
    assert done.returncode == 0 and "42" in done.stdout, done.stderr
    assert not (own / "planted.log").exists(), (own / "planted.log").read_text()

    port = free_port()
    with (own / "dashboard.log").open("wb") as log:
        dashboard = subprocess.Popen(preemptlens(own, "dashboard", "--port", str(port)), cwd=planted,
                                     env=env, stdout=log, stderr=subprocess.STDOUT)
    try:
        assert health(port, dashboard) == 200, (own / "dashboard.log").read_text()
    finally:
        stop(dashboard)

    port = free_port()
    config = own / "serve.toml"
    config.write_text(f'[serve]\njobs = ["alerts", "dashboard"]\nalerts_interval_s = 3600.0\n'
                      f"metrics_port = 0\n[dashboard]\nport = {port}\n")
    with (own / "serve.log").open("wb") as log:
        serve = subprocess.Popen([sys.executable, str(own / "preemptlens"), "--config", str(config), "--warehouse",
                                  str(own / "w.duckdb"), "serve"], cwd=planted, env=env, stdout=log,
                                 stderr=subprocess.STDOUT)
    try:
        assert health(port, serve) == 200, (own / "serve.log").read_text()
    finally:
        stop(serve)
    assert not (own / "planted.log").exists(), (own / "planted.log").read_text()


def test_a_child_finds_the_installed_package_without_pythonpath(planted: Path, own: Path) -> None:
    """As a site runs it (an installed or editable preemptlens, no PYTHONPATH): the child's command line and
    environment still find preemptlens, and not the planted one."""
    env = environment({**env_for(own), "PYTHONPATH": f":relative:{planted}/..:/nonexistent"})
    assert env["PYTHONSAFEPATH"] == "1" and env["PYTHONPATH"] == f"{planted}/..:/nonexistent"
    del env["PYTHONPATH"]
    found = subprocess.run(python("-c", "import preemptlens; print(preemptlens.__file__)"), cwd=planted, env=env,
                           capture_output=True, text=True)
    assert found.returncode == 0, found.stderr
    assert not found.stdout.startswith(str(planted)) and found.stdout.strip().endswith("preemptlens/__init__.py")
    assert not (own / "planted.log").exists()
