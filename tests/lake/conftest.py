"""The lake tests build their simulated cluster with tests/analytics' `simulated_and_analysed`, as the
ground-truth and Spark tests do; its folder goes on sys.path (appended: nothing here is shadowed)."""

from __future__ import annotations

import sys
from pathlib import Path

sys.path.append(str(Path(__file__).resolve().parent.parent / "analytics"))
