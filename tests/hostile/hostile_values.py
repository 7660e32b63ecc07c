"""Hostile values by column type, shared by the property tests of every importer and parser."""

from __future__ import annotations

import copy
import os

from hypothesis import HealthCheck, settings
from hypothesis import strategies as st

# 10,000 examples per test (the `hostile` marker; tests/run.sh runs them). No deadline: a 2-core
# machine shared with other work stalls now and then, and a slow example is not a failure here.
# PREEMPTLENS_HOSTILE_EXAMPLES lowers the count while a failure is being chased. The examples are the
# same on every run (derandomized): the test command gates every submission, and a new random draw that
# finds an old bug would fail a change that has nothing to do with it. PREEMPTLENS_HOSTILE_RANDOM=1 draws
# new examples, to go looking for more.
HOSTILE = settings(
    max_examples=int(os.environ.get("PREEMPTLENS_HOSTILE_EXAMPLES", "10000")),
    derandomize=os.environ.get("PREEMPTLENS_HOSTILE_RANDOM") != "1",
    deadline=None,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large, HealthCheck.filter_too_much],
)

NASTY_TEXT = [
    "", " ", "\t", "nan", "NaN", "-nan", "inf", "-Infinity", "+Inf", "1e20", "-1e20", "1e400", "9" * 30, "0", "-0",
    "0x10", "1_000", "2999-01-01T00:00:00Z", "1969-12-31", "0001-01-01", "9999-12-31T23:59:59", "2026-13-45",
    "2026-11-02T08:00:00+99:00", "true", "yes", "null", "\x00", "a\x00b", "\x1b[31m", "\u202e", "\ufeff", "x" * 300,
    "y" * 9_000, "\ud800", "\U0001f600", "<!channel>", "'; DROP TABLE jobs; --", "\n", "\r\n", "a|b|c", "²",
    "١٢٣", "JobId=1", "[", "{", "\\", '"',
]
EPOCHS = [0, -1, 1, 1e20, -1e20, 2**63, -(2**63) - 1, 2**64, 253_402_300_800, 32_503_680_000, 1_793_606_400,
          1_793_606_400.5, 10**30]

text = st.one_of(st.sampled_from(NASTY_TEXT), st.text(max_size=24))
numbers = st.one_of(
    st.floats(allow_nan=True, allow_infinity=True),
    st.integers(min_value=-(10**40), max_value=10**40),
    st.sampled_from(EPOCHS),
)
times = st.one_of(
    numbers,
    st.sampled_from(NASTY_TEXT),
    st.datetimes().map(lambda d: d.isoformat()),
    st.floats(min_value=-1e12, max_value=1e12).map(repr),
)
booleans = st.one_of(st.booleans(), st.sampled_from(["true", "f", "Yes", "2", "", "nan", 1, 0, 2, None]))
any_json = st.recursive(
    st.one_of(st.none(), st.booleans(), numbers, text),
    lambda inner: st.one_of(st.lists(inner, max_size=3), st.dictionaries(text, inner, max_size=3)),
    max_leaves=6,
)

BY_TYPE = {
    "VARCHAR": text,
    "INTEGER": st.one_of(numbers, text),
    "BIGINT": st.one_of(numbers, text),
    "DOUBLE": st.one_of(numbers, text),
    "TIMESTAMP WITH TIME ZONE": times,
    "BOOLEAN": booleans,
}


def value_for(sql_type: str) -> st.SearchStrategy[object]:
    """A hostile value for a column of this type; now and then a value of any JSON type at all."""
    return st.one_of(BY_TYPE[sql_type], BY_TYPE[sql_type], BY_TYPE[sql_type], any_json)


def _paths(obj: object, prefix: tuple[object, ...] = ()) -> list[tuple[object, ...]]:
    found = [prefix] if prefix else []
    if isinstance(obj, dict):
        for key, value in obj.items():
            found += _paths(value, (*prefix, key))
    elif isinstance(obj, list):
        for i, value in enumerate(obj):
            found += _paths(value, (*prefix, i))
    return found


@st.composite
def mutated(draw: st.DrawFn, base: object, most: int = 4) -> object:
    """A deep copy of a recorded payload with up to `most` members replaced by hostile values (of the
    member's own kind most of the time, of any JSON kind otherwise) or removed."""
    obj = copy.deepcopy(base)
    paths = _paths(obj)
    for path in draw(st.lists(st.sampled_from(paths), max_size=most, unique=True)) if paths else []:
        parent: object = obj
        try:
            for step in path[:-1]:
                parent = parent[step]  # type: ignore[index]
            old = parent[path[-1]]  # type: ignore[index]
        except (KeyError, IndexError, TypeError):
            continue  # an earlier replacement took this member's parent away
        if not isinstance(parent, dict | list):
            continue  # ... or made it a string, which indexes but cannot be assigned to
        if isinstance(parent, dict) and draw(st.integers(0, 9)) == 0:
            del parent[path[-1]]
            continue
        kind = (text if isinstance(old, str) else numbers if isinstance(old, int | float) and not isinstance(old, bool)
                else any_json)
        parent[path[-1]] = draw(st.one_of(kind, kind, any_json))  # type: ignore[index]
    return obj
