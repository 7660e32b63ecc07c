"""A real Slurm for the tests in this folder, started once per session.

Skipped with the reason when not root (the daemons run as root and munge
must own the default socket) or when the Slurm packages are missing
(tests/run.sh installs them).
"""

from __future__ import annotations

import os
import shutil
import sys
import tempfile
from collections.abc import Iterator
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parent))

from slurm_harness import SlurmCluster, tools_missing


class _OneCluster:
    """The session's only Slurm, started on first use in the mode asked for.

    A module that asks for the other mode restarts slurmctld and slurmd in it
    (SlurmCluster.use); pytest_collection_modifyitems runs the qos-mode
    modules last, so a whole run switches at most once."""

    def __init__(self) -> None:
        self.cluster: SlurmCluster | None = None

    def get(self, preempt: str) -> SlurmCluster:
        if self.cluster is None:
            if os.geteuid() != 0:
                pytest.skip("a real Slurm needs root (munged on /run/munge, slurmd as root)")
            missing = tools_missing()
            if missing:
                pytest.skip(f"Slurm packages missing ({', '.join(missing)}): run tests/run.sh as root")
            cluster = SlurmCluster(Path(tempfile.mkdtemp(prefix="preemptlens-slurm-")), preempt=preempt)
            try:
                cluster.start()
            except BaseException:
                cluster.stop()
                shutil.rmtree(cluster.root, ignore_errors=True)
                raise
            self.cluster = cluster
        self.cluster.use(preempt)
        return self.cluster


@pytest.fixture(scope="session")
def _one_cluster() -> Iterator[_OneCluster]:
    one = _OneCluster()
    try:
        yield one
    finally:
        if one.cluster is not None:
            one.cluster.stop()
            shutil.rmtree(one.cluster.root, ignore_errors=True)


@pytest.fixture(scope="module")
def slurm_cluster(_one_cluster: _OneCluster) -> SlurmCluster:
    """Slurm with preempt/partition_prio: partition high preempts partition low."""
    return _one_cluster.get("partition_prio")


@pytest.fixture(scope="module")
def slurm_qos_cluster(_one_cluster: _OneCluster) -> SlurmCluster:
    """Slurm with preempt/qos: QOS high preempts QOS low; QOS protected is in no Preempt list."""
    return _one_cluster.get("qos")


@pytest.hookimpl(tryfirst=True)
def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    # Stable: every other test keeps its place, the qos-mode ones go last.
    items.sort(key=lambda item: "slurm_qos_cluster" in getattr(item, "fixturenames", ()))
    # Every test on the real Slurm is marked `real_slurm` (tests/conftest.py): tests/run.sh runs them in a
    # process of their own, beside the rest, since they mostly wait on real jobs.
    for item in items:
        if "_one_cluster" in getattr(item, "fixturenames", ()):
            item.add_marker(pytest.mark.real_slurm)
