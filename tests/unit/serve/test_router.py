"""serve.router: each request inspected, forwarded or refused by what its path is, with a real
sidecar in front of the stand-in on 127.0.0.1; in shadow mode nothing is refused, only counted.

The route table's end-to-end checks (every route priced, admin and unknown routes, Expect:
100-continue) are ``tests/e2e/test_route_table.py``; these are the router's own decisions."""

from __future__ import annotations

import aiohttp
import pytest

from sidecar.observe.router_load import KV_USAGE, REQUESTS_WAITING
from sidecar.standin import RecordedRequest, StandinServer
from tests.support.imaging import chat_with_images, jpeg_uri
from tests.support.proxy_helpers import DECISION, post, sample, url_of
from tests.support.raw_http import RawConnection, request_head
from tests.support.sidecars import SidecarFactory

UNINSPECTED = "vlm_sidecar_uninspected_requests_total"


def _paths(requests: list[RecordedRequest]) -> list[str]:
    return [recorded.path for recorded in requests]


@pytest.mark.parametrize(
    ("path", "status", "kind"),
    [("/sleep?level=1", 403, "admin"), ("/v1/not-a-route", 404, "unknown")],
    ids=["admin", "unknown"],
)
async def test_router_refuses_in_enforce_and_forwards_in_shadow_counting_both(
    make_sidecar: SidecarFactory,
    session: aiohttp.ClientSession,
    standin: StandinServer,
    path: str,
    status: int,
    kind: str,
) -> None:
    enforcing, shadowing = await make_sidecar(), await make_sidecar(mode="shadow")
    refused = await post(session, enforcing, {}, path)
    assert refused.status == status
    assert "error" in refused.json()
    assert standin.requests == []
    forwarded = await post(session, shadowing, {}, path)
    assert forwarded.status == 200
    assert _paths(standin.requests) == [path.partition("?")[0]]
    assert sample(enforcing, UNINSPECTED, kind=kind, action="refused") == 1
    assert sample(shadowing, UNINSPECTED, kind=kind, action="forwarded") == 1


async def test_router_inspects_only_a_post_to_an_inspected_route(
    make_sidecar: SidecarFactory, session: aiohttp.ClientSession
) -> None:
    sidecar = await make_sidecar()
    inspected = await post(session, sidecar, chat_with_images(jpeg_uri(64, 64)))
    assert inspected.headers[DECISION] == "admit"
    async with session.get(url_of(sidecar, "/v1/models")) as models:
        assert models.status == 200
        assert DECISION not in models.headers
        assert (await models.json())["data"][0]["id"]  # vLLM's answer, passed through


async def test_router_refuses_an_ambiguous_path_with_400_without_forwarding_it(
    make_sidecar: SidecarFactory, standin: StandinServer
) -> None:
    sidecar = await make_sidecar()
    connection = await RawConnection.open(sidecar.port)
    try:
        await connection.send(request_head("/v1/chat/../completions", content_length=2) + b"{}")
        reply = await connection.reply()
    finally:
        await connection.close()
    assert reply.status == 400
    assert "dot segment" in reply.json()["error"]["message"]
    assert standin.requests == []
    assert sample(sidecar, UNINSPECTED, kind="ambiguous", action="refused") == 1


async def test_router_answers_a_trailing_slash_with_a_redirect_naming_no_host(
    make_sidecar: SidecarFactory, session: aiohttp.ClientSession, standin: StandinServer
) -> None:
    sidecar = await make_sidecar()
    async with session.post(
        url_of(sidecar, "/v1/chat/completions/?x=1"), json={}, allow_redirects=False
    ) as response:
        assert response.status == 307
        assert response.headers["Location"] == "/v1/chat/completions?x=1"
    assert standin.requests == []


async def test_router_appends_the_router_gauges_to_vllms_metrics_once(
    make_sidecar: SidecarFactory, session: aiohttp.ClientSession
) -> None:
    sidecar = await make_sidecar()
    async with session.get(url_of(sidecar, "/metrics")) as response:
        assert response.status == 200
        text = await response.text()
    assert "vllm:num_requests_waiting" in text  # vLLM's own exposition, as served
    for gauge in (REQUESTS_WAITING, KV_USAGE):
        assert text.count(f"# TYPE {gauge} gauge") == 1
