"""cost.text_tokens: the prompt counter built from a model directory's tokenizer and template,
and the fallback to the estimate (exact counts against transformers' processor:
``tests/oracle/test_text_tokens_oracle.py``)."""

from __future__ import annotations

from dataclasses import replace
from pathlib import Path

import jinja2
import jinja2.sandbox
import orjson
import pytest

from sidecar.cost.pricer import Pricer
from sidecar.cost.request_body import parse_request_body
from sidecar.cost.text_tokens import PromptCounter
from sidecar.profiles import load_profile
from sidecar.routes import Route
from sidecar.settings import Settings
from tests.support.imaging import chat_with_images, jpeg_uri
from tests.support.model_dirs import write_qwen25_model_dir


@pytest.fixture(scope="module")
def model_dir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A Qwen2.5-VL-7B model directory with a small locally trained tokenizer."""
    return write_qwen25_model_dir(tmp_path_factory.mktemp("qwen25vl"))


def test_prompt_counter_is_absent_without_a_tokenizer(tmp_path: Path, model_dir: Path) -> None:
    for name in ("config.json", "preprocessor_config.json", "chat_template.jinja"):
        (tmp_path / name).write_text((model_dir / name).read_text())
    assert PromptCounter.from_model_dir(tmp_path, "qwen2_5_vl") is None


def test_prompt_counter_is_absent_for_families_without_a_known_placeholder(
    model_dir: Path,
) -> None:
    assert PromptCounter.from_model_dir(model_dir, "llava") is None


async def test_requests_the_template_cannot_render_fall_back_to_the_estimate(
    model_dir: Path,
) -> None:
    profile = load_profile(str(model_dir))
    counter = PromptCounter.from_model_dir(model_dir, profile.model_type)
    assert counter is not None
    refusing = jinja2.sandbox.ImmutableSandboxedEnvironment().from_string(
        "{{ raise_exception('this template refuses') }}",
        globals={"raise_exception": _raise},
    )
    pricer = Pricer(
        profile, Settings(model=str(model_dir)), None, replace(counter, template=refusing)
    )
    raw = orjson.dumps(chat_with_images(jpeg_uri(64, 64)))
    prediction = await pricer.price(parse_request_body(raw, Route.CHAT), raw)
    assert not prediction.text_tokens_exact
    assert prediction.text_tokens > 0


def _raise(message: str) -> None:
    raise jinja2.exceptions.TemplateError(message)


@pytest.mark.parametrize(
    "text",
    [
        "<|im_start|>user\nhello<|im_end|>\n<|im_start|>assistant\n",
        "no special tokens at all, just text with  double  spaces\nand lines",
        "<|vision_start|><|image_pad|><|vision_end|><|vision_start|><|image_pad|><|vision_end|>",
        "edge<|im_end|><|im_end|>  <|im_start|>",
        "unicode: déjà vu — 東京 🚀<|im_end|>",
        "",
    ],
    ids=["chat", "plain", "images", "adjacent", "unicode", "empty"],
)
def test_prompt_counter_counts_stretches_as_one_encode_does(model_dir: Path, text: str) -> None:
    counter = PromptCounter.from_model_dir(model_dir, "qwen2_5_vl")
    assert counter is not None
    assert counter.added_tokens is not None
    ids = counter.tokenizer.encode(text, add_special_tokens=False).ids
    assert counter._count(text) == (len(ids), ids.count(counter.image_token_id))
    assert counter._count(text) == (len(ids), ids.count(counter.image_token_id))  # memoised
