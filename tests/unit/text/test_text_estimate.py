"""text.text_estimate: the estimate's arithmetic, its framing constants (measured here with
Qwen's real tokenizer and templates), and that it is not below the real count on hard text
(the wide check is ``bench/text_estimate.py``)."""

from __future__ import annotations

import orjson
import pytest
from tokenizers import Tokenizer

from sidecar.body.refs import SequenceRef
from sidecar.body.request_body import parse_request_body
from sidecar.cost.assembly import PricingPolicy
from sidecar.cost.pricer import Pricer
from sidecar.profiles import load_profile
from sidecar.routes import Route
from sidecar.text.template_overhead import measure_overhead
from sidecar.text.text_estimate import (
    FAMILY_OVERHEADS,
    GENERIC_OVERHEAD,
    TemplateOverhead,
    estimate_sequence_tokens,
    overhead_for,
    text_estimate,
)
from sidecar.text.text_tokens import read_template
from tests.support.qwen_models import ensure_model

FAMILY_DIRS = {
    "qwen2_vl": "qwen2.5-vl-7b",
    "qwen2_5_vl": "qwen2.5-vl-7b",
    "qwen3_vl": "qwen3-vl-8b",
}


def sequence(text: str, messages: int = 0) -> SequenceRef:
    return SequenceRef.of_text(text, messages=messages)


def test_the_body_reader_counts_digits_and_marks_in_its_one_pass() -> None:
    counts = SequenceRef.of_text('Hi, "Zoë" 42!', messages=2)
    assert (counts.text_chars, counts.text_bytes, counts.messages) == (13, 14, 2)
    assert (counts.text_digits, counts.text_marks) == (2, 6)  # H , " Z " !


def test_the_estimate_adds_each_share_then_rounds_up() -> None:
    # 10 chars / 3 + 4 digits x 1.5 + 3 capitals / 3 + 0 extra bytes = 10.33 -> 11
    assert text_estimate(sequence("ABC 1234 x"), 3.0) == 11
    # "é" is 2 bytes: 1 char / 3 + 1 extra byte x 0.75 = 1.08 -> 2
    assert text_estimate(sequence("é"), 3.0) == 2
    assert text_estimate(SequenceRef(), 3.0) == 0


def test_a_chat_adds_its_framing_and_a_prompt_does_not() -> None:
    framing = TemplateOverhead(fixed_tokens=7, per_message_tokens=4, tools_tokens=30)
    text = text_estimate(sequence("hello"), 3.0)
    assert estimate_sequence_tokens(sequence("hello"), 3.0, framing) == text
    chat = sequence("hello", messages=3)
    assert estimate_sequence_tokens(chat, 3.0, framing) == text + 7 + 3 * 4
    assert estimate_sequence_tokens(chat, 3.0, framing, tools=True) == text + 7 + 12 + 30


def test_unknown_families_get_the_generic_framing() -> None:
    assert overhead_for("llava") == GENERIC_OVERHEAD
    assert overhead_for("qwen3_vl") == FAMILY_OVERHEADS["qwen3_vl"]


@pytest.mark.parametrize("family", FAMILY_OVERHEADS)
def test_family_framing_is_what_the_real_template_and_tokenizer_give(family: str) -> None:
    directory = ensure_model(FAMILY_DIRS[family])
    source, special = read_template(directory)
    assert source is not None
    tokenizer = Tokenizer.from_file(str(directory / "tokenizer.json"))

    def count(text: str) -> int:
        return len(tokenizer.encode(text, add_special_tokens=False).ids)

    assert measure_overhead(source, count, special) == FAMILY_OVERHEADS[family]


HARD_TEXTS = {
    "digits": "Rows: 4068391, 87721, 29, 44\n588238076, 57, 24624946, 5, 48846",
    "capitals": 'SIGNATURES = (("JPEG", b"\\xff\\xd8\\xff", 0), ("PNG", b"\\x89PNG\\r\\n"))',
    "cjk": "人工智能是计算机科学的一个分支。画像を説明してください。이 사진을 설명해 주세요.",
    "emoji": "ok 🚀 👨‍👩‍👧 🏳️‍🌈 👩🏽‍💻 ok",
    "scripts": "Հայերենը հնդեվրոպական լեզվաընտանիքի առանձին ճյուղ է։ සිංහල ලංකාවේ",  # noqa: RUF001
}


@pytest.fixture(scope="module")
def tokenizer() -> Tokenizer:
    return Tokenizer.from_file(str(ensure_model("qwen2.5-vl-7b") / "tokenizer.json"))


@pytest.mark.parametrize("text", HARD_TEXTS.values(), ids=HARD_TEXTS.keys())
def test_the_estimate_is_not_below_qwens_count_on_hard_text(
    tokenizer: Tokenizer, text: str
) -> None:
    truth = len(tokenizer.encode(text, add_special_tokens=False).ids)
    assert text_estimate(sequence(text), 3.0) >= truth


async def test_the_pricer_uses_a_learned_framing_when_it_has_one() -> None:
    profile = load_profile("Qwen/Qwen3-VL-8B-Instruct")
    body = orjson.dumps({"messages": [{"role": "user", "content": "hi"}],
                         "tools": [{"type": "function", "function": {"name": "f"}}]})  # fmt: skip
    parsed = parse_request_body(body, Route.CHAT)
    builtin = await Pricer(profile, PricingPolicy(), None).price(parsed, body)
    learned = TemplateOverhead(fixed_tokens=100, per_message_tokens=0, tools_tokens=0)
    own = await Pricer(profile, PricingPolicy(), None, text_overhead=learned).price(parsed, body)
    text = text_estimate(parsed.sequences[0], 3.0)
    framing = FAMILY_OVERHEADS["qwen3_vl"]
    assert builtin.text_tokens == text + framing.fixed_tokens + framing.per_message_tokens + (
        framing.tools_tokens)  # fmt: skip
    assert own.text_tokens == text + 100
    assert not own.text_tokens_exact
