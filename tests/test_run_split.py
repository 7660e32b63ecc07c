"""tests/run.sh runs the suite as three pytest processes split by marker: between them they must run every
test exactly once, whatever its markers."""

from __future__ import annotations

import functools
import itertools
import re
from pathlib import Path

from _pytest.mark.expression import Expression

RUN = Path(__file__).resolve().parent / "run.sh"
MARKERS = ("hostile", "real_slurm")


def _marked(has: dict[str, bool], name: str, /, **_: object) -> bool:
    return has.get(name, False)


def test_the_processes_of_run_sh_select_every_test_exactly_once() -> None:
    # Each process's line starts with the command (the report headers only echo it).
    expressions = [m.group(1) or m.group(2) for m in
                   re.finditer(r'^python3 -m pytest -m (?:"([^"]+)"|(\S+))', RUN.read_text(), re.MULTILINE)]
    assert len(expressions) == 3, expressions
    for marked in itertools.product((False, True), repeat=len(MARKERS)):
        has = dict(zip(MARKERS, marked, strict=True))
        chosen = [e for e in expressions if Expression.compile(e).evaluate(functools.partial(_marked, has))]
        assert len(chosen) == 1, (has, chosen)
