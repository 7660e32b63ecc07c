"""Every log preset against its framework's own lines, version by version (tests/cases/checkpoints/log_*.json,
each naming the repository, path and tag or commit its lines come from): a save is a checkpoint only at the
framework's completion line, a restore is the step resumed from, a step line the steps completed."""

from __future__ import annotations

import json
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import pytest

from preemptlens.collectors.checkpoints.logs import PRESETS, LogReader, patterns

CASES = Path(__file__).resolve().parents[1] / "cases" / "checkpoints"
VERSIONS = [(p.stem, k) for p in sorted(CASES.glob("log_*.json"))
            for k in range(len(json.loads(p.read_text())["versions"]))]


def test_every_preset_has_a_case() -> None:
    assert {stem.removeprefix("log_") for stem, _ in VERSIONS} == set(PRESETS)


@pytest.mark.parametrize(("case", "k"), VERSIONS)
def test_preset_reads_each_versions_lines(case: str, k: int) -> None:
    spec = json.loads((CASES / f"{case}.json").read_text())
    version: dict[str, Any] = spec["versions"][k]
    # the source names a repository, a path in it and a tag or commit
    assert "/" in version["source"] and ".py" in version["source"] and any(ch.isdigit() for ch in version["source"])
    reader = LogReader(patterns([spec["preset"]], "", ""), UTC, 65536, 1 << 20)
    got = [[line.kind, line.step, datetime.fromtimestamp(line.time, UTC).replace(tzinfo=None).isoformat(),
            None if line.save_s is None else round(line.save_s, 3)]
           for line in reader.lines_of(version["lines"], case)]
    assert got == [[kind, float(step), at, save_s] for kind, step, at, save_s in version["expect"]]
