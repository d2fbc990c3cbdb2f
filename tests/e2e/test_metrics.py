"""The metrics contract end to end: names, labels, zero series, what one request records,
promtool's lint of the exposition, and docs/metrics.md's table against the registry."""

from __future__ import annotations

import asyncio
import re

import aiohttp
import orjson
import pytest
from prometheus_client import CollectorRegistry

from sidecar.observe.labels import VALID_OUTCOMES
from sidecar.routes import PRIMARY_ROUTES
from sidecar.serve.keys import LEDGER
from sidecar.serve.server import RunningSidecar
from sidecar.standin import StandinServer
from tests.support.imaging import chat_with_images, jpeg_uri
from tests.support.paths import ROOT
from tests.support.prometheus_tools import promtool
from tests.support.proxy_helpers import existing_sample as sample
from tests.support.proxy_helpers import fault, post
from tests.support.sidecars import SidecarFactory
from tests.support.waiting import eventually

METRICS_DOC = ROOT / "docs" / "metrics.md"
ROUTES = [route.label for route in PRIMARY_ROUTES]
# model_name: vLLM's served model name on the two router gauges, one value per sidecar;
# band: the operator's priority bands, 0 and other.
BOUNDED_LABELS = {
    "model", "route", "decision", "reason", "format", "source", "kind", "action", "model_name",
    "band",
    "outcome",
}  # fmt: skip
INFO_LABELS = {"model", "family", "source", "vision_rule", "text_tokens", "mode"}
CHAT = "chat_completions"


def registry_of(sidecar: RunningSidecar) -> CollectorRegistry:
    registry: CollectorRegistry = sidecar.registry
    return registry


def exposed_families(registry: CollectorRegistry) -> dict[str, tuple[str, set[str]]]:
    """Exposed family name -> (type, label names), as a scrape sees them."""
    suffix = {"counter": "_total", "info": "_info"}
    families = {}
    for family in registry.collect():
        labels = {name for sample in family.samples for name in sample.labels} - {"le"}
        families[family.name + suffix.get(family.type, "")] = (family.type, labels)
    return families


def documented_metrics_table() -> dict[str, tuple[str, set[str]]]:
    """The metrics table of docs/metrics.md: name -> (type, label names)."""
    rows = {}
    for line in METRICS_DOC.read_text(encoding="utf-8").splitlines():
        cells = [cell.strip() for cell in line.strip().strip("|").split("|")]
        if len(cells) >= 4 and cells[0].startswith("`vlm_sidecar_"):
            rows[cells[0].strip("`")] = (cells[1], set(re.findall(r"`([a-z_]+)`", cells[2])))
    return rows


async def test_metrics_exposition_passes_promtool_check_metrics(
    make_sidecar: SidecarFactory, session: aiohttp.ClientSession
) -> None:
    sidecar = await make_sidecar(max_image_tokens=1000, over_budget_action="downscale")
    await post(session, sidecar, chat_with_images(jpeg_uri(1920, 1080), max_tokens=8))
    async with session.get(f"http://127.0.0.1:{sidecar.metrics_port}/metrics") as response:
        exposition = await response.read()
    assert b"vlm_sidecar_requests_total" in exposition
    await promtool("check", "metrics", stdin=exposition)


async def test_metrics_families_are_prefixed_and_labels_bounded(
    make_sidecar: SidecarFactory,
) -> None:
    families = exposed_families(registry_of(await make_sidecar()))
    assert families
    for name, (kind, labels) in families.items():
        assert name.startswith("vlm_sidecar_"), name
        allowed = INFO_LABELS if kind == "info" else BOUNDED_LABELS
        assert labels <= allowed, (name, labels - allowed)
        assert "model" in labels, name


async def test_metrics_every_main_route_outcome_exists_at_zero_before_any_request(
    make_sidecar: SidecarFactory,
) -> None:
    # Which outcomes exist is proven by producing each one: tests/e2e/test_outcomes.py.
    sidecar = await make_sidecar()
    for route in ROUTES:
        for decision, reason in VALID_OUTCOMES:
            labels = {"route": route, "decision": decision, "reason": reason.value}
            assert sample(sidecar, "vlm_sidecar_requests_total", **labels) == 0
        assert sample(sidecar, "vlm_sidecar_request_visual_tokens_count", route=route) == 0
    for kind in ("connect", "timeout", "reset", "status_5xx"):
        assert sample(sidecar, "vlm_sidecar_upstream_errors_total", kind=kind) == 0
    assert sample(sidecar, "vlm_sidecar_images_total", format="jpeg", source="data") == 0


