"""docs/tuning.md's recipe, run as written: every verdict, and every pilot verdict, on simulated data.

Each `sh` block of the section "Every verdict on data you control" is run in order in one folder (later blocks
may read the warehouses of earlier ones); a `toml` block whose first line is `# file: NAME` is written there
first. Each block's `# expect:` text must appear in the output of its last command.
"""

from __future__ import annotations

import json
import re
import shlex
from pathlib import Path

import pytest

from preemptlens.analytics.whatif import scorecard
from preemptlens.cli import main
from preemptlens.warehouse import Warehouse

DOC = Path(__file__).resolve().parents[2] / "docs" / "tuning.md"
SECTION = "## 4. Every verdict on data you control (the recipe)"


def blocks() -> list[tuple[str, str]]:
    text = DOC.read_text()
    start = text.index(SECTION)
    end = text.index("\n## ", start + len(SECTION))
    return re.findall(r"```(sh|toml)\n(.*?)```", text[start:end], flags=re.DOTALL)


def test_recipe_gives_every_verdict(tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
                                    capsys: pytest.CaptureFixture[str]) -> None:
    monkeypatch.chdir(tmp_path)
    monkeypatch.delenv("PREEMPTLENS_CONFIG", raising=False)
    found = blocks()
    expected = []
    for kind, body in found:
        lines = body.strip().splitlines()
        if kind == "toml":
            name = lines[0].removeprefix("# file:").strip()
            (tmp_path / name).write_text("\n".join(lines[1:]) + "\n")
            continue
        expect = lines[0].removeprefix("# expect:").strip()
        commands = [shlex.split(line) for line in lines[1:]]
        out = ""
        for argv in commands:
            assert argv[0] == "preemptlens"
            assert main(argv[1:]) == 0, argv
            out = capsys.readouterr().out
        assert expect in out, (expect, out[-3000:])
        expected.append(expect)
    # the recipe covers the three verdicts the issue names and the three pilot verdicts, with the warning
    assert any("can be a main tool (4 yes" in e for e in expected)
    assert any(e.startswith("verdict: borderline") for e in expected)
    assert any("should not be the main tool" in e for e in expected)
    for verdict in ("WIDEN", "KEEP PILOTING", "ROLL BACK"):
        assert f"verdict: {verdict}" in expected
    check_fixes_are_suggests_ranking(tmp_path, capsys)


def ranked(path: Path) -> tuple[list[str], dict]:
    with Warehouse(path, read_only=True) as wh:
        kinds = wh.query("SELECT kind FROM suggestions ORDER BY rank")["kind"].to_list()
        (verdict,) = wh.query("SELECT * FROM readiness_verdict").to_dicts()
    return kinds, verdict


def check_fixes_are_suggests_ranking(folder: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """Where preemption does not pay, what the verdict says to fix first is suggest's ranking of the fixes of
    what failed (one list); where it pays, the verdict names nothing to fix and suggest does not advise
    against preemption."""
    for name in ("costs", "pays"):
        config = ["--config", "policy.toml"] if name == "pays" else []
        assert main([*config, "--warehouse", f"{name}.duckdb", "suggest"]) == 0
        printed = capsys.readouterr().out
        kinds, verdict = ranked(folder / f"{name}.duckdb")
        fixes = json.loads(verdict["fix_kinds"])
        assert verdict["fixes_ranked"]
        if name == "pays":
            assert verdict["verdict"] == scorecard.MAIN and not fixes and verdict["fix_first"] is None
            assert "not_yet" not in kinds
            continue
        assert verdict["verdict"] == scorecard.NOT_MAIN and fixes
        # suggest leads with its advice; its fixes of what failed, in its order, are the verdict's fix_first
        assert kinds[0] == "not_yet"
        with Warehouse(folder / f"{name}.duckdb", read_only=True) as wh:
            failures = scorecard.failures_of(wh, name)
        wanted = set(scorecard.addressed(failures))
        assert [k for k in dict.fromkeys(kinds) if k in wanted] == fixes, (kinds, fixes)
        # every failure has a fix of its own in suggest's list
        assert all(set(scorecard.FIXES[item]) & set(kinds) for item in failures)
        assert f"fix first: {verdict['fix_first']}" in printed
