"""engine.measured: ``vlm-sidecar tokens`` and ``plan`` with ``--engine URL`` price the sizes
asked about by a running vLLM's own count, through the serving sidecar's client."""

from __future__ import annotations

import asyncio
import threading
from collections.abc import Iterator
from pathlib import Path

import orjson
import pytest

from sidecar.profiles import load_profile
from sidecar.standin import StandinConfig, StandinServer, start_standin
from tests.support.cli import run_cli
from tests.support.engine_counts import counting_images_by
from tests.support.model_dirs import write_config_files
from tests.support.sidecars import QWEN

SIDECAR_MAX_PIXELS = 1_003_520
VLLM_RULE = load_profile(QWEN).vision.with_pixel_range(None, 4_014_080)


@pytest.fixture
def engine() -> Iterator[StandinServer]:
    """A stand-in vLLM counting images at 4 MP, on its own loop in a thread (the CLI runs
    its own event loop)."""
    loop = asyncio.new_event_loop()
    thread = threading.Thread(target=loop.run_forever, daemon=True)
    thread.start()
    config = StandinConfig(prompt_tokens_fn=counting_images_by(VLLM_RULE))
    server = asyncio.run_coroutine_threadsafe(start_standin(config), loop).result(10)
    try:
        yield server
    finally:
        asyncio.run_coroutine_threadsafe(server.close(), loop).result(10)
        loop.call_soon_threadsafe(loop.stop)
        thread.join(10)
        loop.close()


def test_tokens_with_engine_gives_vllms_count_not_the_rules(engine: StandinServer) -> None:
    flags = ["tokens", "--model", QWEN, "--max-pixels", str(SIDECAR_MAX_PIXELS), "--json"]
    _, by_rule = run_cli(*flags, "1680x1260")
    status, by_engine = run_cli(*flags, "--engine", engine.url, "1680x1260", "640x480")
    assert status == 0
    rows = [orjson.loads(line) for line in by_engine.splitlines()]
    expected = VLLM_RULE.image_tokens(1680, 1260)
    assert (rows[0]["tokens"], rows[0]["wrapper_tokens"]) == (expected.tokens, 2)
    assert rows[0]["tokens"] > orjson.loads(by_rule)["tokens"]  # the rule caps at 1 MP
    assert rows[1]["tokens"] == VLLM_RULE.image_tokens(640, 480).tokens
    assert engine.requests == []  # three calls: without an image, then each size
    assert len(engine.calibrations) == 3


def test_tokens_with_engine_reports_a_size_vllm_refuses(engine: StandinServer) -> None:
    status, output = run_cli("tokens", "--model", QWEN, "--engine", engine.url, "--json", "9000x28")
    assert status == 1
    assert "vLLM refuses 9000x28" in orjson.loads(output)["error"]


def test_plan_with_engine_prices_its_sizes_by_vllm(engine: StandinServer) -> None:
    flags = ["plan", "--model", QWEN, "--max-pixels", str(SIDECAR_MAX_PIXELS)]
    status, output = run_cli(*flags, "--engine", engine.url, "--image-size", "1680x1260", "--json")
    assert status == 0
    rows = orjson.loads(output)["rows"]
    p50 = next(row for row in rows if row["label"] == "p50 uncapped")
    assert p50["image_tokens"] == VLLM_RULE.image_tokens(1680, 1260).tokens


def test_an_engine_that_cannot_answer_exits_2(capsys: pytest.CaptureFixture[str]) -> None:
    status, _ = run_cli("tokens", "--model", QWEN, "--engine", "http://127.0.0.1:9", "640x480")
    assert status == 2
    assert "cannot ask vLLM at http://127.0.0.1:9" in capsys.readouterr().err


def test_a_family_without_a_rule_is_priced_with_engine_only(
    engine: StandinServer, tmp_path: Path
) -> None:
    directory = write_config_files(tmp_path / "fancy", QWEN)
    config = orjson.loads((directory / "config.json").read_bytes())
    fancy = config | {"model_type": "fancy_vl", "architectures": ["FancyVLForCausalLM"]}
    (directory / "config.json").write_bytes(orjson.dumps(fancy))
    status, _ = run_cli("tokens", "--model", str(directory), "640x480")
    assert status == 2  # no rule, and no engine to ask
    status, output = run_cli("tokens", "--model", str(directory), "--engine", engine.url, "--json",
                             "640x480")  # fmt: skip
    assert status == 0
    row = orjson.loads(output)
    assert row["tokens"] + row["wrapper_tokens"] == VLLM_RULE.image_tokens(640, 480).prompt_tokens
