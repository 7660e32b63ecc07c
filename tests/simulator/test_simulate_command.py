"""`preemptlens simulate` end to end through the CLI, into a real DuckDB file."""

from __future__ import annotations

import argparse
from pathlib import Path

import pytest

from preemptlens.cli import main
from preemptlens.commands import simulate
from preemptlens.config import Config
from preemptlens.errors import ConfigError
from preemptlens.warehouse import Warehouse


def test_simulate_command_loads_a_cluster(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    path = tmp_path / "wh.duckdb"
    argv = ["--warehouse", str(path), "simulate", "--cluster", "clitest", "--gpus", "16", "--days", "1",
            "--grace", "0", "--min-run", "0", "--start", "2026-01-05"]
    assert main(argv) == 0
    out = capsys.readouterr()
    assert "cluster clitest: 16 GPUs, 1 days" in out.out
    assert "scheduled" in out.err or "loaded GPU samples of day 1" in out.err
    with Warehouse(path, read_only=True) as wh:
        counts = wh.query(
            "SELECT (SELECT count(*) FROM gpu_samples WHERE cluster = 'clitest') AS samples, "
            "(SELECT count(DISTINCT source) FROM jobs) AS sources, (SELECT max(gpus) FROM pools) AS gpus"
        ).row(0)
    assert counts == (16 * 1440, 1, 16)
    # Running it again changes nothing.
    assert main(argv) == 0
    assert "rows loaded 0," in capsys.readouterr().out


def test_simulate_ends_now_by_default_and_starts_where_asked() -> None:
    from datetime import UTC, datetime

    parser = argparse.ArgumentParser()
    simulate.add_arguments(parser)
    now = datetime(2026, 12, 4, 19, 42, 7, tzinfo=UTC)
    sim = simulate.config_from(parser.parse_args(["--days", "2"]), Config(values={}), now=now)
    # the last whole hour, so that a re-run within the hour loads the same rows
    assert sim.start == datetime(2026, 12, 2, 19, 0, tzinfo=UTC)
    assert simulate.config_from(parser.parse_args(["--start", "2026-03-02T06:00:00Z"]), Config(values={}),
                                now=now).start == datetime(2026, 3, 2, 6, 0, tzinfo=UTC)


def test_a_staged_pilot_turns_preemption_on_in_its_pools_at_its_start() -> None:
    from datetime import UTC, datetime

    parser = argparse.ArgumentParser()
    simulate.add_arguments(parser)
    args = parser.parse_args(["--gpus", "64", "--pools", "4", "--days", "14", "--start", "2026-03-02",
                              "--pilot-pools", "2", "--pilot-start", "2026-03-09", "--trigger", "300"])
    sim = simulate.config_from(args, Config(values={}), now=datetime(2026, 12, 4, tzinfo=UTC))
    assert sim.policy.enabled is False
    (change,) = sim.changes
    assert change.pools == ("a100", "h100") and change.at_s == 7 * 86400.0
    assert change.policy.enabled and change.policy.trigger_wait_s == 300.0
    for bad in (["--pilot-pools", "a100"], ["--pilot-pools", "4", "--pilot-start", "2026-03-09"],
                ["--pilot-pools", "zz", "--pilot-start", "2026-03-09"],
                ["--pilot-pools", "1", "--pilot-start", "2027-01-01"]):
        with pytest.raises(ConfigError):
            simulate.config_from(parser.parse_args(["--gpus", "64", "--pools", "4", "--days", "14", "--start",
                                                    "2026-03-02", *bad]), Config(values={}))


def test_simulate_command_reports_bad_arguments(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit) as stopped:  # a usage error, said by the command's parser
        main(["--warehouse", str(tmp_path / "wh.duckdb"), "simulate", "--gpus", "4"])
    assert stopped.value.code == 2
    assert "argument --gpus: '4' is out of range: expected from 8" in capsys.readouterr().err
    assert not (tmp_path / "wh.duckdb").exists()
