"""One local Spark session for all Spark tests (start-up takes seconds), skipped without pyspark or Java."""

from __future__ import annotations

import importlib.util
import os
import shutil
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from preemptlens.analytics.spark import spark_session

# The Spark tests build their simulated cluster with tests/analytics' `small_hoarding_cluster` and
# `simulated_and_analysed`, as the lake and ground-truth tests do (appended, so nothing is shadowed).
sys.path.append(str(Path(__file__).resolve().parent.parent / "analytics"))


@pytest.fixture(scope="session")
def spark() -> Iterator[Any]:
    if importlib.util.find_spec("pyspark") is None:
        pytest.skip("pyspark is not installed: pip install -e '.[test,spark]'")
    if not (os.environ.get("JAVA_HOME") or shutil.which("java")):
        pytest.skip("Spark needs Java 17+ (no java on PATH, no JAVA_HOME)")
    with spark_session(master="local[2]") as session:
        # The test lake is tiny: one shuffle partition avoids scheduling hundreds of empty tasks.
        session.conf.set("spark.sql.shuffle.partitions", "1")
        yield session
