"""What users install: the built wheel in a fresh virtual environment outside the checkout. One import root
(`preemptlens`), every file the code opens shipped, and the demo, the report, the shipped Prometheus and
Grafana files and the dashboard all working from it."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import venv
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest
from browser import Chromium, Dashboard

ROOT = Path(__file__).resolve().parents[2]
# The folders that install as preemptlens.<name>; preemptlens/ links to each.
PACKAGE_DIRS = ("preemptlens", "collectors", "analytics", "dashboards", "sql")


@dataclass(frozen=True)
class Installed:
    venv: Path
    site: Path  # the venv's site-packages
    record: frozenset[str]  # paths the wheel installed, from its RECORD
    env: dict[str, str]  # no PYTHONPATH, no PREEMPTLENS_*: nothing points back at the checkout

    def run(self, *argv: str, cwd: Path, timeout: float = 300) -> subprocess.CompletedProcess[str]:
        return subprocess.run(argv, cwd=cwd, env=self.env, capture_output=True, text=True, timeout=timeout,
                              stdin=subprocess.DEVNULL, check=False)

    def bin(self, name: str) -> str:
        return str(self.venv / "bin" / name)


@pytest.fixture(scope="module")
def installed(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Installed]:
    work = tmp_path_factory.mktemp("wheel")
    # Built from a copy: setuptools never deletes from its build/ folder, so a file removed from the checkout
    # would still ship from a build/ left in place.
    source = work / "source"
    shutil.copytree(ROOT, source, symlinks=True, ignore=shutil.ignore_patterns(
        ".git", "build", "*.egg-info", "__pycache__", "*.duckdb*", ".*_cache", ".hypothesis", "reports"))
    dist = work / "dist"
    subprocess.run([sys.executable, "-m", "pip", "wheel", "--no-deps", "-q", "-w", str(dist), str(source)],
                   check=True, capture_output=True)
    (wheel,) = dist.glob("preemptlens-*.whl")
    target = work / "venv"
    venv.create(target, with_pip=True)
    env = {k: v for k, v in os.environ.items() if k != "PYTHONPATH" and not k.startswith("PREEMPTLENS_")}
    env["PATH"] = f"{target / 'bin'}{os.pathsep}{env.get('PATH', '')}"
    subprocess.run([str(target / "bin" / "pip"), "install", "-q", str(wheel)], check=True, capture_output=True,
                   env=env, cwd=work)
    (site,) = target.glob("lib/python3*/site-packages")
    (record_file,) = site.glob("preemptlens-*.dist-info/RECORD")
    record = frozenset(line.split(",")[0] for line in record_file.read_text().splitlines() if line)
    yield Installed(target, site, record, env)


def test_preemptlens_is_the_only_top_level_name(installed: Installed, tmp_path: Path) -> None:
    tops = {path.split("/")[0] for path in installed.record if not path.startswith("..")}
    assert {t for t in tops if not t.endswith(".dist-info")} == {"preemptlens"}
    for generic in ("collectors", "analytics", "dashboards", "sql"):
        probe = installed.run(installed.bin("python"), "-c", f"import {generic}", cwd=tmp_path)
        assert "ModuleNotFoundError" in probe.stderr, f"{generic} is importable from the wheel's environment"


def test_every_file_the_code_may_open_is_shipped(installed: Installed) -> None:
    """Every non-Python file under the package folders (SQL, templates, rules, dashboards) is in the wheel."""
    expected = set()
    for folder in PACKAGE_DIRS:
        for path in (ROOT / folder).rglob("*"):
            if path.is_file() and "__pycache__" not in path.parts and path.suffix != ".pyc":
                relative = path.relative_to(ROOT)
                inside = relative if folder == "preemptlens" else Path("preemptlens") / relative
                expected.add(inside.as_posix())
    missing = sorted(expected - installed.record)
    assert not missing, f"not in the wheel: {missing}"


@pytest.fixture(scope="module")
def demo(installed: Installed, tmp_path_factory: pytest.TempPathFactory) -> Path:
    folder = tmp_path_factory.mktemp("demo")
    done = installed.run(installed.bin("preemptlens"), "demo", "--no-dashboard", "--days", "7", "--gpus", "32",
                         cwd=folder, timeout=600)
    assert done.returncode == 0, done.stdout[-2000:] + done.stderr[-4000:]
    assert "does preemption pay on cluster demo?" in done.stdout and "== weekly report" in done.stdout
    return folder


def test_demo_and_report_run_from_the_wheel(demo: Path) -> None:
    reports = sorted(p.suffix for p in (demo / "reports").iterdir())
    assert reports == [".html", ".md"]
    html = next((demo / "reports").glob("*.html")).read_text()
    assert "<html" in html and "Readiness" in html


def test_shipped_prometheus_rules_and_grafana_dashboard(installed: Installed, tmp_path: Path) -> None:
    shipped = installed.site / "preemptlens" / "dashboards"
    grafana = json.loads((shipped / "grafana" / "preemptlens.json").read_text())
    assert grafana["panels"]
    promtool = shutil.which("promtool")
    if promtool is None:
        pytest.skip("promtool is not installed (tests/run.sh installs Debian's prometheus)")
    rules = shipped / "prometheus"
    checked = subprocess.run([promtool, "check", "rules", "preemptlens-rules.yml"], cwd=rules,
                             capture_output=True, text=True, check=False)
    assert checked.returncode == 0, checked.stdout + checked.stderr
    tested = subprocess.run([promtool, "test", "rules", "preemptlens-rules.test.yml"], cwd=rules,
                            capture_output=True, text=True, check=False)
    assert tested.returncode == 0, tested.stdout + tested.stderr


def test_dashboard_serves_from_the_wheel(installed: Installed, demo: Path, tmp_path: Path) -> None:
    dashboard = Dashboard(demo / "preemptlens.duckdb", tmp_path / "streamlit.log",
                          program=(installed.bin("preemptlens"),), env=installed.env)
    with dashboard, Chromium() as browser:
        for path, title in (("", "Preemption overview"), ("preemptions", "Preemptions")):
            browser.navigate(f"{dashboard.url}/{path}")
            state, seconds = browser.wait_rendered(timeout_s=120)
            assert state.exceptions == 0 and not state.errors, state.errors
            assert state.rendered, f"{path or 'overview'} did not render in {seconds:.1f} s"
            assert state.title == title
