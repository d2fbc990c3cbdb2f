"""Ask the engine: the self-check against vLLM's ``/tokenize`` at start-up and after a restart,
``SIDECAR_RULE_MISMATCH`` in each mode, and ``SIDECAR_PRICING=engine`` with its bounds.

The stand-in's ``/tokenize`` counts images as a given rule does (``tests.support.engine_counts``):
an engine run with ``--mm-processor-kwargs max_pixels`` of 4 MP in front of which the sidecar
believes 1 MP is a misconfigured pod, one with 1 MP a healthy one.
"""

from __future__ import annotations

import asyncio
import dataclasses
from pathlib import Path
from typing import Any

import aiohttp
import orjson
import pytest
from prometheus_client import CollectorRegistry
from structlog.testing import capture_logs

from sidecar.engine.calibration import EngineCalibration
from sidecar.engine.rule_check import RuleCheck
from sidecar.errors import ConfigurationError
from sidecar.profiles import load_profile
from sidecar.serve.app import make_app
from sidecar.serve.keys import CALIBRATION
from sidecar.serve.server import RunningSidecar
from sidecar.settings import Settings
from sidecar.standin import StandinConfig, StandinServer, run_standin, start_standin
from tests.support.engine_counts import counting_images_by
from tests.support.imaging import chat_with_images, jpeg_uri
from tests.support.model_dirs import write_config_files
from tests.support.proxy_helpers import PROMPT_TOKENS, post
from tests.support.sidecars import QWEN, SidecarFactory
from tests.support.waiting import eventually

SIDECAR_MAX_PIXELS = 1_003_520
VLLM_MAX_PIXELS = 4_014_080
RULE = load_profile(QWEN).vision
POLL = {"engine_poll_seconds": 0.05}


def engine_with_max_pixels(standin: StandinServer, max_pixels: int) -> None:
    rule = RULE.with_pixel_range(None, max_pixels)
    standin.config = dataclasses.replace(standin.config, prompt_tokens_fn=counting_images_by(rule))


def calibration(sidecar: RunningSidecar) -> EngineCalibration:
    return sidecar.app[CALIBRATION]


def last_check(sidecar: RunningSidecar) -> RuleCheck:
    check = calibration(sidecar).last_check
    assert check is not None
    return check


def gauge(sidecar: RunningSidecar, name: str, **labels: str) -> float:
    registry: CollectorRegistry = sidecar.registry
    value = registry.get_sample_value(name, {"model": QWEN} | labels)
    assert value is not None, name
    return value


async def readiness(session: aiohttp.ClientSession, sidecar: RunningSidecar) -> tuple[int, Any]:
    async with session.get(f"http://127.0.0.1:{sidecar.metrics_port}/readyz") as response:
        return response.status, await response.json()


async def test_an_engine_configured_as_the_sidecar_passes_the_check(
    make_sidecar: SidecarFactory, standin: StandinServer
) -> None:
    engine_with_max_pixels(standin, SIDECAR_MAX_PIXELS)
    sidecar = await make_sidecar(max_pixels=SIDECAR_MAX_PIXELS, **POLL)
    await eventually(lambda: calibration(sidecar).last_check is not None)
    assert gauge(sidecar, "vlm_sidecar_rule_check_mismatches") == 0
    assert gauge(sidecar, "vlm_sidecar_rule_check_timestamp_seconds") > 0
    assert gauge(sidecar, "vlm_sidecar_engine_pricing") == 0
    assert standin.requests == []  # the check is not traffic
    assert len(standin.calibrations) == len(last_check(sidecar).sizes) + 1


