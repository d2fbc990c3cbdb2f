"""The package's folders are its pipeline: nothing imports from a later stage, nothing cycles.

Stages are listed in ``sidecar/__init__.py``. Every import counts, also one inside a function
or under ``TYPE_CHECKING``: a cycle hidden there is still a cycle for the reader.
"""

from __future__ import annotations

import ast
import functools
from collections.abc import Iterator
from pathlib import Path

import pytest

PACKAGE = Path(__file__).resolve().parents[2] / "sidecar"

# The first matching prefix gives a module's stage.
STAGES: tuple[tuple[str, int], ...] = (
    ("sidecar.settings", 0),
    ("sidecar.errors", 0),
    ("sidecar.units", 0),
    ("sidecar.search", 0),
    ("sidecar.routes", 0),
    ("sidecar.images", 1),
    ("sidecar.vision", 1),
    ("sidecar.video", 1),
    ("sidecar.profiles", 2),
    ("sidecar.cost", 3),
    ("sidecar.admission", 4),
    ("sidecar.engine", 5),
    ("sidecar.observe", 6),
    ("sidecar.serve", 7),
    ("sidecar.standin", 7),
    ("sidecar.advisor", 7),
    ("sidecar.cli", 8),
    ("sidecar.__main__", 9),
)


def module_name(path: Path) -> str:
    parts = path.relative_to(PACKAGE.parent).with_suffix("").parts
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


def stage(module: str) -> int:
    for prefix, number in STAGES:
        if module == prefix or module.startswith(prefix + "."):
            return number
    if module == "sidecar":
        return 0
    raise AssertionError(f"{module} is in no stage: add it to STAGES and sidecar/__init__.py")


def modules() -> dict[str, Path]:
    return {module_name(path): path for path in sorted(PACKAGE.rglob("*.py"))}


def imports(path: Path, known: set[str]) -> Iterator[str]:
    """The sidecar modules ``path`` imports; ``from a import b`` counts ``a.b`` when that is a
    module (importing a submodule through its package), else ``a``."""
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
        if isinstance(node, ast.Import):
            names = [alias.name for alias in node.names]
        elif isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
            names = [
                f"{node.module}.{alias.name}"
                if f"{node.module}.{alias.name}" in known
                else node.module
                for alias in node.names
            ]
        else:
            continue
        for name in names:
            if name in known and name != "sidecar":
                yield name


@functools.cache
def graph() -> dict[str, set[str]]:
    found = modules()
    known = set(found)
    return {name: set(imports(path, known)) - {name} for name, path in found.items()}


def test_layout_every_module_belongs_to_a_stage() -> None:
    for name in modules():
        stage(name)


@pytest.mark.parametrize("module", sorted(modules()))
def test_layout_no_module_imports_from_a_later_stage(module: str) -> None:
    later = sorted(dep for dep in graph()[module] if stage(dep) > stage(module))
    assert not later, f"{module} (stage {stage(module)}) imports later stages: {later}"


def test_layout_has_no_import_cycle() -> None:
    edges = graph()
    state: dict[str, int] = {}  # 1: on the current path, 2: done
    path: list[str] = []

    def visit(node: str) -> None:
        state[node] = 1
        path.append(node)
        for dep in sorted(edges[node]):
            if state.get(dep) == 1:
                cycle = [*path[path.index(dep) :], dep]
                raise AssertionError("import cycle: " + " -> ".join(cycle))
            if dep not in state:
                visit(dep)
        path.pop()
        state[node] = 2

    for node in sorted(edges):
        if node not in state:
            visit(node)


def test_layout_top_level_reads_as_the_pipeline() -> None:
    entries = sorted(p.name for p in PACKAGE.iterdir() if p.name != "__pycache__")
    assert len(entries) <= 20, entries
