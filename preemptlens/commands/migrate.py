from __future__ import annotations

import argparse

from preemptlens.config import Config, WarehouseSettings
from preemptlens.warehouse import Warehouse


def add_arguments(parser: argparse.ArgumentParser) -> None:
    del parser


def run(args: argparse.Namespace, config: Config) -> int:
    with Warehouse(config.of(WarehouseSettings).path) as wh:
        applied = wh.migrate()
        version = wh.schema_version()
    print(
        f"warehouse {config.of(WarehouseSettings).path}: schema version {version}"
        + (f" (applied {', '.join(map(str, applied))})" if applied else " (up to date)")
    )
    return 0
