"""The documentation's shown commands and outputs, found by their markers.

A fenced block in ``docs/`` (or README.md) that shows a command's output carries a marker on
the line before it (docs/development.md, "Docs that are run", is the convention):

    <!-- docs-test: transcript -->
    <!-- docs-test: transcript files=/tmp/traffic.jsonl,docs/advise-demo.png -->

In a transcript, a line starting with ``$ `` is a command (a trailing ``\\`` continues it on
the next line), optionally after ``NAME=VALUE`` environment assignments; the lines after it,
up to the next command or the end of the block, are exactly what it prints to stdout,
trailing spaces aside. A command followed at once by another shows no output, and its output
is not compared. ``files=`` names paths that the test replaces by fresh paths in a temporary
directory, in the commands and, back again, in the output.

A table of worked numbers carries ``<!-- docs-test: table name=NAME -->``; the test that
computes its rows is registered under NAME in ``tests/docs/test_tables.py``.

``python -m tests.support.doc_blocks`` rewrites every transcript's output with what its
commands print now, for when an output changes on purpose.
"""

from __future__ import annotations

import io
import os
import re
import shlex
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path

from sidecar.cli.commands import main

ROOT = Path(__file__).resolve().parents[2]
DOCS = ROOT / "docs"

MARKER = re.compile(r"^<!-- docs-test: (?P<kind>[a-z-]+)(?P<options>(?: [a-z]+=\S+)*) -->$")
FENCE_LINE = re.compile(r"^(?P<ticks>`{3,})")
ENV_ASSIGNMENT = re.compile(r"^[A-Z_][A-Z0-9_]*=")


@dataclass(frozen=True, slots=True)
class Command:
    """One ``$`` line of a transcript: its environment, its argv and the output shown."""

    env: dict[str, str]
    argv: list[str]
    shown: list[str] | None  # None: the block shows no output for it
    source: tuple[str, ...] = ()  # the command's own lines, as the page writes them


@dataclass(frozen=True, slots=True)
class Block:
    """One fenced block: where it is, its marker (if any) and its lines."""

    page: str  # relative to the repository root
    line: int  # 1-based line of the opening fence
    kind: str | None
    options: dict[str, str] = field(default_factory=dict)
    lines: tuple[str, ...] = ()

    @property
    def name(self) -> str:
        """``docs/commands.md:10``: for test ids and failure messages."""
        return f"{self.page}:{self.line}"

    def shows_a_prompt(self) -> bool:
        """Whether the block shows a ``$`` command, which makes it a transcript.

        A block that holds a fence itself shows Markdown source (an example of a marked block),
        not a session.
        """
        if any(FENCE_LINE.match(line) for line in self.lines):
            return False
        return any(line.startswith("$ ") for line in self.lines)

    def commands(self) -> list[Command]:
        """The transcript's commands, each with the output the page shows for it."""
        commands: list[Command] = []
        lines = list(self.lines)
        at = 0
        while at < len(lines):
            if not lines[at].startswith("$ "):
                raise ValueError(f"{self.name}: output before any command: {lines[at]!r}")
            first, text = at, lines[at][2:]
            while text.endswith("\\"):
                at += 1
                text = text[:-1] + " " + lines[at].strip()
            at += 1
            source = tuple(lines[first:at])
            shown: list[str] = []
            while at < len(lines) and not lines[at].startswith("$ "):
                shown.append(lines[at].rstrip())
                at += 1
            words = shlex.split(text)
            env: dict[str, str] = {}
            while words and ENV_ASSIGNMENT.match(words[0]):
                name, _, value = words.pop(0).partition("=")
                env[name] = value
            commands.append(Command(env=env, argv=words, shown=shown or None, source=source))
        return commands


def pages() -> list[Path]:
    """Every Markdown page of the site, and the README."""
    return [*sorted(DOCS.rglob("*.md")), ROOT / "README.md"]


def blocks(path: Path) -> list[Block]:
    """The fenced blocks of one page, with the marker on the line before each, if any."""
    return _read(path)[0]


def _read(path: Path) -> tuple[list[Block], list[tuple[int, str]]]:
    """A page's fenced blocks, and the ``docs-test`` comments outside them (line, text).

    A fence closes on a line of at least as many backticks as opened it, as in CommonMark, so a
    page may show a marked block inside a longer fence without it being one.
    """
    text = path.read_text(encoding="utf-8").splitlines()
    found: list[Block] = []
    comments: list[tuple[int, str]] = []
    at = 0
    while at < len(text):
        opening = FENCE_LINE.match(text[at])
        if opening is None:
            if text[at].lstrip().startswith("<!-- docs-test"):
                comments.append((at + 1, text[at]))
            at += 1
            continue
        start, ticks = at, len(opening["ticks"])
        at += 1
        while at < len(text) and not _closes(text[at], ticks):
            at += 1
        marker = MARKER.match(text[start - 1]) if start else None
        options: dict[str, str] = {}
        if marker is not None:
            options = dict(word.split("=", 1) for word in marker["options"].split())
        found.append(
            Block(
                page=str(path.relative_to(ROOT)),
                line=start + 1,
                kind=marker["kind"] if marker else None,
                options=options,
                lines=tuple(text[start + 1 : at]),
            )
        )
        at += 1
    return found, comments