async def test_metrics_record_one_admitted_request_with_its_usage(
    make_sidecar: SidecarFactory, session: aiohttp.ClientSession
) -> None:
    sidecar = await make_sidecar()
    reply = await post(session, sidecar, chat_with_images(jpeg_uri(1920, 1080), max_tokens=8))
    assert reply.status == 200, reply.body
    usage = reply.json()["usage"]["prompt_tokens"]
    predicted = int(reply.headers["x-vlm-sidecar-prompt-tokens"])
    route = {"route": CHAT}
    outcome = {**route, "decision": "admit", "reason": "within_budget"}
    assert sample(sidecar, "vlm_sidecar_requests_total", **outcome) == 1
    visual = int(reply.headers["x-vlm-sidecar-visual-tokens"])
    assert sample(sidecar, "vlm_sidecar_request_visual_tokens_sum", **route) == visual
    kv_bytes = int(reply.headers["x-vlm-sidecar-kv-bytes"])
    assert sample(sidecar, "vlm_sidecar_request_kv_bytes_sum", **route) == kv_bytes
    assert sample(sidecar, "vlm_sidecar_request_images_sum", **route) == 1
    assert sample(sidecar, "vlm_sidecar_image_pixels_sum") == 1920 * 1080
    assert sample(sidecar, "vlm_sidecar_images_total", format="jpeg", source="data") == 1
    assert sample(sidecar, "vlm_sidecar_observed_prompt_tokens_sum", **route) == usage
    assert sample(sidecar, "vlm_sidecar_usage_predicted_prompt_tokens_total", **route) == predicted
    error = usage - predicted
    below = sample(sidecar, "vlm_sidecar_prompt_tokens_prediction_error_bucket", le="-1.0", **route)
    assert below == (1 if error <= -1 else 0)
    assert sample(sidecar, "vlm_sidecar_overhead_seconds_count", **route) == 1
    assert sample(sidecar, "vlm_sidecar_upstream_first_byte_seconds_count", **route) == 1
    assert sample(sidecar, "vlm_sidecar_request_duration_seconds_count", **route) == 1


@pytest.mark.parametrize(
    ("how", "kind", "decision", "reason"),
    [
        ("status=500", "status_5xx", "admit", "within_budget"),
        ("close", "connect", "reject", "upstream_error"),
    ],
    ids=["5xx-answer", "closed-before-answering"],
)
async def test_metrics_count_upstream_errors_by_kind(
    make_sidecar: SidecarFactory,
    session: aiohttp.ClientSession,
    how: str,
    kind: str,
    decision: str,
    reason: str,
) -> None:
    sidecar = await make_sidecar()
    await post(
        session, sidecar, chat_with_images(jpeg_uri(64, 64), max_tokens=8), headers=fault(how)
    )
    assert sample(sidecar, "vlm_sidecar_upstream_errors_total", kind=kind) == 1
    outcome = {"route": CHAT, "decision": decision, "reason": reason}
    assert sample(sidecar, "vlm_sidecar_requests_total", **outcome) == 1


async def test_metrics_compare_usage_with_the_original_request_in_shadow_mode(
    make_sidecar: SidecarFactory, standin: StandinServer, session: aiohttp.ClientSession
) -> None:
    sidecar = await make_sidecar(
        mode="shadow", max_image_tokens=1000, over_budget_action="downscale"
    )
    body = chat_with_images(jpeg_uri(1920, 1080), max_tokens=8)
    reply = await post(session, sidecar, body)
    assert reply.status == 200, reply.body
    assert orjson.loads(standin.requests[-1].body) == body  # shadow forwards the original
    route = {"route": CHAT}
    original = sample(sidecar, "vlm_sidecar_request_prompt_tokens_sum", **route)
    assert sample(sidecar, "vlm_sidecar_usage_predicted_prompt_tokens_total", **route) == original
    assert original == int(reply.headers["x-vlm-sidecar-prompt-tokens"])  # priced as forwarded


async def test_metrics_observe_the_wait_of_a_request_that_timed_out(
    make_sidecar: SidecarFactory, session: aiohttp.ClientSession
) -> None:
    body = chat_with_images(jpeg_uri(64, 64), max_tokens=8)
    probe = await make_sidecar()
    one_request = int((await post(session, probe, body)).headers["x-vlm-sidecar-kv-bytes"])
    sidecar = await make_sidecar(kv_budget_bytes=one_request * 3 // 2, queue_timeout_seconds=1)
    slow = asyncio.create_task(post(session, sidecar, body, headers=fault("delay=1.5")))
    await eventually(lambda: sidecar.app[LEDGER].inflight_requests > 0, timeout_seconds=2)
    assert (await post(session, sidecar, body)).status == 429
    assert (await slow).status == 200
    outcome = {"route": CHAT, "decision": "reject", "reason": "queue_timeout"}
    assert sample(sidecar, "vlm_sidecar_requests_total", **outcome) == 1
    assert sample(sidecar, "vlm_sidecar_queue_wait_seconds_count") == 1
    assert sample(sidecar, "vlm_sidecar_queue_wait_seconds_sum") >= 1.0


async def test_metrics_readme_table_lists_exactly_the_registry(
    make_sidecar: SidecarFactory,
) -> None:
    registry = exposed_families(registry_of(await make_sidecar()))
    documented = documented_metrics_table()
    assert sorted(set(registry) - set(documented)) == [], "metrics missing from docs/metrics.md"
    assert sorted(set(documented) - set(registry)) == [], "docs/metrics.md lists unknown metrics"
    for name, (kind, labels) in registry.items():
        assert documented[name] == (kind, labels), name
