"""text.text_tokens: the prompt counter built from a model directory with Qwen's real tokenizer
and templates, checked against transformers' ``apply_chat_template`` with the same files; the
fallback to the estimate (vLLM itself: ``tests/renderer``)."""

from __future__ import annotations

import functools
import json
import shutil
from dataclasses import replace
from pathlib import Path
from typing import Any

import orjson
import pytest
from tokenizers import AddedToken, Tokenizer, models, processors
from transformers import PreTrainedTokenizerFast

from sidecar.body.request_body import parse_request_body
from sidecar.cost.assembly import PricingPolicy
from sidecar.cost.pricer import Pricer
from sidecar.profiles import load_profile
from sidecar.routes import Route
from sidecar.settings import Settings
from sidecar.text.chat_request import from_chat_body
from sidecar.text.chat_template import compiled
from sidecar.text.text_tokens import ChatTemplateError, PromptCounter
from tests.support.imaging import chat_with_images, jpeg_uri
from tests.support.qwen_models import ensure_model

IMAGE = {"type": "image_url", "image_url": {"url": "<image 0>"}}


@pytest.fixture(scope="module", params=["qwen2.5-vl-7b", "qwen3-vl-8b"])
def model_dir(request: pytest.FixtureRequest) -> Path:
    return ensure_model(request.param)


@pytest.fixture(scope="module")
def counter(model_dir: Path) -> PromptCounter:
    found = PromptCounter.from_model_dir(
        model_dir, load_profile(str(model_dir)).architecture.prompt_family
    )
    assert found is not None
    return found


@pytest.fixture(scope="module")
def qwen25_dir() -> Path:
    """One model is enough where the family does not matter."""
    return ensure_model("qwen2.5-vl-7b")


@functools.cache
def hf_tokenizer(model_dir: Path) -> PreTrainedTokenizerFast:
    return PreTrainedTokenizerFast(tokenizer_file=str(model_dir / "tokenizer.json"))


def hf_tokens(model_dir: Path, messages: list[dict[str, Any]], **kwargs: Any) -> int:
    """transformers' own count: the directory's tokenizer and template, no special tokens."""
    tokenizer = hf_tokenizer(model_dir)
    template = (model_dir / "chat_template.jinja").read_text()
    text = tokenizer.apply_chat_template(messages, chat_template=template, tokenize=False,
                                         **kwargs)  # fmt: skip
    return len(tokenizer(text, add_special_tokens=False)["input_ids"])


def copy_dir(source: Path, target: Path, *, without: str = "") -> Path:
    for path in source.iterdir():
        if path.is_file() and path.name != without:
            shutil.copy(path, target / path.name)
    return target


def test_prompt_counter_needs_a_tokenizer_a_template_and_a_known_placeholder(
    qwen25_dir: Path, tmp_path: Path
) -> None:
    no_tokenizer = copy_dir(qwen25_dir, tmp_path, without="tokenizer.json")
    assert PromptCounter.from_model_dir(no_tokenizer, "qwen2_5_vl") is None
    assert PromptCounter.from_model_dir(qwen25_dir, "llava") is None


def test_prompt_counter_needs_the_image_token_in_the_vocabulary(
    qwen25_dir: Path, tmp_path: Path
) -> None:
    directory = copy_dir(qwen25_dir, tmp_path, without="tokenizer.json")
    vocabulary = models.WordLevel({"a": 0, "?": 1}, unk_token="?")  # noqa: S106 - not a secret
    Tokenizer(vocabulary).save(str(directory / "tokenizer.json"))
    assert PromptCounter.from_model_dir(directory, "qwen2_5_vl") is None


