"""Exact prompt tokens: the sidecar's count equals transformers' Qwen2.5-VL processor, alone and
in the headers of a running sidecar."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import aiohttp
import orjson
import pytest
from PIL import Image
from transformers import PreTrainedTokenizerFast
from transformers.models.qwen2_5_vl.processing_qwen2_5_vl import Qwen2_5_VLProcessor
from transformers.models.qwen2_vl.image_processing_pil_qwen2_vl import Qwen2VLImageProcessorPil

from sidecar.body.request_body import parse_request_body
from sidecar.cost.assembly import PricingPolicy
from sidecar.cost.pricer import Pricer
from sidecar.profiles import load_profile
from sidecar.profiles.builtins import BUILTIN_MODELS
from sidecar.routes import Route
from sidecar.serve.keys import PRICER
from sidecar.settings import Settings
from sidecar.text.text_tokens import PromptCounter
from tests.support.imaging import jpeg_uri
from tests.support.model_dirs import QWEN2_VL_CHAT_TEMPLATE, write_qwen25_model_dir
from tests.support.sidecars import QWEN, SidecarFactory

pytestmark = pytest.mark.oracle


@pytest.fixture(scope="module")
def model_dir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A Qwen2.5-VL-7B model directory with a small locally trained tokenizer."""
    return write_qwen25_model_dir(tmp_path_factory.mktemp("qwen25vl"))


class _ProcessorWithoutVideo(Qwen2_5_VLProcessor):  # type: ignore[misc]
    """The real processor; its video processor needs torchvision, which tests avoid."""

    def check_argument_for_proper_class(self, attribute_name: str, arg: Any) -> Any:
        if attribute_name == "video_processor":
            return None
        return super().check_argument_for_proper_class(attribute_name, arg)


@pytest.fixture(scope="module")
def oracle(model_dir: Path) -> _ProcessorWithoutVideo:
    special = {"eos_token": "<|im_end|>", "pad_token": "<|endoftext|>"}  # tokens, not secrets
    fast = PreTrainedTokenizerFast(tokenizer_file=str(model_dir / "tokenizer.json"), **special)
    preprocessor = BUILTIN_MODELS[QWEN].preprocessor
    image_processor = Qwen2VLImageProcessorPil(
        min_pixels=preprocessor["min_pixels"],
        max_pixels=preprocessor["max_pixels"],
        patch_size=14,
        merge_size=2,
        temporal_patch_size=2,
    )
    return _ProcessorWithoutVideo(
        image_processor=image_processor,
        tokenizer=fast,
        video_processor=None,
        chat_template=QWEN2_VL_CHAT_TEMPLATE,
    )


def _oracle_prompt_tokens(processor: _ProcessorWithoutVideo, body: dict[str, Any]) -> int:
    """Run the real processor: the same messages with real images of the same sizes."""
    messages = []
    for message in body["messages"]:
        content = message["content"]
        if isinstance(content, list):
            content = [_oracle_part(part) for part in content]
        messages.append({**message, "content": content})
    result = processor.apply_chat_template(
        messages, tokenize=True, add_generation_prompt=True, return_dict=True
    )
    ids = result["input_ids"]
    return len(ids[0]) if isinstance(ids[0], list) else len(ids)


def _oracle_part(part: dict[str, Any]) -> dict[str, Any]:
    if part["type"] == "text":
        return part
    width, height = (int(v) for v in part["size"].split("x"))
    return {"type": "image", "image": Image.new("RGB", (width, height))}


def _chat(*turns: tuple[str, list[str | tuple[int, int]] | str]) -> dict[str, Any]:
    """Messages whose image parts carry a ``size`` key for the oracle."""
    messages = []
    for role, content in turns:
        if isinstance(content, str):
            messages.append({"role": role, "content": content})
            continue
        parts: list[dict[str, Any]] = []
        for item in content:
            if isinstance(item, str):
                parts.append({"type": "text", "text": item})
            else:
                parts.append({
                    "type": "image_url",
                    "image_url": {"url": jpeg_uri(*item)},
                    "size": f"{item[0]}x{item[1]}",
                })  # fmt: skip
        messages.append({"role": role, "content": parts})
    return {"model": QWEN, "messages": messages, "max_tokens": 16}


CASES = {
    "one-image": _chat(("user", [(640, 480), "What is in this picture?"])),
    "text-only": _chat(("user", "Describe the image in detail, please.")),
    "system-and-two-images": _chat(
        ("system", "You are a helpful assistant."),
        ("user", ["Compare the two photos.", (1920, 1080), (333, 777), "List differences."]),
    ),
    "multi-turn": _chat(
        ("user", [(224, 224), "What is in this picture?"]),
        ("assistant", "A small square."),
        ("user", [(4032, 3024), "And this one? Describe it in detail."]),
    ),
    "tiny-and-odd-sizes": _chat(("user", [(1, 1), (29, 1001), (5000, 90), "ok"])),
}


@pytest.mark.parametrize("body", CASES.values(), ids=CASES.keys())
async def test_exact_prompt_tokens_equal_the_qwen25_vl_processor(
    body: dict[str, Any], model_dir: Path, oracle: _ProcessorWithoutVideo
) -> None:
    profile = load_profile(str(model_dir))
    counter = PromptCounter.from_model_dir(model_dir, profile.architecture.prompt_family)
    assert counter is not None
    pricer = Pricer(
        profile, PricingPolicy.from_settings(Settings(model=str(model_dir))), None, counter
    )
    raw = orjson.dumps(body)
    prediction = await pricer.price(parse_request_body(raw, Route.CHAT), raw)
    assert prediction.text_tokens_exact
    assert prediction.prompt_tokens == _oracle_prompt_tokens(oracle, body)


async def test_sidecar_reports_exact_prompt_tokens_in_its_headers(
    make_sidecar: SidecarFactory, model_dir: Path, oracle: _ProcessorWithoutVideo
) -> None:
    sidecar = await make_sidecar(model=str(model_dir))
    assert sidecar.app[PRICER].prompt_counter is not None
    body = CASES["system-and-two-images"]
    async with aiohttp.ClientSession() as session:
        url = f"http://127.0.0.1:{sidecar.port}/v1/chat/completions"
        async with session.post(url, json=body) as response:
            assert response.status == 200
            predicted = int(response.headers["x-vlm-sidecar-prompt-tokens"])
    assert predicted == _oracle_prompt_tokens(oracle, body)
