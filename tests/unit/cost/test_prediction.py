"""prediction: output tokens cut to the room vLLM's context leaves (``held_output_tokens``).

vLLM generates at most ``max_model_len - prompt`` tokens whatever ``max_tokens`` says (it is
silently clamped by ``get_max_tokens`` in ``vllm/entrypoints/serve/utils/api_utils.py``), so KV
is never held past the context.
"""

from __future__ import annotations

from dataclasses import replace

import pytest

from sidecar.cost.prediction import RequestPrediction, predict_request, with_kv_bytes
from sidecar.profiles import load_profile
from tests.support.hybrid_models import QWEN3_5_27B, hybrid_geometry

QWEN = load_profile("Qwen/Qwen2.5-VL-7B-Instruct")
KV = QWEN.kv  # 16-token blocks, 57,344 bytes per token


def _text_only(
    prompt_tokens: int, output_tokens: int, *, sequences: int = 1, n: int = 1
) -> RequestPrediction:
    return predict_request(
        [], kv=KV, text_tokens=prompt_tokens, media_tokens=0, output_tokens=output_tokens, n=n,
        sequences=sequences, longest_prompt_tokens=prompt_tokens,
    )  # fmt: skip


def test_output_is_cut_to_the_room_the_context_leaves() -> None:
    # The case that found it: a 15,792-token prompt and the 1,024-token default output were
    # priced as 16,816 tokens where vLLM, at max_model_len 16,384, holds at most 16,384.
    prediction = with_kv_bytes(_text_only(15_792, 1_024), KV, context_tokens=16_384)
    assert prediction.held_output_tokens == 592
    assert prediction.output_tokens == 1_024  # what was asked stays on record
    assert prediction.kv_bytes == KV.request_kv_bytes(16_384)


def test_output_that_fits_is_left_alone() -> None:
    prediction = with_kv_bytes(_text_only(1_000, 100), KV, context_tokens=16_384)
    assert prediction.held_output_tokens == 100
    assert prediction.kv_bytes == KV.request_kv_bytes(1_100)


def test_a_prompt_over_the_context_holds_no_output() -> None:
    prediction = with_kv_bytes(_text_only(20_000, 100), KV, context_tokens=16_384)
    assert prediction.held_output_tokens == 0
    assert prediction.kv_bytes == KV.request_kv_bytes(20_000)


def test_without_a_context_nothing_is_cut() -> None:
    prediction = with_kv_bytes(_text_only(15_792, 1_024), KV)
    assert prediction.held_output_tokens == 1_024
    assert prediction.kv_bytes == KV.request_kv_bytes(16_816)


def test_the_context_stays_with_the_prediction_when_kv_is_recomputed() -> None:
    # Downscaling calls with_kv_bytes(prediction, kv) again: the cut must follow the new prompt.
    cut = with_kv_bytes(_text_only(15_792, 1_024), KV, context_tokens=16_384)
    smaller = with_kv_bytes(replace(cut, text_tokens=4_000), KV)
    assert smaller.context_tokens == 16_384
    assert smaller.held_output_tokens == 1_024
    assert smaller.kv_bytes == KV.request_kv_bytes(5_024)


@pytest.mark.parametrize(
    "prompts",
    [(100, 100, 100), (16_000, 10, 10), (8_000, 8_300), (16_384, 1), (3, 16_380, 16_383)],
    ids=["equal", "one-long", "two-near", "one-full", "mixed"],
)
@pytest.mark.parametrize("output_tokens", [1, 500, 4_096])
def test_several_prompts_never_hold_less_than_vllm_can(
    prompts: tuple[int, ...], output_tokens: int
) -> None:
    context = 16_384
    prediction = with_kv_bytes(
        _text_only(sum(prompts), output_tokens, sequences=len(prompts), n=2),
        KV,
        context_tokens=context,
    )
    most_vllm_generates = sum(min(output_tokens, context - prompt) for prompt in prompts)
    held = prediction.held_output_tokens * len(prompts)
    assert most_vllm_generates <= held <= output_tokens * len(prompts)


def test_a_request_vllm_only_renders_holds_nothing() -> None:
    rendered = replace(_text_only(1_000, 0), holds_kv=False)
    assert with_kv_bytes(rendered, KV, context_tokens=16_384).kv_bytes == 0


def test_a_prompt_is_exact_only_with_counted_text_and_no_allowance() -> None:
    counted = replace(_text_only(100, 8), text_tokens_exact=True)
    assert counted.prompt_tokens_exact
    assert not _text_only(100, 8).prompt_tokens_exact  # text estimated from characters
    with_audio = replace(counted, media_tokens=1_500)  # an audio item at its allowance
    assert not with_audio.prompt_tokens_exact


def test_every_sequence_of_a_hybrid_model_holds_its_own_recurrent_state() -> None:
    # Qwen3.5-27B: 784-token blocks; each request vLLM runs keeps 2 blocks in each of its 3
    # Gated DeltaNet groups, however short. Two prompts, n=2: four requests, 24 state blocks.
    hybrid = hybrid_geometry(QWEN3_5_27B)
    prediction = predict_request(
        [], kv=hybrid, text_tokens=200, media_tokens=0, output_tokens=50, n=2, sequences=2,
        longest_prompt_tokens=100,
    )  # fmt: skip
    attention_blocks = -(-(200 + 2 * 2 * 50 + 784) // 784)
    assert prediction.kv_bytes == (attention_blocks + 4 * 6) * hybrid.bytes_per_block
    # An attention-only model's extra sequences add only their rounding.
    plain = _text_only(200, 50, sequences=2, n=2)
    assert plain.kv_bytes == KV.request_kv_bytes(200 + 200 + 16)