def _closes(line: str, ticks: int) -> bool:
    stripped = line.strip()
    return len(stripped) >= ticks and set(stripped) == {"`"}


def all_blocks() -> list[Block]:
    """Every fenced block of every page."""
    return [block for path in pages() for block in blocks(path)]


def markers(path: Path) -> list[tuple[int, str]]:
    """Every line of a page that opens a ``docs-test`` comment outside its fenced blocks."""
    return _read(path)[1]


def marked_tables(kind_name: str) -> list[tuple[str, list[list[str]]]]:
    """The tables marked ``<!-- docs-test: table name=NAME -->``: (page:line, rows of cells).

    The header row and the ``|---|`` rule are left out; cells are stripped.
    """
    found: list[tuple[str, list[list[str]]]] = []
    for path in pages():
        lines = path.read_text(encoding="utf-8").splitlines()
        for number, text in markers(path):
            match = MARKER.match(text)
            if match is None or match["kind"] != "table":
                continue
            options = dict(word.split("=", 1) for word in match["options"].split())
            if options.get("name") != kind_name:
                continue
            rows: list[list[str]] = []
            at = number  # the line after the marker's (``number`` counts from 1)
            while at < len(lines) and lines[at].startswith("|"):
                rows.append([cell.strip() for cell in lines[at].strip().strip("|").split("|")])
                at += 1
            found.append((f"{path.relative_to(ROOT)}:{number}", rows[2:]))
    return found


def run_transcript(block: Block, workdir: Path) -> list[tuple[Command, list[str]]]:
    """Run a transcript's commands in process, in order: each with what it printed.

    ``files=`` paths become fresh paths in ``workdir`` (and are written back as the page shows
    them in the output); the ``SIDECAR_*`` environment is only what the command sets.
    """
    files = [path for path in block.options.get("files", "").split(",") if path]
    fresh = {path: str(workdir / Path(path).name) for path in files}

    def inward(text: str) -> str:
        for shown, real in fresh.items():
            text = text.replace(shown, real)
        return text

    def outward(text: str) -> str:
        for shown, real in fresh.items():
            text = text.replace(real, shown)
        return text

    results: list[tuple[Command, list[str]]] = []
    for command in block.commands():
        if command.argv[:1] != ["vlm-sidecar"]:
            raise ValueError(f"{block.name}: only vlm-sidecar commands are run")
        out = io.StringIO()
        with _environment({name: inward(value) for name, value in command.env.items()}):
            main([inward(word) for word in command.argv[1:]], out)
        printed = outward(out.getvalue()).rstrip("\n").splitlines()
        results.append((command, [line.rstrip() for line in printed]))
    return results


@contextmanager
def _environment(env: dict[str, str]) -> Iterator[None]:
    """Only ``env`` of the ``SIDECAR_*`` variables for the while, the rest as it was."""
    saved = {name: value for name, value in os.environ.items() if name.startswith("SIDECAR_")}
    for name in saved:
        del os.environ[name]
    os.environ.update(env)
    try:
        yield
    finally:
        for name in [name for name in os.environ if name.startswith("SIDECAR_")]:
            del os.environ[name]
        os.environ.update(saved)


def rewritten(block: Block, results: list[tuple[Command, list[str]]]) -> list[str]:
    """The block's lines with each shown output replaced by what its command printed."""
    lines: list[str] = []
    for command, printed in results:
        lines.extend(command.source)
        if command.shown is not None:
            lines.extend(printed)
    return lines


def write_transcripts(workdir: Path) -> list[str]:
    """Rewrite every transcript's shown output in place with what it prints now: the blocks
    changed. ``python -m tests.support.doc_blocks`` runs it; review the diff before committing.
    """
    changed: list[str] = []
    for path in pages():
        text = path.read_text(encoding="utf-8").splitlines()
        before = len(changed)
        for block in reversed([b for b in blocks(path) if b.kind == "transcript"]):
            scratch = workdir / f"{path.stem}-{block.line}"
            scratch.mkdir(parents=True, exist_ok=True)
            new = rewritten(block, run_transcript(block, scratch))
            if tuple(new) != block.lines:
                text[block.line : block.line + len(block.lines)] = new
                changed.append(block.name)
        if len(changed) > before:
            path.write_text("\n".join(text) + "\n", encoding="utf-8")
    return changed


if __name__ == "__main__":
    import tempfile

    with tempfile.TemporaryDirectory() as scratch:
        for name in write_transcripts(Path(scratch)):
            print(f"rewrote {name}")
