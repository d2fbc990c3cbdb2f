"""Every command a page shows with its output is run, and prints exactly what the page shows.

The blocks are found by their ``<!-- docs-test: transcript -->`` marker (``tests/support/
doc_blocks.py`` states the convention); a block that shows a ``$`` prompt without one fails,
so no output can be shown that no test produces.
"""

from __future__ import annotations

import difflib
from pathlib import Path

import pytest

from tests.support.doc_blocks import MARKER, Block, all_blocks, markers, pages, run_transcript

KINDS = {"transcript": "```", "table": "|"}  # what the line after each marker opens
BLOCKS = all_blocks()
TRANSCRIPTS = [block for block in BLOCKS if block.kind == "transcript"]


def test_the_docs_show_transcripts_at_all() -> None:
    assert len(TRANSCRIPTS) >= 4, [block.name for block in TRANSCRIPTS]


def test_every_block_that_shows_a_prompt_is_a_marked_transcript() -> None:
    unmarked = [block.name for block in BLOCKS if block.shows_a_prompt() and block.kind is None]
    assert unmarked == [], "add <!-- docs-test: transcript --> before these blocks"


@pytest.mark.parametrize("page", pages(), ids=lambda page: page.name)
def test_every_marker_is_known_and_stands_before_a_block(page: Path) -> None:
    lines = page.read_text(encoding="utf-8").splitlines()
    for number, text in markers(page):
        match = MARKER.match(text)
        assert match is not None, f"{page.name}:{number}: malformed marker {text!r}"
        assert match["kind"] in KINDS, f"{page.name}:{number}: unknown kind {match['kind']!r}"
        following = lines[number] if number < len(lines) else ""
        opens = KINDS[match["kind"]]
        assert following.startswith(opens), f"{page.name}:{number}: no {opens} after the marker"


@pytest.mark.parametrize("block", TRANSCRIPTS, ids=lambda block: block.name)
def test_transcript_shows_what_its_commands_print(block: Block, tmp_path: Path) -> None:
    for command in block.commands():
        if command.argv[1:2] == ["demo"]:  # a test binds no fixed port
            assert _flag(command.argv, "--port") == _flag(command.argv, "--metrics-port") == "0"
    for command, printed in run_transcript(block, tmp_path):
        if command.shown is None:
            continue
        shown = list(command.shown)
        while shown and not shown[-1]:
            shown.pop()
        if printed != shown:
            diff = "\n".join(difflib.unified_diff(shown, printed, "shown", "printed", lineterm=""))
            pytest.fail(
                f"{block.name}: `{' '.join(command.argv)}` prints otherwise "
                f"(python -m tests.support.doc_blocks rewrites the docs):\n{diff}"
            )


def _flag(argv: list[str], name: str) -> str | None:
    return argv[argv.index(name) + 1] if name in argv else None
