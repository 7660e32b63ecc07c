"""`preemptlens collect SOURCE`: run one collector into the warehouse.

Each source module exposes `add_arguments(parser)` and
`build(args, config) -> Collector`; batches are loaded one transaction each,
so an interrupted collection keeps every batch it committed and a re-run
continues from the last committed watermark.
"""

from __future__ import annotations

import argparse
import importlib
from collections.abc import Iterator, Mapping
from typing import Any

from preemptlens.analytics.lake import keep_current
from preemptlens.config import Config, WarehouseSettings
from preemptlens.contract import Batch, UsesRuns
from preemptlens.errors import ConfigError
from preemptlens.registry import SOURCES
from preemptlens.warehouse import LoadReport, Warehouse

# What an unset cluster.name meant before the sources named their cluster.
OLD_DEFAULT_CLUSTER = "demo"


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


def checked_batches(collector: Any, marks: Mapping[tuple[str, str], str]) -> Iterator[Batch]:
    """The collector's batches, refusing to start a second cluster beside rows stored under the old default
    name: an upgraded collector whose source now names the cluster would otherwise split one cluster in two."""
    checked = {cluster for cluster, _ in marks} != {OLD_DEFAULT_CLUSTER}
    for batch in collector.batches(marks):
        if not checked:
            names = {w.cluster for w in batch.watermarks} | {
                str(v) for f in batch.frames.values() if "cluster" in f.columns for v in f["cluster"].unique()}
            checked = bool(names)
            if names and OLD_DEFAULT_CLUSTER not in names:
                new = sorted(names)[0]
                raise ConfigError(
                    f"{collector.name}: this warehouse holds {collector.name} rows under cluster "
                    f"{OLD_DEFAULT_CLUSTER!r} (an unset cluster.name used to mean that); this collection names the "
                    f"cluster {new!r}; nothing was loaded",
                    f"move the old rows: preemptlens rename-cluster {OLD_DEFAULT_CLUSTER} {new} "
                    f"(or set cluster.name = \"{OLD_DEFAULT_CLUSTER}\" to keep the old name)",
                )
        yield batch


def hand_runs(collector: Any, wh: Warehouse) -> None:
    """A collector that maps its records to recorded jobs (contract.UsesRuns) gets the runs it needs."""
    if isinstance(collector, UsesRuns):
        collector.use_runs(*wh.recorded_runs(collector.runs_since()))


def run(args: argparse.Namespace, config: Config) -> int:
    module = importlib.import_module(SOURCES[args.source])
    collector = module.build(args, config)
    total = LoadReport(load_id="", source=collector.name)
    with Warehouse(config.of(WarehouseSettings).path, future_slack_s=config.of(WarehouseSettings).future_slack_s) as wh:
        hand_runs(collector, wh)
        for batch in checked_batches(collector, wh.watermarks(collector.name)):
            total.add(wh.load_batch(batch))
        exported = keep_current(wh, config)
    for table, rep in sorted(total.tables.items()):
        print(f"{table}: {rep.loaded} loaded, {rep.unchanged} unchanged, {rep.quarantined} quarantined")
    if exported is not None:
        print(f"lake {exported.folder}: {exported.written} partition(s) rewritten")
    return 0
