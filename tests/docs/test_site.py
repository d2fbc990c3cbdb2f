"""The documentation site: every page is in the nav, it builds with ``--strict``, and no link
leaves the repository.

``mkdocs build --strict`` (also ``make docs``) turns every broken link or anchor between pages
and every page left out of the nav into an error; README.md is outside the site, so its links
are checked here.
"""

from __future__ import annotations

import re
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import yaml

from tests.support.doc_blocks import DOCS, ROOT, pages

LINK = re.compile(r"\]\(([^)\s]+)\)")


def _nav_pages(entries: list[Any]) -> Iterator[str]:
    for entry in entries:
        if isinstance(entry, str):
            yield entry
        elif isinstance(entry, dict):
            for value in entry.values():
                yield from [value] if isinstance(value, str) else _nav_pages(value)


def _nav() -> list[str]:
    config = yaml.safe_load((ROOT / "mkdocs.yml").read_text(encoding="utf-8"))
    return list(_nav_pages(config["nav"]))


def test_every_page_under_docs_is_in_the_nav_once_and_every_nav_entry_exists() -> None:
    nav = _nav()
    on_disk = sorted(str(page.relative_to(DOCS)) for page in DOCS.rglob("*.md"))
    assert sorted(set(nav)) == sorted(nav), "a page is in the nav twice"
    assert sorted(nav) == on_disk


def test_the_site_builds_with_strict(tmp_path: Path) -> None:
    built = subprocess.run(  # noqa: S603 - mkdocs from this interpreter, fixed argv
        [sys.executable, "-m", "mkdocs", "build", "--strict", "--quiet", "--site-dir", tmp_path],
        cwd=ROOT,
        capture_output=True,
        text=True,
        env={"NO_MKDOCS_2_WARNING": "1", "PATH": "/usr/bin:/bin"},
        check=False,
    )
    assert built.returncode == 0, built.stderr
    assert (tmp_path / "glossary" / "index.html").is_file()


def test_readme_links_lead_to_files_of_the_repository() -> None:
    readme = ROOT / "README.md"
    targets = LINK.findall(readme.read_text(encoding="utf-8"))
    assert targets, "README.md links nothing"
    for target in targets:
        assert "://" not in target or target.startswith("https://"), target
        if "://" in target:
            continue
        path = (ROOT / target.partition("#")[0]).resolve()
        assert path.is_relative_to(ROOT), f"README.md links {target}, outside the repository"
        assert path.exists(), f"README.md links {target}, which does not exist"


def test_no_page_points_outside_the_repository() -> None:
    for page in [*pages(), ROOT / "SECURITY.md"]:
        text = page.read_text(encoding="utf-8")
        assert "../shared" not in text, page
        assert "/work/" not in text, page
        for target in LINK.findall(text):
            if "://" in target or target.startswith("#"):
                continue
            path = (page.parent / target.partition("#")[0]).resolve()
            assert path.is_relative_to(ROOT), f"{page.name} links {target}, outside the repository"
