"""README.md's map of the code names exactly what is there: every entry of ``sidecar/`` and of
``tests/``, and nothing else. (docs/development.md shows the same map, included from README.)"""

from __future__ import annotations

import re
from pathlib import Path

from tests.support.doc_blocks import ROOT

ENTRY = re.compile(r"^(?:[a-z_][a-z0-9_]*(?:\.py|/)|py\.typed)$")


def _map_lines() -> list[str]:
    readme = (ROOT / "README.md").read_text(encoding="utf-8")
    section = readme.split("[start:code-map]", 1)[1].split("[end:code-map]", 1)[0]
    inner = section.splitlines()[1:-1]  # the rest of the two marker lines
    return [line for line in inner if line and not line.startswith("```")]


def _on_disk(folder: Path) -> set[str]:
    return {
        entry.name + ("/" if entry.is_dir() else "")
        for entry in folder.iterdir()
        if entry.name != "__pycache__"
    }


def test_the_map_names_every_entry_of_sidecar_and_nothing_else() -> None:
    lines = _map_lines()
    assert lines[0] == "sidecar/"
    inside = lines[1 : next(at for at, line in enumerate(lines) if line.startswith("tests/"))]
    named = [word for line in inside for word in line.split() if ENTRY.match(word)]
    assert sorted(named) == sorted(set(named)), "the map names an entry twice"
    assert set(named) == _on_disk(ROOT / "sidecar")


def test_the_map_names_every_folder_of_tests() -> None:
    (line,) = [line for line in _map_lines() if line.startswith("tests/")]
    named = {word for word in line.split()[1:] if ENTRY.match(word)}
    folders = {name for name in _on_disk(ROOT / "tests") if name.endswith("/")}
    assert named == folders
