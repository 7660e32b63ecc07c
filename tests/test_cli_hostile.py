"""No input reaches a user as a traceback: every option of every command with hostile values (parsed by its
own parser), and the values that only the command reads (times, weeks) run through `preemptlens` itself,
each refused with one clear line."""

from __future__ import annotations

import argparse
import contextlib
import io
from pathlib import Path

import pytest

from preemptlens.cli import build_parser, main
from preemptlens.registry import COMMANDS, SOURCES
from preemptlens.warehouse import Warehouse

HOSTILE = ["1e300", "-1e300", "nan", "inf", "-inf", "-1", "99999999999999999999999", "١٢٣", "²", "", " ",
           "x" * 5000, "\x00", "0x10", "1_000", "99999999999999999999999d", "9999-W53", "0000-W01",
           "10000-01-01", "http://[::1", "$(id)", "2026-13-45T99:99", "-0"]


def options(parser: argparse.ArgumentParser) -> list[argparse.Action]:
    return [a for a in parser._actions if a.option_strings and a.nargs != 0 and not isinstance(
        a, argparse._HelpAction | argparse._VersionAction)]


def parse(argv: list[str]) -> str:
    """What parsing `argv` wrote to stderr; fails on anything but a parse or a usage error."""
    err = io.StringIO()
    with contextlib.redirect_stderr(err), contextlib.redirect_stdout(io.StringIO()):
        try:
            build_parser(argv[0]).parse_args(argv)
        except SystemExit as exc:
            assert exc.code in (0, 2), (argv, exc.code)
    assert "Traceback" not in err.getvalue(), argv
    return err.getvalue()


@pytest.mark.parametrize("command", sorted(COMMANDS))
def test_every_option_of_every_command_parses_or_says_why(command: str) -> None:
    sub = build_parser(command)._subparsers._group_actions[0].choices[command]  # type: ignore[union-attr]
    for action in options(sub):
        for value in HOSTILE:
            said = parse([command, f"{action.option_strings[-1]}={value}"])
            if said and action.type is not None and getattr(action.type, "__name__", "") == "parse":
                assert f"argument {'/'.join(action.option_strings)}" in said, said


@pytest.mark.parametrize("source", sorted(SOURCES))
def test_every_option_of_every_collector_parses_or_says_why(source: str) -> None:
    import importlib

    sub = argparse.ArgumentParser()
    importlib.import_module(SOURCES[source]).add_arguments(sub)
    for action in options(sub):
        for value in HOSTILE:
            parse(["collect", source, f"{action.option_strings[-1]}={value}"])


@pytest.fixture(scope="module")
def warehouse(tmp_path_factory: pytest.TempPathFactory) -> Path:
    path = tmp_path_factory.mktemp("cli") / "w.duckdb"
    with Warehouse(path) as wh:
        wh.publish()
    return path


TIMES = [*(v for v in HOSTILE if v not in ("-0", "", " ")), "1e11", "-86400", "0000-01-01", "300000y"]


@pytest.mark.parametrize(("argv", "values"), [
    (["cost", "--at"], TIMES),
    (["act", "--now"], TIMES),
    (["suggest", "--no-store", "--start"], TIMES),
    (["report", "--week"], [*HOSTILE, "2026-W54", "1969-W01", "2200-W01", "9999-W52"]),
    (["sql", "--max-rows"], ["1e20", "10000000000000000000000", "0", "-5", "١"]),
    (["sql", "--timeout"], ["1e9", "0", "nan", "-1"]),
    (["simulate", "--days"], ["1e300", "0", "-1", "nan"]),
    (["simulate", "--gpus"], ["70000000", "0", "8.5"]),
    (["dashboard", "--port"], ["70000", "0", "-1", "١٢٣"]),
])
def test_values_a_command_reads_are_refused_in_one_line(
    warehouse: Path, argv: list[str], values: list[str], capsys: pytest.CaptureFixture[str]
) -> None:
    *words, option = argv
    for value in values:
        try:
            status = main(["--warehouse", str(warehouse), *words, f"{option}={value}"])
        except SystemExit as exc:  # a usage error, said by the command's parser
            status = exc.code
        out, err = capsys.readouterr()
        assert status == 2, (argv, value, status, err[-300:])
        assert "Traceback" not in err + out and "internal error" not in err, (argv, value, err)
        assert err.strip(), (argv, value)
