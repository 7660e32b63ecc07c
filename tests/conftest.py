"""What every test shares.

The counterfactual replays each of its scenarios 1 + `tuning.jitter_replays` times (8 by default: the interval's
share for the replay's own sensitivity), so every `analyze` and `suggest` run through the configuration costs nine
replays a scenario. A test that reads no interval does not pay for them: configurations loaded in the suite
default to no jittered replays. The tests of the intervals ask for their draws explicitly (`draws=`, a
`TuningSettings` of their own), and the tests that start preemptlens as a user would (the wheel, the demo, the
launcher) strip every PREEMPTLENS_ variable, so the default path runs whole there.
"""

from __future__ import annotations

import os

import pytest

os.environ.setdefault("PREEMPTLENS_TUNING__JITTER_REPLAYS", "0")


def pytest_configure(config: pytest.Config) -> None:
    # Set by tests/slurm/conftest.py on every test that uses its real Slurm; tests/run.sh splits on it.
    config.addinivalue_line("markers", "real_slurm: runs on the real Slurm that tests/slurm/conftest.py starts")
