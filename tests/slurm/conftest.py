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


@pytest.fixture(scope="session")
def slurm_cluster() -> Iterator[SlurmCluster]:
    if os.geteuid() != 0:
        pytest.skip("a real Slurm needs root (munged on /run/munge, slurmd as root)")
    missing = tools_missing()
    if missing:
        pytest.skip(f"Slurm packages missing ({', '.join(missing)}): run tests/run.sh as root")
    root = Path(tempfile.mkdtemp(prefix="preemptlens-slurm-"))
    cluster = SlurmCluster(root)
    try:
        cluster.start()
        yield cluster
    finally:
        cluster.stop()
        shutil.rmtree(root, ignore_errors=True)
