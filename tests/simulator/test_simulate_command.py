"""`preemptlens simulate` end to end through the CLI, into a real DuckDB file."""

from __future__ import annotations

from pathlib import Path

import pytest

from preemptlens.cli import main
from preemptlens.warehouse import Warehouse


def test_simulate_command_loads_a_cluster(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    path = tmp_path / "wh.duckdb"
    argv = ["--warehouse", str(path), "simulate", "--cluster", "clitest", "--gpus", "16", "--days", "1",
            "--grace", "0", "--min-run", "0"]
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


def test_simulate_command_reports_bad_arguments(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit) as stopped:  # a usage error, said by the command's parser
        main(["--warehouse", str(tmp_path / "wh.duckdb"), "simulate", "--gpus", "4"])
    assert stopped.value.code == 2
    assert "argument --gpus: '4' is out of range: expected from 8" in capsys.readouterr().err
    assert not (tmp_path / "wh.duckdb").exists()
