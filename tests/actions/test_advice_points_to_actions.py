"""The suggestions' near-completion and repeat-victim advice points to the actions, as configuration
that loads: each snippet's action section is a valid [kueue_boost], [kai_protect] or [slurm_protect]."""

from __future__ import annotations

import re
from pathlib import Path

from actions_world import settings

from preemptlens.analytics.whatif import snippets


def _action_section(text: str) -> str:
    found = re.search(r"^\[(kueue_boost|kai_protect|slurm_protect)\]\n(?:[a-z_]+ = .+\n)+", text, re.M)
    assert found is not None, text
    return found.group(0)


def test_near_completion_advice_names_the_action_of_each_scheduler(tmp_path: Path) -> None:
    advice = snippets.near_completion(0.9, 600.0, ("normal",))
    for scheduler, action in (("slurm", "slurm_protect"), ("kai", "kai_protect"), ("kueue", "kueue_boost")):
        section = _action_section(advice[scheduler])
        loaded = settings(tmp_path, section)[action]
        assert (loaded.enabled, loaded.mode, loaded.near_completion_high) == (True, "dry-run", 0.9)
    # KAI's scheduler reads the PodGroup's spec field, not a label on the PodGroup.
    assert '"spec":{"preemptibility":"non-preemptible"}' in advice["kai"]


def test_repeat_victim_advice_names_the_kueue_boost(tmp_path: Path) -> None:
    advice = snippets.repeat_victims(100, 7 * 86400.0)
    loaded = settings(tmp_path, _action_section(advice["kueue"]))["kueue_boost"]
    assert (loaded.enabled, loaded.max_boost) == (True, 100)


def test_kueue_boost_advice_says_which_release_reads_which_form() -> None:
    for text in (snippets.repeat_victims(300, 86400.0)["kueue"], snippets.near_completion(0.9, 3600.0, ())["kueue"]):
        # no release has a typed field (tests/actions/test_k8s_actions.py reads each release's CRD)
        assert "priorityBoost" not in text
        assert "Kueue v0.17.0 and later" in text and "PriorityBoost" in text
        assert "kueue.x-k8s.io/priority-boost=" in text