def test_added_tokens_that_change_their_neighbours_are_counted_in_one_encode(
    qwen25_dir: Path, tmp_path: Path
) -> None:
    directory = copy_dir(qwen25_dir, tmp_path, without="tokenizer.json")
    tokenizer = Tokenizer.from_file(str(qwen25_dir / "tokenizer.json"))
    tokenizer.add_special_tokens([AddedToken("<|mark|>", lstrip=True)])
    tokenizer.save(str(directory / "tokenizer.json"))
    counter = PromptCounter.from_model_dir(directory, "qwen2_5_vl")
    assert counter is not None
    assert counter.added_tokens is None
    text = "a <|mark|> b <|image_pad|>"
    assert counter.text_tokens(text, add_special_tokens=False) == len(tokenizer.encode(text).ids)


def test_prompt_counter_needs_a_template_that_compiles(qwen25_dir: Path, tmp_path: Path) -> None:
    directory = copy_dir(qwen25_dir, tmp_path, without="chat_template.jinja")
    config = json.loads((directory / "tokenizer_config.json").read_text())
    (directory / "tokenizer_config.json").write_text(json.dumps(config))
    assert PromptCounter.from_model_dir(directory, "qwen2_5_vl") is None
    (directory / "chat_template.json").write_text(json.dumps({"chat_template": "{% for %}"}))
    assert PromptCounter.from_model_dir(directory, "qwen2_5_vl") is None


@pytest.mark.parametrize(
    "messages",
    [
        [{"role": "user", "content": [{"type": "image"}, {"type": "text", "text": "Hi 東京 🚀"}]}],
        [{"role": "system", "content": [{"type": "text", "text": "S"}]},
         {"role": "user", "content": [{"type": "text", "text": "1234 <|im_end|> <think>"}]},
         {"role": "assistant", "content": [{"type": "text", "text": "ok"}]},
         {"role": "user", "content": [{"type": "image"}, {"type": "image"}]}],
    ],
    ids=["one-turn", "multi-turn"],
)  # fmt: skip
def test_chat_count_equals_transformers_with_the_same_files(
    model_dir: Path, counter: PromptCounter, messages: list[dict[str, Any]]
) -> None:
    images = sum(p["type"] == "image" for m in messages for p in m["content"])
    body_messages = [
        {**m, "content": [IMAGE if p["type"] == "image" else p for p in m["content"]]}
        for m in messages
    ]
    request = from_chat_body({"messages": body_messages})
    ours = counter.chat_prompt_tokens(request, [100] * images, add_special_tokens=False)
    truth = hf_tokens(model_dir, messages, add_generation_prompt=True)
    assert ours == truth - images + 100 * images


def test_a_typed_image_placeholder_is_one_more_token(counter: PromptCounter) -> None:
    plain = from_chat_body({"messages": [{"role": "user", "content": [IMAGE, "look"]}]})
    typed = from_chat_body({"messages": [{"role": "user", "content": [
        IMAGE, "<|image_pad|>look"]}]})  # fmt: skip
    count = counter.chat_prompt_tokens
    assert count(typed, [50], add_special_tokens=False) == (
        count(plain, [50], add_special_tokens=False) + 1
    )


def test_an_image_the_template_never_renders_is_an_error(counter: PromptCounter) -> None:
    # A developer message merges the system messages into text: vLLM drops the image's place.
    body = {"messages": [{"role": "system", "content": [IMAGE]}, {"role": "user", "content": "u"},
                         {"role": "developer", "content": "d"}]}  # fmt: skip
    with pytest.raises(ChatTemplateError):
        counter.chat_prompt_tokens(from_chat_body(body), [50], add_special_tokens=False)


