"""The one registry: every plugin the shell knows, by name, as a module path.

Nothing here is imported until it is used, so the core (warehouse, load
contract, configuration) never imports a collector, an analytic or a
dashboard: arrows point consumers -> analytics -> warehouse <- collectors,
with the shell (CLI, config, serve) on top reading this table.

A new source, command or settings section is one line here (see
docs/architecture.md for the files each touches).
"""

from __future__ import annotations

# `preemptlens collect NAME`: each module exposes `add_arguments(parser)` and `build(args, config)`.
SOURCES: dict[str, str] = {
    "prometheus": "preemptlens.collectors.prometheus",
    "slurm": "preemptlens.collectors.slurm",
    "kubernetes": "preemptlens.collectors.kubernetes",
    "checkpoints": "preemptlens.collectors.checkpoints",
}

# `preemptlens NAME`: each module exposes `add_arguments(parser)` and `run(args, config) -> int`.
COMMANDS: dict[str, tuple[str, str]] = {
    "demo": ("preemptlens.commands.demo", "simulate the bundled demo cluster into the warehouse and summarise it"),
    "simulate": ("preemptlens.commands.simulate", "simulate a cluster with ground truth into the warehouse"),
    "import": ("preemptlens.commands.importer", "import JSONL or CSV files of jobs, runs, checkpoints or GPU samples"),
    "collect": ("preemptlens.commands.collect", "collect from a source (prometheus, slurm, kubernetes, checkpoints)"),
    "migrate": ("preemptlens.commands.migrate", "create or upgrade the warehouse schema"),
    "rename-cluster": ("preemptlens.commands.rename_cluster", "move the rows loaded under one cluster name to another"),
    "sql": ("preemptlens.commands.sql", "run read-only SQL over the latest warehouse snapshot"),
    "serve": ("preemptlens.commands.serve", "collect, analyze, alert and report on a schedule; serve the dashboard"),
    "analyze": ("preemptlens.commands.analyze", "refresh the ledger, hoarding, scope creep, net benefit and scorecard"),
    "dashboard": ("preemptlens.commands.dashboard", "serve the Streamlit dashboard"),
    "report": ("preemptlens.commands.report", "write the weekly report (HTML and Markdown) for an ISO week"),
    "export": ("preemptlens.commands.export", "export the raw and derived tables as a Hive-partitioned Parquet lake"),
    "spark": ("preemptlens.commands.spark", "run the idle-hoarding and ledger scans on Apache Spark over the lake"),
    "suggest": ("preemptlens.commands.suggest", "replay the recorded workload under other policies; suggest settings"),
    "pilot": ("preemptlens.commands.pilot", "evaluate a preemption pilot against control pools; list candidate pools"),
    "cost": ("preemptlens.commands.cost", "compute and store the live preemption cost of running jobs; print the top"),
    "act": ("preemptlens.commands.act", "run the enabled actions once: boost or protect costly jobs"),
}

# Actions' effectors (preemptlens.contract.Effector): each module exposes `build_effector(action, config)`
# returning (the cluster it acts in, the effector). `preemptlens act` and serve build them only for an
# action in enforce mode; an action without an entry here can run in dry-run only.
EFFECTORS: dict[str, str] = {
    "kueue_boost": "preemptlens.collectors.kubernetes.actions",
    "kai_protect": "preemptlens.collectors.kubernetes.actions",
    "slurm_protect": "preemptlens.collectors.slurm.actions",
}

# Modules whose `SETTINGS` (a section's frozen dataclass or a tuple of them, see preemptlens.config) make up the
# configuration, in documentation order, each with the names of the sections it declares: reading a
# configuration imports only the modules of the sections it sets (most of these modules import DuckDB, polars
# or a client library a command may not need). A test checks the names against what the modules declare.
SECTIONS: dict[str, tuple[str, ...]] = {
    "preemptlens.config": ("warehouse", "cluster"),
    "preemptlens.analytics.params": ("analytics",),
    "preemptlens.analytics.whatif.settings": ("tuning", "victim_order"),
    "preemptlens.analytics.pilot": ("pilot",),
    "preemptlens.analytics.livecost": ("live_cost",),
    "preemptlens.analytics.actions": ("kueue_boost", "kai_protect", "slurm_protect"),
    "preemptlens.collectors.prometheus": ("prometheus",),
    "preemptlens.collectors.slurm": ("slurm",),
    "preemptlens.collectors.slurm.actions": ("slurm_actions",),
    "preemptlens.collectors.kubernetes": ("kubernetes",),
    "preemptlens.collectors.checkpoints": ("checkpoints",),
    "preemptlens.readonly": ("sql",),
    "preemptlens.analytics.alerts": ("alerts",),
    "preemptlens.commands.serve": ("serve",),
    "preemptlens.dashboards.data": ("dashboard",),
    "preemptlens.reading.masking": ("masking",),
    "preemptlens.dashboards.access": ("access",),
    "preemptlens.dashboards.report": ("report",),
    "preemptlens.analytics.lake": ("lake",),
    "preemptlens.analytics.spark": ("spark",),
    "preemptlens.dashboards.metrics": ("metrics",),
}


def source_module(name: str) -> str:
    """The module of a registered source; any other name is taken as a dotted module path."""
    return SOURCES.get(name, name)


def command_module(name: str) -> str:
    return COMMANDS.get(name, (f"preemptlens.commands.{name}", ""))[0]
