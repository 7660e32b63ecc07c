"""The expected requeue wait (sql/views/expected_requeue.sql, docs/figures.md section 1), read and worded once
for every outlet that tells a victim when its job should run again: the victim notice (analytics/alerts.py),
the job's card on My preemptions (dashboards/data.py `mine`, dashboards/app_pages/mine.py) and the victim's
story on the Preemptions page. The live cost reads the same rows in sql/live/live_costs.sql.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Any

# The estimate's columns as a victim's row carries them (`q`, joined by `estimate_join`).
ESTIMATE_COLUMNS = (
    "q.expected_requeue_s, q.requeue_p90_s, q.requeue_median_low_s, q.requeue_median_high_s, "
    "q.longest_wait_s AS requeue_longest_s, q.victims AS requeue_victims, q.restarted AS requeue_restarted, "
    "q.requeue_group, q.size_class AS requeue_size_class, q.group_size_class AS requeue_group_size_class"
)


def estimate_join(cluster: str, pool: str, tier: str, gpus: str) -> str:
    """`LEFT JOIN` of the expected requeue wait of a victim's cluster, pool, tier and GPU count (column
    expressions of the outer query) as `q`."""
    return (
        f"LEFT JOIN expected_requeue AS q ON q.cluster = {cluster} AND q.pool IS NOT DISTINCT FROM {pool} "
        f"AND q.tier = {tier} AND q.gpus IS NOT DISTINCT FROM {gpus}"
    )


def _gpus(size_class: str | None) -> str:
    return "1 GPU" if size_class == "1" else f"{size_class or 'an unknown number of'} GPUs"


def _victims(n: int) -> str:
    return f"{n:,} recent victim" + ("" if n == 1 else "s")


def basis_text(e: Mapping[str, Any], tier: str, pool: str | None) -> str:
    """The victims the estimate rests on, and the wider group it fell back to when its own was too small."""
    where = f"pool {pool}" if pool is not None else "an unknown pool"
    size = _gpus(e["requeue_size_class"])
    group = e["requeue_group"]
    # From the narrowest group to the widest (sql/views/expected_requeue.sql): a job's size is given up last but
    # one, since large jobs wait far longer for their GPUs than small ones of the same pool.
    if group == "tier, pool and size":
        who = f"of tier {tier} with {size} in {where}"
    elif group == "tier and size":
        who = f"of tier {tier} with {size} in any pool (too few in {where})"
    elif group == "tier and a smaller size":
        who = (f"of tier {tier} with {_gpus(e['requeue_group_size_class'])} in any pool (too few with {size}, "
               "which tend to wait longer)")
    elif group == "tier and pool":
        who = f"of tier {tier} of any size in {where} (too few with {size} in any pool)"
    else:
        who = f"of tier {tier} of any size in any pool (too few with {size} in {where})"
    return f"from {_victims(e['requeue_victims'])} {who}, {e['requeue_restarted']:,} restarted"


def has_passed(e: Mapping[str, Any], waited_s: float | None) -> bool:
    """Whether a victim still waiting after `waited_s` has waited as long as the median wait of its group."""
    return e["expected_requeue_s"] is not None and waited_s is not None and waited_s >= e["expected_requeue_s"]


def restart_text(e: Mapping[str, Any], tier: str, pool: str | None, waited_s: float | None,
                 duration: Callable[[float | None], str]) -> str:
    """When a victim still waiting after `waited_s` (None: just preempted) should run again: the median wait
    of its group, or once that has passed, that it has waited longer than most and the p90; "more than" the
    longest wait seen where too few restarted for the median (or the p90) to be known."""
    if e["requeue_victims"] is None:
        return f"expected restart unknown: no recent victim of tier {tier} to estimate the wait from"
    median, p90, longest = e["expected_requeue_s"], e["requeue_p90_s"], e["requeue_longest_s"]
    basis = basis_text(e, tier, pool)
    most = (f"9 in 10 within {duration(p90)}" if p90 is not None
            else f"fewer than 9 in 10 within the longest wait seen, {duration(longest)}")
    if median is None:
        return (f"expect more than {duration(longest)}: fewer than half of such victims restarted within the "
                f"longest wait seen; {basis}")
    if has_passed(e, waited_s):
        text = (f"it has waited {duration(waited_s)}, longer than most: half of such victims restarted within "
                f"{duration(median)}, {most}")
        if p90 is not None and waited_s is not None and waited_s >= p90:
            text += ", so it has waited longer than 9 in 10 of them"
        return f"{text}; {basis}"
    high = (duration(e["requeue_median_high_s"]) if e["requeue_median_high_s"] is not None
            else f"more than {duration(longest)}")
    return (f"expect a restart about {duration(median)} after the preemption (the median wait, 95% interval "
            f"{duration(e['requeue_median_low_s'])} to {high}); {most}; {basis}")
