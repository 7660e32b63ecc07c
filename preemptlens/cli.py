"""The `preemptlens` command.

Subcommands are registered in `COMMANDS`: each is a module exposing
`add_arguments(parser)` and `run(args, config) -> int`. Library code raises
`PreemptlensError`; only this module turns errors into exit codes.

Start-up stays quick: only the command being run is imported (none for
`preemptlens --help`), and its module imports what its `run` needs inside it.
Ctrl-C at any point, from parsing on, ends with one line and status 130.
"""

from __future__ import annotations

import argparse
import importlib
import logging
import shlex
import sys
from collections.abc import Sequence
from types import ModuleType
from typing import TYPE_CHECKING

from preemptlens import __version__
from preemptlens.errors import ConfigError, PreemptlensError

if TYPE_CHECKING:
    from preemptlens.config import Config

# name -> (module, one-line help)
COMMANDS: dict[str, tuple[str, str]] = {
    "demo": ("preemptlens.commands.demo", "simulate the bundled demo cluster into the warehouse and summarise it"),
    "simulate": ("preemptlens.commands.simulate", "simulate a cluster with ground truth into the warehouse"),
    "import": ("preemptlens.commands.importer", "import JSONL or CSV files of jobs, runs, checkpoints or GPU samples"),
    "collect": ("preemptlens.commands.collect", "collect from a source (prometheus, slurm, kubernetes)"),
    "migrate": ("preemptlens.commands.migrate", "create or upgrade the warehouse schema"),
    "sql": ("preemptlens.commands.sql", "run read-only SQL over the latest warehouse snapshot"),
    "serve": ("preemptlens.commands.serve", "collect, analyze, alert and report on a schedule; serve the dashboard"),
    "analyze": ("preemptlens.commands.analyze", "refresh the ledger, hoarding, scope creep, net benefit and scorecard"),
    "dashboard": ("preemptlens.commands.dashboard", "serve the Streamlit dashboard"),
    "report": ("preemptlens.commands.report", "write the weekly report (HTML and Markdown) for an ISO week"),
    "export": ("preemptlens.commands.export", "export the raw and derived tables as a Hive-partitioned Parquet lake"),
    "spark": ("preemptlens.commands.spark", "run the idle-hoarding and ledger scans on Apache Spark over the lake"),
    "suggest": ("preemptlens.commands.suggest", "replay the recorded workload under other policies; suggest settings"),
    "pilot": ("preemptlens.commands.pilot", "evaluate a preemption pilot against control pools; list candidate pools"),
}

log = logging.getLogger("preemptlens")


def _global_options(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--config", help="TOML config file (default: $PREEMPTLENS_CONFIG or ./preemptlens.toml)")
    parser.add_argument("--warehouse", help="DuckDB warehouse file (overrides warehouse.path)")
    parser.add_argument("-v", "--verbose", action="store_true", help="log debug detail")


def build_parser(command: str | None = None) -> argparse.ArgumentParser:
    """Every command by name and help text; the arguments of `command` alone, whose module is the only one
    imported. The overview (`--help`) and a usage error need no command module."""
    parser = argparse.ArgumentParser(
        prog="preemptlens", description="What preemption costs and buys on a shared GPU cluster."
    )
    parser.add_argument("--version", action="version", version=f"preemptlens {__version__}")
    _global_options(parser)
    sub = parser.add_subparsers(dest="command", required=True, metavar="COMMAND")
    for name, (module_name, help_text) in COMMANDS.items():
        subparser = sub.add_parser(name, help=help_text, description=help_text)
        if name == command:
            importlib.import_module(module_name).add_arguments(subparser)
    return parser


def command_args(module: ModuleType, argv: Sequence[str] = (), *, prog: str) -> argparse.Namespace:
    """A subcommand's arguments as its own parser reads them, so defaults stay in one place
    when one command (demo, serve) runs another."""
    parser = argparse.ArgumentParser(prog=prog)
    module.add_arguments(parser)
    try:
        return parser.parse_args(list(argv))
    except SystemExit:
        raise ConfigError(f"{prog}: cannot parse {shlex.join(argv)!r}", parser.format_usage().strip()) from None


def load(args: argparse.Namespace) -> Config:
    from preemptlens.config import load_config

    overrides = {"warehouse.path": args.warehouse} if args.warehouse else None
    return load_config(args.config, overrides)


def main(argv: Sequence[str] | None = None) -> int:
    prog, running = "preemptlens", False
    try:
        first = argparse.ArgumentParser(add_help=False)
        _global_options(first)
        first.add_argument("command", nargs="?")
        known, _ = first.parse_known_args(argv)
        args = build_parser(known.command).parse_args(argv)
        prog = f"preemptlens {args.command}"
        logging.basicConfig(
            level=logging.DEBUG if args.verbose else logging.INFO,
            format="%(asctime)s %(levelname)s %(name)s: %(message)s",
        )
        module_name, _ = COMMANDS[args.command]
        config = load(args)
        module = importlib.import_module(module_name)
        running = True
        return int(module.run(args, config))
    except PreemptlensError as exc:
        print(f"{prog}: {exc}", file=sys.stderr)
        return 2
    except KeyboardInterrupt:
        print(f"{prog}: interrupted{'; committed batches are kept' if running else ''}", file=sys.stderr)
        return 130


if __name__ == "__main__":
    sys.exit(main())
