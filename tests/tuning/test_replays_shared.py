"""`analyze` then `suggest` replay each (workload, variant, jitter seed, drain) once (issue 35, item 1).

The chain runs through the CLI in this process (tuning.processes = 1, so every replay runs here) on a simulated
cluster on which suggest's rules that need replayed nets fire (protect_costly, near_completion) and store its
best change as the counterfactual's (d). Every replay the engine runs is counted through a wrapper of the replay
itself (replay._replay: the real engine runs, nothing is mocked), keyed by its window, variant (policy, changed
jobs, protected share, jitter seed: not the label) and whether it drains. Within one command no replay may come
twice. Between the two, suggest reads the nets `analyze` stored for the same rows, settings and window instead
of replaying them; the one it must replay again is no preemption, plain and jittered: the base of every net
suggest makes of its own changes (what analyze stores are figures and intervals, not the per-job replays).
"""

from __future__ import annotations

import contextlib
import io
import re
from collections import Counter
from collections.abc import Iterator
from dataclasses import replace
from pathlib import Path

import pytest

from preemptlens.analytics.params import AnalyticsSettings
from preemptlens.analytics.simulator.engine import Outcome
from preemptlens.analytics.whatif import counterfactual, replay
from preemptlens.analytics.whatif.replay import Variant, Workload, default_window, load_workload
from preemptlens.analytics.whatif.settings import TuningSettings
from preemptlens.cli import main
from preemptlens.warehouse import Warehouse

CONFIG = "[tuning]\nprocesses = 1\njitter_replays = 2\n"

Key = tuple[str, str, bool]


@pytest.fixture(scope="module")
def chain(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[Path, dict[str, Counter[Key]], str]]:
    """simulate, analyze, suggest; each command's replays counted by key; suggest's output."""
    root = tmp_path_factory.mktemp("shared")
    toml, path = root / "c.toml", root / "w.duckdb"
    toml.write_text(CONFIG)
    base = ["--config", str(toml), "--warehouse", str(path)]
    toml.chmod(0o600)
    assert main([*base, "simulate", "--gpus", "64", "--days", "4", "--start", "2026-11-01", "--seed", "3"]) == 0
    counted: dict[str, Counter[Key]] = {}
    real = replay._replay
    command = ""

    def counting(workload: Workload, variant: Variant, drain: bool = False) -> Outcome:
        window = f"{workload.window.cluster} {workload.window.start} {workload.window.end}"
        counted.setdefault(command, Counter())[(window, counterfactual.replay_key(variant), drain)] += 1
        return real(workload, variant, drain)

    with pytest.MonkeyPatch.context() as patch:
        # jittered replays as configured here (tests/conftest.py turns them off by default)
        patch.setenv("PREEMPTLENS_TUNING__JITTER_REPLAYS", "2")
        patch.setattr(replay, "_replay", counting)
        command = "analyze"
        assert main([*base, "analyze", "--quiet"]) == 0
        command = "suggest"
        out = io.StringIO()
        with contextlib.redirect_stdout(out):
            assert main([*base, "suggest"]) == 0
    yield path, counted, out.getvalue()


def test_no_replay_is_run_twice_within_a_command(chain: tuple[Path, dict[str, Counter[Key]], str]) -> None:
    _, counted, out = chain
    # the rules whose nets replay drained scenarios ran, and suggest's best change became the counterfactual's
    titles = re.findall(r"^\d+\. (.*)$", out, re.M)
    assert any(t.startswith("Hold costly victims back") for t in titles), out
    assert any(t.startswith("Protect victims that have done") for t in titles), out
    assert "the counterfactual's best alternative is now" in out
    for command in ("analyze", "suggest"):
        twice = {k: n for k, n in counted[command].items() if n > 1}
        assert counted[command] and not twice, (command, twice)


def test_suggest_replays_again_only_the_base_of_its_own_nets(
        chain: tuple[Path, dict[str, Counter[Key]], str]) -> None:
    path, counted, _ = chain
    again = set(counted["analyze"]) & set(counted["suggest"])
    with Warehouse(path) as wh:
        workload = load_workload(wh, default_window(wh, "sim"), TuningSettings(processes=1, jitter_replays=2))
    none = Variant("none", replace(workload.actual.policy, enabled=False))
    base = {counterfactual.replay_key(replace(none, jitter=seed)) for seed in (None, 1, 2)}
    assert again and {(variant, drain) for _, variant, drain in again} == {(k, True) for k in base}
    # today's policy and the bound, whose nets suggest prints, were read from what analyze stored: neither is
    # replayed drained (today's is replayed cut at the window's end, against the ledger: another replay)
    for variant in (Variant("today", workload.actual.policy), counterfactual.bound_variant(workload)):
        assert not any(v == counterfactual.replay_key(variant) and drain for _, v, drain in counted["suggest"])


def test_stored_nets_are_read_back_only_at_the_settings_they_were_made_with(
        chain: tuple[Path, dict[str, Counter[Key]], str]) -> None:
    path, _, _ = chain
    params, tuning = AnalyticsSettings(), TuningSettings(processes=1, jitter_replays=2)
    weights = dict(params.tier_weights)
    with Warehouse(path) as wh:
        workload = load_workload(wh, default_window(wh, "sim"), tuning)
        samples, confidence = params.readiness_bootstrap_samples, params.readiness_confidence
        stored = counterfactual.stored_nets(wh, workload, params, tuning, weights, samples, confidence)
        today = counterfactual.replay_key(Variant("today", workload.actual.policy))
        assert today in stored
        row = wh.con.execute("SELECT net_value, net_low, net_high FROM counterfactual_scenarios "
                             "WHERE cluster = 'sim' AND scenario = 'today'").fetchall()[0]
        assert stored[today] == row
        # other weights, draws or interval samples: the stored nets are not theirs
        heavier = {**weights, "critical": weights["critical"] * 2}
        assert not counterfactual.stored_nets(wh, workload, params, tuning, heavier, samples, confidence)
        assert not counterfactual.stored_nets(wh, workload, params, TuningSettings(processes=1, jitter_replays=3),
                                              weights, samples, confidence)
        assert not counterfactual.stored_nets(wh, workload, params, tuning, weights, samples + 1, confidence)
