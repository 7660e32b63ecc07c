"""Arrows point one way: consumers -> analytics -> warehouse <- collectors, the shell on top.

The core (load contract, warehouse, configuration, registry, the reading layer) names its plugins
only as module paths in preemptlens.registry, so importing it imports none.
"""

from __future__ import annotations

import ast
import json
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
PLUGINS = ("preemptlens.collectors", "preemptlens.analytics", "preemptlens.dashboards", "preemptlens.commands")
CORE = ("preemptlens.warehouse", "preemptlens.contract", "preemptlens.config", "preemptlens.registry",
        "preemptlens.errors", "preemptlens.readonly", "preemptlens.escape", "preemptlens.reading",
        "preemptlens.reading.masking", "preemptlens.reading.words")


def test_importing_the_core_imports_no_plugin() -> None:
    probe = (
        "import json, sys\n"
        f"for name in {list(CORE)!r}: __import__(name)\n"
        "print(json.dumps(sorted(sys.modules)))\n"
    )
    loaded = json.loads(subprocess.run([sys.executable, "-c", probe], check=True, capture_output=True,
                                       text=True, cwd=ROOT).stdout)
    assert "preemptlens.warehouse" in loaded
    assert [m for m in loaded if m.startswith(PLUGINS)] == []


def _imports(path: Path) -> set[str]:
    """Every preemptlens module a file imports, at the top or inside a function."""
    names: set[str] = set()
    for node in ast.walk(ast.parse(path.read_text(), str(path))):
        if isinstance(node, ast.Import):
            names.update(alias.name for alias in node.names)
        elif isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
            names.add(node.module)
            names.update(f"{node.module}.{alias.name}" for alias in node.names)
    return {n for n in names if n.startswith("preemptlens")}


@pytest.mark.parametrize(
    ("folder", "forbidden"),
    [
        ("collectors", ("preemptlens.analytics", "preemptlens.dashboards", "preemptlens.commands", "preemptlens.cli")),
        ("analytics", ("preemptlens.collectors", "preemptlens.dashboards", "preemptlens.commands", "preemptlens.cli")),
        ("dashboards", ("preemptlens.collectors", "preemptlens.commands", "preemptlens.cli")),
    ],
)
def test_plugins_import_only_down_the_arrows(folder: str, forbidden: tuple[str, ...]) -> None:
    wrong = {
        f"{path.relative_to(ROOT)}: {name}"
        for path in sorted((ROOT / folder).rglob("*.py"))
        for name in _imports(path)
        if name.startswith(forbidden)
    }
    assert wrong == set()


def _source(module: str) -> Path:
    path = ROOT.joinpath(*module.split("."))
    return path / "__init__.py" if path.is_dir() else path.with_suffix(".py")


def test_the_core_imports_no_plugin_anywhere() -> None:
    """Not even inside a function: the core reaches a plugin only through a registry name."""
    wrong = {
        f"{module}: {name}"
        for module in CORE
        for name in _imports(_source(module))
        if name.startswith(PLUGINS)
    }
    assert wrong == set()


def _module_of(path: Path) -> str:
    parts = path.relative_to(ROOT).with_suffix("").parts
    if parts[-1] == "__init__":
        parts = parts[:-1]
    return ".".join(("preemptlens", *parts)) if parts[0] != "preemptlens" else ".".join(parts)


def _cycle(graph: dict[str, set[str]]) -> list[str] | None:
    """One import circle of the graph, as the modules around it, or None."""
    state: dict[str, int] = {}  # 1: on the current path, 2: done
    path: list[str] = []

    def visit(node: str) -> list[str] | None:
        state[node] = 1
        path.append(node)
        for nxt in sorted(graph.get(node, ())):
            if state.get(nxt) == 1:
                return [*path[path.index(nxt):], nxt]
            if nxt not in state and (found := visit(nxt)):
                return found
        path.pop()
        state[node] = 2
        return None

    for node in sorted(graph):
        if node not in state and (found := visit(node)):
            return found
    return None


FOLDERS = sorted({p.parent for top in ("analytics", "collectors", "dashboards") for p in (ROOT / top).rglob("*.py")}
                 | {ROOT / "preemptlens", ROOT / "preemptlens" / "commands"})


@pytest.mark.parametrize("folder", FOLDERS, ids=lambda p: str(p.relative_to(ROOT)))
def test_no_import_circle_inside_a_folder(folder: Path) -> None:
    """Within one folder the modules import one way, type-only imports included: a circle means a module
    holds what the ones below it need (as tuning.py held the replay's settings), and belongs at the foot."""
    modules = {_module_of(p): p for p in folder.glob("*.py")}
    graph: dict[str, set[str]] = {}
    for name, path in modules.items():
        graph[name] = {m for m in _imports(path) if m in modules and m != name}
    assert _cycle(graph) is None


def test_the_circle_finder_finds_one() -> None:
    assert _cycle({"a": {"b"}, "b": {"c"}, "c": {"a"}}) == ["a", "b", "c", "a"]
    assert _cycle({"a": {"b"}, "b": {"c"}, "c": set()}) is None
