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
    ("sidecar.body", 1),
    ("sidecar.profiles", 2),
    ("sidecar.text", 2),
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
    assert len(entries) <= 22, entries


# --- tests mirror the package -----------------------------------------------------------------
# Every module with logic (a function or method of its own) has its unit test file at the same
# place under tests/unit: ``sidecar/a/b.py`` in ``tests/unit/a/test_b.py``, a package's
# ``__init__.py`` in ``tests/unit/a/test_a.py``. A second file about one aspect of a module is
# ``test_<module>_<aspect>.py``. Modules with no function (enums, dataclasses, re-exports)
# need none.

UNIT_TESTS = Path(__file__).resolve().parent

# Modules with functions but no logic a unit test could hold.
NEEDS_NO_UNIT_TEST = {
    "sidecar.__main__": "calls cli.commands.main; the CLI tests run it",
}
# Unit test files about the package as a whole rather than one module.
ABOUT_THE_PACKAGE = {"test_layout.py": "this file: the layout and the mirror"}
# Modules other work added before their tests: each one names who owes its file.
NOT_YET_MIRRORED: dict[str, str] = {}


def has_logic(path: Path) -> bool:
    tree = ast.parse(path.read_text(encoding="utf-8"))
    return any(isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef) for node in ast.walk(tree))


def mirrored_test(module: str) -> Path:
    """Where ``module``'s unit tests live."""
    parts = module.split(".")[1:]
    if modules()[module].name == "__init__.py":
        return UNIT_TESTS.joinpath(*parts, f"test_{parts[-1]}.py")
    return UNIT_TESTS.joinpath(*parts[:-1], f"test_{parts[-1]}.py")


def module_tested_by(test_file: Path) -> str | None:
    """The module a unit test file is about (its name, or ``<module>_<aspect>``), if any."""
    folder = test_file.parent.relative_to(UNIT_TESTS).parts
    package = ".".join(("sidecar", *folder))
    name = test_file.stem.removeprefix("test_")
    found = modules()
    if folder and (name == folder[-1] or name.startswith(folder[-1] + "_")) and package in found:
        return package  # the package's __init__, or an aspect of it
    # The whole name first, then each prefix that ends before an underscore, longest first.
    candidates = [f"{package}.{name}"] + [
        f"{package}.{name[:at]}" for at in range(len(name) - 1, 0, -1) if name[at] == "_"
    ]
    return next((module for module in candidates if module in found), None)


def test_layout_every_module_with_logic_has_its_mirrored_unit_test_file() -> None:
    missing = [
        f"{module}: {mirrored_test(module).relative_to(UNIT_TESTS.parents[1])}"
        for module, path in modules().items()
        if module != "sidecar"
        and module not in NEEDS_NO_UNIT_TEST
        and module not in NOT_YET_MIRRORED
        and has_logic(path)
        and not mirrored_test(module).exists()
    ]
    assert not missing, "modules without their unit test file:\n" + "\n".join(missing)


def test_layout_every_unit_test_file_is_about_a_module() -> None:
    stray = [
        str(path.relative_to(UNIT_TESTS))
        for path in sorted(UNIT_TESTS.rglob("test_*.py"))
        if path.name not in ABOUT_THE_PACKAGE and module_tested_by(path) is None
    ]
    assert not stray, "unit test files named for no module of sidecar/: " + ", ".join(stray)


def test_layout_the_exemptions_name_modules_that_exist_and_still_need_them() -> None:
    found = modules()
    for module in (*NEEDS_NO_UNIT_TEST, *NOT_YET_MIRRORED):
        assert module in found, f"{module} is exempted but no longer exists"
    for module in NOT_YET_MIRRORED:
        assert not mirrored_test(module).exists(), f"{module} has its tests: drop its exemption"
