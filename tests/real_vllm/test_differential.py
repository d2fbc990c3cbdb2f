"""The differential tier: bodies drawn from vLLM's own schema, answered by vLLM and by the
sidecar in front of it, must agree (``tests/real_vllm/differential.py`` says how).

Seeded, capped and time-boxed in CI: ``VLM_SIDECAR_DIFFERENTIAL_SEED``,
``VLM_SIDECAR_DIFFERENTIAL_EXAMPLES`` (draws per route, 40 by default) and
``VLM_SIDECAR_DIFFERENTIAL_SECONDS`` (per family, spread over the routes; 40 by default).
``make fuzz-vllm`` runs it long with ``VLM_SIDECAR_DIFFERENTIAL_DOCS=1``, which writes the
run's figures into ``docs/reliability.md``. The sidecar is its own, in front of the family's
vLLM, so the draws never reach the calibration figures the prediction tests read from the
tier's sidecar.
"""

from __future__ import annotations

import json
import os
import re
import time
from collections.abc import Callable, Iterator

import pytest

from tests.real_vllm import differential
from tests.real_vllm.client import get_text
from tests.real_vllm.conftest import SIDECAR_ENV, Stack
from tests.real_vllm.engine import LOG_DIR, ROOT, SidecarServer

# A seeded draw is the same sequence on every run. CI's draws are capped per route, so however
# fast the machine, they never pass the set a run without the time box has checked clean; the
# time box only shortens them on a slow one.
SECONDS = float(os.environ.get("VLM_SIDECAR_DIFFERENTIAL_SECONDS", "40"))
EXAMPLES_PER_ROUTE = int(os.environ.get("VLM_SIDECAR_DIFFERENTIAL_EXAMPLES", "40"))
SEED = int(os.environ.get("VLM_SIDECAR_DIFFERENTIAL_SEED", "20261202"))
WRITE_DOCS = os.environ.get("VLM_SIDECAR_DIFFERENTIAL_DOCS") == "1"
DOCS_PAGE = ROOT / "docs" / "reliability.md"
BEGIN, END = "<!-- differential: begin -->", "<!-- differential: end -->"


@pytest.fixture
def sidecar(stack: Stack) -> Iterator[SidecarServer]:
    """The family's own sidecar, with no budget a drawn body could exceed."""
    with _sidecar(stack, "sidecar-differential", SIDECAR_ENV) as server:
        yield server


@pytest.fixture
def budgeted(stack: Stack) -> Iterator[SidecarServer]:
    """A second sidecar in front of the same vLLM, with a prompt budget that many bodies pass
    and many exceed (nothing downscaled: the check is of the refusals)."""
    env = SIDECAR_ENV | {"SIDECAR_MAX_REQUEST_PROMPT_TOKENS": str(differential.PROMPT_BUDGET)}
    with _sidecar(stack, "sidecar-differential-budgeted", env) as server:
        yield server


def _sidecar(stack: Stack, log_name: str, env: dict[str, str]) -> SidecarServer:
    return SidecarServer(
        stack.vllm.base_url, stack.model_dir, env=env, log_name=f"{log_name}-{stack.name}"
    )


def _log_reader(server: SidecarServer) -> Callable[[str], dict[str, object] | None]:
    """The log line of one request, waited for (it is written as the answer ends)."""

    def log_line(request_id: str) -> dict[str, object] | None:
        deadline = time.monotonic() + 5
        while time.monotonic() < deadline:
            for record in reversed(server.log_records()):
                if record.get("request_id") == request_id:
                    return record
            time.sleep(0.05)
        return None

    return log_line


def test_the_sidecar_agrees_with_vllm_on_bodies_drawn_from_its_schema(
    stack: Stack, sidecar: SidecarServer, budgeted: SidecarServer
) -> None:
    spec = json.loads(get_text(stack.vllm.base_url + "/openapi.json"))
    routes = differential.inspected_routes(spec)
    assert "/v1/chat/completions" in routes

    tally = differential.run(
        spec,
        vllm_url=stack.vllm.base_url,
        sidecar_url=sidecar.base_url,
        model=stack.model,
        log_line=_log_reader(sidecar),
        budgeted_url=budgeted.base_url,
        budgeted_log_line=_log_reader(budgeted),
        seconds_per_route=SECONDS / len(routes),
        max_examples_per_route=EXAMPLES_PER_ROUTE,
        seed=SEED,
    )
    report = (
        f"### {stack.name}: {sum(tally.requests.values())} requests in {tally.seconds:.0f} s "
        f"(seed {SEED})\n\n{tally.table()}\n{tally.budget_table(differential.PROMPT_BUDGET)}\n"
        f"{tally.disagreement_table()}"
    )
    LOG_DIR.mkdir(parents=True, exist_ok=True)
    (LOG_DIR / f"differential-{stack.name}.md").write_text(report)
    (LOG_DIR / f"differential-{stack.name}-bodies.jsonl").write_text(
        "".join(f'{{"route": "{row.route}", "body": {row.body}}}\n' for row in tally.disagreements)
    )
    if WRITE_DOCS:
        _write_figures(stack.name, report)
    assert sum(tally.requests.values()) >= len(routes)
    # The budget was exercised both ways, so its checks could have failed.
    assert tally.budget_checks["forwarded"] > 0, report
    assert tally.budget_checks["refused, over the budget, exact"] > 0, report
    assert tally.disagreements == [], report


def _write_figures(family: str, report: str) -> None:
    """This family's section of the figures between the page's markers, the other kept."""
    page = DOCS_PAGE.read_text(encoding="utf-8")
    start, end = page.index(BEGIN) + len(BEGIN), page.index(END)
    found = re.findall(r"(### (\S+):.*?)(?=\n### |\Z)", page[start:end], re.S)
    kept = {name: text for text, name in found}
    kept[family] = report.strip()
    body = "\n\n".join(kept[name].strip() for name in sorted(kept))
    DOCS_PAGE.write_text(page[:start] + "\n" + body + "\n" + page[end:], encoding="utf-8")