async def test_warn_logs_each_size_with_both_counts_and_the_cause_and_stays_ready(
    make_sidecar: SidecarFactory, standin: StandinServer, session: aiohttp.ClientSession
) -> None:
    engine_with_max_pixels(standin, VLLM_MAX_PIXELS)
    with capture_logs() as logs:
        sidecar = await make_sidecar(max_pixels=SIDECAR_MAX_PIXELS, **POLL)
        await eventually(lambda: calibration(sidecar).last_check is not None)
    mismatches = [line for line in logs if line["event"] == "rule_check.mismatch"]
    assert len(mismatches) == gauge(sidecar, "vlm_sidecar_rule_check_mismatches") > 0
    over = next(line for line in mismatches if line["case"] == "over max_pixels")
    assert over["engine_prompt_tokens"] > over["rule_prompt_tokens"]
    assert "SIDECAR_MAX_PIXELS must equal vLLM's" in over["likely_cause"]
    assert (await readiness(session, sidecar))[0] == 200
    # The rule still prices: a 2 MP image at the sidecar's 1 MP cap, not vLLM's 4 MP.
    capped = RULE.with_pixel_range(None, SIDECAR_MAX_PIXELS).image_tokens(1680, 1260)
    assert await image_share(session, sidecar, 1680, 1260) == capped.prompt_tokens
    assert gauge(sidecar, "vlm_sidecar_engine_pricing") == 0


async def image_share(
    session: aiohttp.ClientSession, sidecar: RunningSidecar, width: int, height: int
) -> int:
    """Predicted prompt tokens of a chat with one image, minus those of the same chat without."""
    with_image = await post(session, sidecar, chat_with_images(jpeg_uri(width, height)))
    without = await post(session, sidecar, chat_with_images())
    assert with_image.status == without.status == 200
    return int(with_image.headers[PROMPT_TOKENS]) - int(without.headers[PROMPT_TOKENS])


async def test_engine_mode_prices_through_vllm_after_a_failed_check(
    make_sidecar: SidecarFactory, standin: StandinServer, session: aiohttp.ClientSession
) -> None:
    engine_with_max_pixels(standin, VLLM_MAX_PIXELS)
    sidecar = await make_sidecar(max_pixels=SIDECAR_MAX_PIXELS, rule_mismatch="engine", **POLL)
    await eventually(lambda: calibration(sidecar).last_check is not None)
    assert gauge(sidecar, "vlm_sidecar_engine_pricing") == 1
    image = RULE.with_pixel_range(None, VLLM_MAX_PIXELS).image_tokens(1680, 1260)
    # vLLM's count of the image, asked once and then remembered.
    assert await image_share(session, sidecar, 1680, 1260) == image.prompt_tokens
    assert await image_share(session, sidecar, 1680, 1260) == image.prompt_tokens
    outcomes = {o: gauge(sidecar, "vlm_sidecar_engine_calibrations_total", outcome=o)
                for o in ("answered", "hit")}  # fmt: skip
    assert outcomes == {"answered": 1, "hit": 1}


async def test_refuse_mode_is_not_ready_while_the_rule_disagrees(
    make_sidecar: SidecarFactory, standin: StandinServer, session: aiohttp.ClientSession
) -> None:
    engine_with_max_pixels(standin, VLLM_MAX_PIXELS)
    sidecar = await make_sidecar(max_pixels=SIDECAR_MAX_PIXELS, rule_mismatch="refuse", **POLL)
    await eventually(lambda: calibration(sidecar).last_check is not None)
    status, answer = await readiness(session, sidecar)
    assert status == 503
    assert "rule check" in answer["detail"]


async def test_refuse_mode_never_holds_a_shadow_sidecar(
    make_sidecar: SidecarFactory, standin: StandinServer, session: aiohttp.ClientSession
) -> None:
    engine_with_max_pixels(standin, VLLM_MAX_PIXELS)
    sidecar = await make_sidecar(
        max_pixels=SIDECAR_MAX_PIXELS, rule_mismatch="refuse", mode="shadow", **POLL
    )
    await eventually(lambda: calibration(sidecar).last_check is not None)
    assert gauge(sidecar, "vlm_sidecar_rule_check_mismatches") > 0
    assert (await readiness(session, sidecar))[0] == 200


