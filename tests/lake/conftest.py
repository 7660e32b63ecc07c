"""The lake tests build their simulated cluster with tests/analytics' `small_hoarding_cluster` and
`simulated_and_analysed`, as the Spark and ground-truth tests do; that folder goes on sys.path
(appended, so nothing is shadowed)."""

from __future__ import annotations

import sys
from pathlib import Path

sys.path.append(str(Path(__file__).resolve().parent.parent / "analytics"))
