"""What the benchmarks share: the median wall time of a callable."""

from __future__ import annotations

import statistics
import time
from collections.abc import Callable


def median_s(run: Callable[[], object], repeat: int) -> float:
    """Median wall seconds of `repeat` calls of `run` (the median, not the mean: these machines are noisy)."""
    times = []
    for _ in range(repeat):
        began = time.perf_counter()
        run()
        times.append(time.perf_counter() - began)
    return statistics.median(times)
