"""Every name the docs use is one the repository has: paths, ``SIDECAR_*`` variables and
``vlm_sidecar_*`` metrics. A rename in the code fails here until the pages follow it."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from sidecar.settings import Settings
from tests.support.doc_blocks import DOCS, ROOT, pages

PAGES = [*pages(), ROOT / "SECURITY.md"]
TOP_FOLDERS = ("sidecar", "tests", "bench", "deploy", "dashboards", "helm", "fuzz", "docs")
PATH = re.compile(rf"`((?:{'|'.join(TOP_FOLDERS)})/[^`\s]*)`")
VARIABLE = re.compile(r"\bSIDECAR_[A-Z0-9_]+\*?")  # SIDECAR_SATURATION_* names a prefix
PLACEHOLDERS = {"SIDECAR_NAME"}  # as in ``--set SIDECAR_NAME=VALUE``
METRIC = re.compile(r"\bvlm_sidecar_[a-z0-9_]*[a-z0-9]\b")
SERIES_SUFFIXES = re.compile(r"_(bucket|sum|count|created)$")


def _ids(page: Path) -> str:
    return str(page.relative_to(ROOT))


@pytest.mark.parametrize("page", PAGES, ids=_ids)
def test_every_path_a_page_names_exists(page: Path) -> None:
    missing = []
    for named in PATH.findall(page.read_text(encoding="utf-8")):
        path = named.partition("::")[0].rstrip(".,;:")  # a pytest node id names its file
        if "<" in path or "{" in path:  # a pattern such as sidecar/vision/<family>.py
            continue
        found = list(ROOT.glob(path)) if "*" in path else [ROOT / path]
        if not any(candidate.exists() for candidate in found):
            missing.append(path)
    assert missing == []


@pytest.mark.parametrize("page", PAGES, ids=_ids)
def test_every_sidecar_variable_a_page_names_is_a_setting(page: Path) -> None:
    settings = {f"SIDECAR_{name.upper()}" for name in Settings.model_fields}
    unknown = []
    for named in VARIABLE.findall(page.read_text(encoding="utf-8")):
        name = named.removesuffix("*")
        if name in PLACEHOLDERS:
            continue
        prefix = name.endswith("_")  # SIDECAR_SATURATION_*, SIDECAR_<NAME>
        if not (any(s.startswith(name) for s in settings) if prefix else name in settings):
            unknown.append(named)
    assert unknown == []


@pytest.mark.parametrize("page", PAGES, ids=_ids)
def test_every_metric_a_page_names_is_in_the_metrics_table(page: Path) -> None:
    table = set(
        re.findall(r"^\| `(vlm_sidecar_[a-z0-9_]+)`", (DOCS / "metrics.md").read_text(), re.M)
    )
    unknown = []
    for name in METRIC.findall(page.read_text(encoding="utf-8")):
        family = SERIES_SUFFIXES.sub("", name)
        if not {name, family, f"{family}_total"} & table:
            unknown.append(name)
    assert unknown == []


# The glossary's words that are the checkpoint's or vLLM's, not the sidecar's code.
NOT_CODE = {"Qwen2_5_VLForConditionalGeneration", "architectures", "config.json"}
IDENTIFIER = re.compile(r"[A-Za-z_][A-Za-z0-9_]*(?:\.[A-Za-z_][A-Za-z0-9_]*)*")


def test_every_code_name_in_the_glossary_is_in_the_code() -> None:
    code = "\n".join(path.read_text(encoding="utf-8") for path in (ROOT / "sidecar").rglob("*.py"))
    words = set(re.findall(r"[A-Za-z_][A-Za-z0-9_]*", code))
    glossary = (DOCS / "glossary.md").read_text(encoding="utf-8")
    named = {
        name
        for name in re.findall(r"`([^`]+)`", glossary)
        if IDENTIFIER.fullmatch(name) and not name.startswith(("SIDECAR_", "vlm_sidecar_"))
    }
    gone = sorted(
        name for name in named - NOT_CODE if not all(part in words for part in name.split("."))
    )
    assert gone == [], "renamed in the code: update docs/glossary.md"
