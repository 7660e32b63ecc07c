"""The `preemptlens` command.

Subcommands are registered in `preemptlens.registry.COMMANDS`: each is a module exposing
`add_arguments(parser)` and `run(args, config) -> int`. Library code raises
`PreemptlensError`; only this module turns errors into exit codes.

Start-up stays quick: only the command being run is imported (none for
`preemptlens --help`), and its module imports what its `run` needs inside it.
Ctrl-C at any point, from parsing on, ends with one line and status 130. An error
that is not a PreemptlensError (a bug, or an input no check foresaw) ends with one
line naming its kind and where it happened, status 70, and never its text, which
may quote a secret; `--verbose` adds the traceback.
"""

from __future__ import annotations

import argparse
import importlib
import logging
import os
import shlex
import sys
import traceback
from collections.abc import Sequence
from types import ModuleType
from typing import TYPE_CHECKING

from preemptlens import __version__
from preemptlens.errors import ConfigError, PreemptlensError
from preemptlens.private import private_umask
from preemptlens.registry import COMMANDS

if TYPE_CHECKING:
    from preemptlens.config import Config


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
    from preemptlens.config import WarehouseSettings, load_config
    from preemptlens.private import refuse_if_others_can_change, warn_if_exposed

    overrides = {"warehouse.path": args.warehouse} if args.warehouse else None
    config = load_config(args.config, overrides)
    folder = os.path.dirname(os.path.abspath(config.of(WarehouseSettings).path))
    if os.path.isdir(folder):
        # DuckDB opens the warehouse and creates its write-ahead log by name, following symlinks: in a folder
        # another user can write, a name planted there would receive every team's data.
        refuse_if_others_can_change(folder, "the warehouse's folder",
                                    "chmod 700 it, owned by the service's user, or set warehouse.path elsewhere")
        warn_if_exposed(folder, "the warehouse's folder")
    return config


def _where(exc: BaseException) -> str:
    """The innermost frame of preemptlens's own code the error passed through, as path:line."""
    found = "?"
    for frame in traceback.extract_tb(exc.__traceback__):
        if "preemptlens" in frame.filename or "/collectors/" in frame.filename or "/analytics/" in frame.filename:
            found = f"{os.path.basename(frame.filename)}:{frame.lineno}"
    return found


def main(argv: Sequence[str] | None = None) -> int:
    # Whatever preemptlens writes (warehouse, snapshot, lake, reports, temporary files) is its service user's
    # alone, whatever umask it was started with (docs/deploy.md).
    private_umask()
    prog, running, verbose = "preemptlens", False, False
    try:
        first = argparse.ArgumentParser(add_help=False)
        _global_options(first)
        first.add_argument("command", nargs="?")
        known, _ = first.parse_known_args(argv)
        verbose = bool(known.verbose)
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
    except Exception as exc:  # noqa: BLE001 -- the last line of defence: no input ends in a traceback
        if verbose:
            traceback.print_exc()
        print(f"{prog}: internal error ({type(exc).__name__} at {_where(exc)}); batches already committed are "
              "kept\n  hint: this is a bug: please report it with the output of the same command run with -v",
              file=sys.stderr)
        return 70


if __name__ == "__main__":
    sys.exit(main())