async def test_an_engine_restart_runs_the_check_again(
    make_sidecar: SidecarFactory, session: aiohttp.ClientSession
) -> None:
    first = await start_standin(StandinConfig())
    engine_with_max_pixels(first, SIDECAR_MAX_PIXELS)
    port = first.port
    sidecar = await make_sidecar(
        upstream_url=first.url, max_pixels=SIDECAR_MAX_PIXELS, rule_mismatch="refuse", **POLL
    )
    await eventually(lambda: calibration(sidecar).last_check is not None)
    assert (await readiness(session, sidecar))[0] == 200
    checked_at = last_check(sidecar).checked_at_unix_seconds
    await first.close()
    await asyncio.sleep(0.3)  # a few polls find it down, as vLLM is during a restart
    assert calibration(sidecar).connections == 1
    # The engine comes back with another pixel cap: the check sees it, readiness follows.
    async with run_standin(StandinConfig(), port=port) as second:
        engine_with_max_pixels(second, VLLM_MAX_PIXELS)
        await eventually(lambda: calibration(sidecar).connections == 2, timeout_seconds=5)
        await eventually(lambda: calibration(sidecar).mismatches > 0, timeout_seconds=5)
        assert last_check(sidecar).checked_at_unix_seconds > checked_at
        assert (await readiness(session, sidecar))[0] == 503


async def test_engine_pricing_refuses_a_size_vllm_refuses_in_its_words(
    make_sidecar: SidecarFactory, standin: StandinServer, session: aiohttp.ClientSession
) -> None:
    engine_with_max_pixels(standin, SIDECAR_MAX_PIXELS)
    sidecar = await make_sidecar(pricing="engine", **POLL)
    await eventually(lambda: calibration(sidecar).last_check is not None)
    reply = await post(session, sidecar, chat_with_images(jpeg_uri(6000, 28)))
    assert reply.status == 400
    assert "vLLM refuses this size" in reply.json()["error"]["message"]
    assert standin.requests == []


def fancy_model_dir(directory: Path) -> Path:
    """A model directory of a family the sidecar has no rule for (Qwen's configs renamed to an
    architecture vLLM's registry does not name, which vLLM serves through Transformers)."""
    write_config_files(directory, QWEN)
    config = orjson.loads((directory / "config.json").read_bytes())
    renamed = {"architectures": ["FancyVlForConditionalGeneration"], "model_type": "fancy_vl"}
    (directory / "config.json").write_bytes(orjson.dumps(config | renamed))
    return directory


async def test_a_family_without_a_rule_is_priced_exactly_through_vllm(
    make_sidecar: SidecarFactory,
    standin: StandinServer,
    session: aiohttp.ClientSession,
    tmp_path: Path,
) -> None:
    engine_with_max_pixels(standin, VLLM_MAX_PIXELS)  # the engine's processor, whatever it is
    sidecar = await make_sidecar(model=str(fancy_model_dir(tmp_path / "fancy")), **POLL)
    assert gauge(sidecar, "vlm_sidecar_engine_pricing", model="fancy") == 1
    image = RULE.with_pixel_range(None, VLLM_MAX_PIXELS).image_tokens(1680, 1260)
    await eventually(lambda: calibration(sidecar).connections == 1)
    assert await image_share(session, sidecar, 1680, 1260) == image.prompt_tokens
    assert calibration(sidecar).last_check is None  # no rule to check


async def test_a_family_without_a_rule_cannot_start_under_pricing_rule(tmp_path: Path) -> None:
    directory = fancy_model_dir(tmp_path / "fancy")
    settings = Settings.model_validate({"model": str(directory), "pricing": "rule"})
    with pytest.raises(ConfigurationError, match="FancyVlForConditionalGeneration"):
        make_app(settings)


async def test_shadow_mode_never_waits_for_vllms_count(
    make_sidecar: SidecarFactory, standin: StandinServer, session: aiohttp.ClientSession
) -> None:
    engine_with_max_pixels(standin, SIDECAR_MAX_PIXELS)
    sidecar = await make_sidecar(
        mode="shadow", pricing="engine", max_pixels=SIDECAR_MAX_PIXELS, **POLL
    )
    await eventually(lambda: calibration(sidecar).last_check is not None)
    bound = calibration(sidecar).prices.upper_bound.prompt_tokens
    exact = RULE.with_pixel_range(None, SIDECAR_MAX_PIXELS).image_tokens(700, 500).prompt_tokens
    assert await image_share(session, sidecar, 700, 500) == bound  # not known: not waited for
    await eventually(lambda: calibration(sidecar).prices.known(700, 500) is not None)
    assert await image_share(session, sidecar, 700, 500) == exact
