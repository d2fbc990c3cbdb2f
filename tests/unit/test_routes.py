"""The route table covers every route vLLM 0.33 registers, each as the sidecar must treat it.

``tests/data/vllm_033_routes.json`` lists every route of vLLM 0.33.0's API server, read from
the wheel's ``vllm/entrypoints`` routers (flags and developer mode included), with how each
must be treated: INSPECT (it carries engine work or media), PASS (read-only), ADMIN.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from sidecar.routes import (
    ADMIN,
    PASSED,
    PRIMARY_ROUTES,
    ROUTE_LABELS,
    ROUTES_BY_PATH,
    PathKind,
    Route,
    Work,
    match_path,
)

VLLM_ROUTES = json.loads(
    (Path(__file__).resolve().parents[1] / "data" / "vllm_033_routes.json").read_text()
)


def concrete(path: str) -> str:
    """A path template with each ``{param}`` (and a ``*`` wildcard) filled in."""
    return (
        path.replace("{response_id}", "resp_1")
        .replace("{adapter_name}", "lora-1")
        .replace("{path}", "x")
        .replace("*", "x")
    )


@pytest.mark.parametrize(
    "entry", VLLM_ROUTES, ids=[f"{r['method']} {r['path']}" for r in VLLM_ROUTES]
)
def test_routes_every_vllm_route_has_the_treatment_its_work_needs(entry: dict[str, str]) -> None:
    path, method, wanted = concrete(entry["path"]), entry["method"], entry["class"]
    kind = match_path(path)
    if wanted == "INSPECT" and method in ("POST", "WS"):
        assert kind in (PathKind.INSPECTED, PathKind.UNPRICEABLE), path
    elif wanted == "ADMIN":
        assert kind is PathKind.ADMIN, path
    else:
        assert kind in (PathKind.PASSED, PathKind.METRICS), path


def test_routes_table_lists_only_routes_vllm_serves() -> None:
    served = {concrete(entry["path"]) for entry in VLLM_ROUTES}
    templated = {concrete(path) for path in (*PASSED, *ADMIN)}
    assert set(ROUTES_BY_PATH) <= served
    assert templated - served == set()


def test_routes_each_inspected_route_has_one_path_and_a_bounded_label() -> None:
    assert len(ROUTES_BY_PATH) == len(Route)
    assert len(ROUTE_LABELS) < 30
    assert set(PRIMARY_ROUTES) <= set(Route)


@pytest.mark.parametrize(
    ("route", "work"),
    [
        (Route.CHAT, Work.GENERATE),
        (Route.MESSAGES_COUNT_TOKENS, Work.RENDER),
        (Route.CHAT_RENDER, Work.RENDER),
        (Route.TOKENIZE, Work.RENDER),
        (Route.EMBEDDINGS, Work.POOL),
        (Route.RERANK, Work.POOL),
        (Route.GENERATIVE_SCORING, Work.GENERATE),
    ],
    ids=lambda value: str(value),
)
def test_routes_work_says_whether_vllm_holds_kv(route: Route, work: Work) -> None:
    assert route.work is work


def test_routes_anthropic_routes_answer_in_anthropics_shape() -> None:
    anthropic = {route for route in Route if route.anthropic}
    assert anthropic == {Route.MESSAGES, Route.MESSAGES_COUNT_TOKENS, Route.MESSAGES_RENDER}


def test_routes_docs_table_is_the_route_table() -> None:
    routes_doc = (Path(__file__).resolve().parents[2] / "docs" / "routes.md").read_text()
    table = routes_doc.split("<!-- routes-table: begin -->")[1].split("<!-- routes-table: end")[0]
    rows = [line.split("|")[1:5] for line in table.strip().splitlines()[2:]]
    listed = [(p.strip(" `"), label.strip(" `"), shape.strip()) for p, label, shape, _ in rows]
    assert listed == [(route.path, route.label, route.shape.value) for route in Route]
