"""`preemptlens collect SOURCE`: run one collector into the warehouse.

Each source module exposes `add_arguments(parser)` and
`build(args, config) -> Collector`; batches are loaded one transaction each,
so an interrupted collection keeps every batch it committed and a re-run
continues from the last committed watermark.
"""

from __future__ import annotations

import argparse
import importlib

from preemptlens.analytics.lake import keep_current
from preemptlens.config import Config
from preemptlens.warehouse import LoadReport, Warehouse

SOURCES: dict[str, str] = {
    "prometheus": "preemptlens.collectors.prometheus",
    "slurm": "preemptlens.collectors.slurm",
    "kubernetes": "preemptlens.collectors.kubernetes",
}


def add_arguments(parser: argparse.ArgumentParser) -> None:
    sub = parser.add_subparsers(dest="source", required=True, metavar="SOURCE")
    for name, module_name in SOURCES.items():
        try:
            module = importlib.import_module(module_name)
        except ModuleNotFoundError as exc:
            if exc.name != module_name:
                raise
            continue
        source_parser = sub.add_parser(name, help=(module.__doc__ or name).strip().splitlines()[0])
        module.add_arguments(source_parser)


def run(args: argparse.Namespace, config: Config) -> int:
    module = importlib.import_module(SOURCES[args.source])
    collector = module.build(args, config)
    total = LoadReport(load_id="", source=collector.name)
    with Warehouse(config.get("warehouse.path"), future_slack_s=config.get("warehouse.future_slack_s")) as wh:
        for batch in collector.batches(wh.watermarks(collector.name)):
            total.add(wh.load_batch(batch))
        exported = keep_current(wh, config)
    for table, rep in sorted(total.tables.items()):
        print(f"{table}: {rep.loaded} loaded, {rep.unchanged} unchanged, {rep.quarantined} quarantined")
    if exported is not None:
        print(f"lake {exported.folder}: {exported.written} partition(s) rewritten")
    return 0