def test_a_requests_own_template_renders_with_its_own_content_format(
    counter: PromptCounter,
) -> None:
    template = "{% for m in messages %}{{ m['content'] }}|{% endfor %}"
    body = {"messages": [{"role": "user", "content": [IMAGE, "x"]}]}
    own = from_chat_body({**body, "chat_template": template})
    in_kwargs = from_chat_body({**body, "chat_template_kwargs": {"chat_template": template}})
    text = "<|vision_start|><|image_pad|><|vision_end|>\nx|"
    expected = counter.text_tokens(text, add_special_tokens=False) - 1 + 50
    assert counter.chat_prompt_tokens(own, [50], add_special_tokens=False) == expected
    # From the kwargs it only renders: the parts come in the server template's list format.
    listed = "[{'type': 'image'}, {'type': 'text', 'text': 'x'}]|"
    assert counter.chat_prompt_tokens(in_kwargs, [], add_special_tokens=False) == (
        counter.text_tokens(listed, add_special_tokens=False)
    )


def test_special_tokens_are_added_only_when_the_tokenizer_adds_any(
    qwen25_dir: Path, tmp_path: Path
) -> None:
    directory = copy_dir(qwen25_dir, tmp_path, without="tokenizer.json")
    tokenizer = Tokenizer.from_file(str(qwen25_dir / "tokenizer.json"))
    tokenizer.post_processor = processors.TemplateProcessing(
        single="<|endoftext|> $A", special_tokens=[("<|endoftext|>", 151643)]
    )
    tokenizer.save(str(directory / "tokenizer.json"))
    bos = PromptCounter.from_model_dir(directory, "qwen2_5_vl")
    assert bos is not None
    assert bos.text_tokens("hello", add_special_tokens=True) == 2
    assert bos.text_tokens("hello", add_special_tokens=False) == 1


def test_qwen_adds_no_special_tokens_and_takes_a_later_system_message(
    counter: PromptCounter,
) -> None:
    assert counter.text_tokens("hello", add_special_tokens=True) == 1
    assert counter.merge_inline_system is False  # vLLM keeps in-message system turns


def test_the_anthropic_probe_finds_templates_that_refuse_a_later_system_message(
    qwen25_dir: Path, tmp_path: Path
) -> None:
    directory = copy_dir(qwen25_dir, tmp_path)
    (directory / "chat_template.jinja").write_text(
        "{% for m in messages %}{% if m.role == 'system' and not loop.first %}"
        "{{ raise_exception('system first') }}{% endif %}{{ m.content }}{% endfor %}"
    )
    strict = PromptCounter.from_model_dir(directory, "qwen2_5_vl")
    assert strict is not None
    assert strict.merge_inline_system is True


@pytest.mark.parametrize(
    "text",
    [
        "<|im_start|>user\nhello<|im_end|>\n<|im_start|>assistant\n",
        "no special tokens at all, just text with  double  spaces\nand lines",
        "<|vision_start|><|image_pad|><|vision_end|><|vision_start|><|image_pad|><|vision_end|>",
        "edge<|im_end|><|im_end|>  <|im_start|>",
        "unicode: déjà vu — 東京 🚀<|im_end|> 1234567",
        "",
    ],
    ids=["chat", "plain", "images", "adjacent", "unicode", "empty"],
)
def test_prompt_counter_counts_stretches_as_one_encode_does(
    counter: PromptCounter, text: str
) -> None:
    assert counter.added_tokens is not None
    ids = counter.tokenizer.encode(text, add_special_tokens=False).ids
    for _ in range(2):  # a chat resends its history: asked again, the same count
        assert counter.text_tokens(text, add_special_tokens=False) == len(ids)


async def test_requests_the_template_cannot_render_fall_back_to_the_estimate(
    model_dir: Path, counter: PromptCounter
) -> None:
    profile = load_profile(str(model_dir))
    refusing = replace(counter, template=compiled("{{ raise_exception('this one refuses') }}"))
    pricer = Pricer(
        profile, PricingPolicy.from_settings(Settings(model=str(model_dir))), None, refusing
    )
    raw = orjson.dumps(chat_with_images(jpeg_uri(64, 64)))
    prediction = await pricer.price(parse_request_body(raw, Route.CHAT), raw)
    assert not prediction.text_tokens_exact
    assert prediction.text_tokens > 0
