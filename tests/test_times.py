"""`--since`/`--until` as operators type them, read by one parser for every command."""

from __future__ import annotations

import argparse
from datetime import UTC, datetime, timedelta
from pathlib import Path

import pytest

from preemptlens.collectors import prometheus, slurm
from preemptlens.commands import suggest
from preemptlens.config import Config, load_config
from preemptlens.errors import ConfigError
from preemptlens.times import parse_duration_ms, parse_when

NOW = datetime(2026, 12, 3, 12, 0, tzinfo=UTC)


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("2026-11-02T10:00:00Z", datetime(2026, 11, 2, 10, tzinfo=UTC)),
        ("2026-11-02T10:00:00", datetime(2026, 11, 2, 10, tzinfo=UTC)),
        ("2026-11-02 12:00+02:00", datetime(2026, 11, 2, 10, tzinfo=UTC)),
        ("2026-11-02", datetime(2026, 11, 2, tzinfo=UTC)),
        ("1762077600", datetime(2025, 11, 2, 10, tzinfo=UTC)),
        ("1762077600.5", datetime(2025, 11, 2, 10, 0, 0, 500000, tzinfo=UTC)),
        ("10m", NOW - timedelta(minutes=10)),
        ("2h", NOW - timedelta(hours=2)),
        ("7d", NOW - timedelta(days=7)),
        ("1h30m", NOW - timedelta(minutes=90)),
        (" 90s ", NOW - timedelta(seconds=90)),
        ("now", NOW),
    ],
)
def test_every_form_operators_type(text: str, expected: datetime) -> None:
    assert parse_when(text, "--since", NOW) == expected


@pytest.mark.parametrize("text", ["yesterday", "10 minutes", "-5m", "2h ago", "", "nan", "1e400"])
def test_anything_else_is_one_clear_error_naming_the_option(text: str) -> None:
    with pytest.raises(ConfigError) as err:
        parse_when(text, "--until", NOW)
    assert err.value.message.startswith("--until: ") and repr(text.strip()) in err.value.message
    assert "10m" in err.value.hint and "epoch seconds" in err.value.hint


def test_durations_keep_the_prometheus_grammar() -> None:
    assert parse_duration_ms("1h30m", "x") == 5_400_000
    assert parse_duration_ms("250ms", "x") == 250
    with pytest.raises(ConfigError, match="x: '5 m' is not a duration"):
        parse_duration_ms("5 m", "x")


@pytest.fixture
def config(tmp_path: Path) -> Config:
    path = tmp_path / "preemptlens.toml"
    path.write_text('[cluster]\nname = "t"\n')
    return load_config(str(path))


def _args(build_parser: object, argv: list[str]) -> argparse.Namespace:
    parser = argparse.ArgumentParser()
    build_parser(parser)  # type: ignore[operator]
    return parser.parse_args(argv)


def test_every_command_with_a_window_reads_relative_times(config: Config) -> None:
    before = datetime.now(UTC)
    col = slurm.build(_args(slurm.add_arguments, ["--since", "2h", "--until", "10m"]), config)
    after = datetime.now(UTC)
    assert col.o.since is not None and col.o.until is not None
    assert before - timedelta(hours=2) <= col.o.since <= after - timedelta(hours=2)
    assert before - timedelta(minutes=10) <= col.o.until <= after - timedelta(minutes=10)

    pcol = prometheus.build(_args(prometheus.add_arguments, ["--since", "7d", "--until", "1h"]),
                            config)
    assert pcol.until_ms is not None and abs(pcol.until_ms / 1000 - (before - timedelta(hours=1)).timestamp()) < 60
    assert pcol.since_ms is not None
    assert abs(pcol.since_ms / 1000 - (before - timedelta(days=7)).timestamp()) < 60

    start = _args(suggest.add_arguments, ["--start", "3d"]).start
    assert abs((start - (before - timedelta(days=3))).total_seconds()) < 60
    with pytest.raises(SystemExit):
        _args(suggest.add_arguments, ["--start", "soon"])


def test_since_after_until_is_refused_by_every_collector(config: Config) -> None:
    for module in (slurm, prometheus):
        with pytest.raises(ConfigError, match="is after --until"):
            module.build(_args(module.add_arguments, ["--since", "1h", "--until", "2h"]), config)
