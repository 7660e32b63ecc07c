"""`preemptlens import FILE...`: load JSONL/CSV files of contract rows."""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

from preemptlens.analytics.lake import keep_current
from preemptlens.collectors.files import IMPORTABLE, FileImporter, table_for
from preemptlens.config import Config, WarehouseSettings
from preemptlens.errors import SourceError
from preemptlens.warehouse import LoadReport, Warehouse


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("files", nargs="+", type=Path, help="JSONL (.jsonl/.ndjson) or CSV files")
    parser.add_argument(
        "--table",
        choices=IMPORTABLE,
        help="the table the files hold (default: taken from each file name)",
    )


def run(args: argparse.Namespace, config: Config) -> int:
    with Warehouse(config.of(WarehouseSettings).path, future_slack_s=config.of(WarehouseSettings).future_slack_s) as wh:
        failed = 0
        for path in args.files:
            try:
                table = table_for(path, args.table)
                importer = FileImporter(path, wh.input_columns(table), table)
                total = LoadReport(load_id="", source=importer.source)
                for batch in importer.batches():
                    total.add(wh.load_batch(batch))
            except SourceError as exc:
                # A file that cannot be read at all does not stop the others; its committed batches stay.
                print(f"preemptlens import: {exc}", file=sys.stderr)
                failed += 1
                continue
            quarantined = total.quarantined
            print(
                f"{path} -> {table}: {total.loaded} loaded, {total.unchanged} unchanged, {quarantined} quarantined"
            )
            if quarantined:
                shown = wh.query(
                    "SELECT record, reason FROM quarantine WHERE source = $s ORDER BY record LIMIT 5",
                    {"s": importer.source},
                )
                for record, reason in shown.iter_rows():
                    print(f"  quarantined {record}: {reason}")
                if quarantined > shown.height:
                    print(f"  ... all in table quarantine, source = '{importer.source}'")
        exported = keep_current(wh, config)
        if exported is not None:
            print(f"lake {exported.folder}: {exported.written} partition(s) rewritten")
    # As the command line reports any other error (cli.main).
    return 2 if failed else 0
