"""The vision rules against the real Hugging Face processors: 0 mismatches, refusals included.

The oracle is transformers itself, PIL backends only (no torch): each family's processor is
built with ``from_dict`` from the same shipped preprocessor values the sidecar loads, as
``from_pretrained`` would build it from ``preprocessor_config.json``.

Two oracle paths, and a test that they agree:

* cheap, for thousands of sizes: the processor's own size-only count, the code vLLM calls
  to size placeholders without pixels (Qwen: ``get_number_of_image_patches`` divided by
  ``merge_size**2``, as ``Qwen2VLProcessor._get_num_multimodal_tokens`` does; LLaVA:
  ``LlavaProcessor._get_num_multimodal_tokens``);
* full, for a smaller sample: the processor run on a real Pillow image (Qwen: the
  ``image_grid_thw`` it returns, divided as ``Qwen2VLProcessor.replace_image_token`` does;
  LLaVA: the ``<image>`` tokens ``LlavaProcessor`` expands in ``input_ids``).

``Qwen2VLProcessor`` itself cannot be built without torch (its video processor lookup
fails), so the Qwen division by ``merge_size**2`` is the one line copied from transformers.
"""

from __future__ import annotations

import math
import random
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import numpy as np
import pytest
from hypothesis import example, given, settings
from hypothesis import strategies as st
from PIL import Image
from tokenizers import Tokenizer, models, pre_tokenizers
from transformers import PreTrainedTokenizerFast
from transformers.models.clip.image_processing_pil_clip import CLIPImageProcessorPil
from transformers.models.llava.processing_llava import LlavaProcessor
from transformers.models.qwen2_vl.image_processing_pil_qwen2_vl import Qwen2VLImageProcessorPil

from sidecar.errors import UnsupportedImageSizeError
from sidecar.profiles import ProfileOverrides, load_profile
from sidecar.profiles.builtins import BUILTIN_MODELS
from sidecar.vision import VisionRule
from tests.support.oracle_helpers import (
    ASPECT_LIMIT_EXTREMES,
    COMMON_EXTREMES,
    MAX_SIDE_PX,
    REAL_IMAGE_MAX_PIXELS,
    REFUSED,
    Size,
    check_real_images,
    check_size_only,
    legal_grid_exists,
    log_uniform_sizes,
    outcome,
)

pytestmark = pytest.mark.oracle

SEED = 20_250_601
RANDOM_SIZES_PER_FAMILY = 2_000
FULL_PATH_SIZES_PER_FAMILY = 30
CAPPED = ProfileOverrides(min_pixels=200_704, max_pixels=1_003_520)
LLAVA_IMAGE_TOKEN = "<image>"  # noqa: S105 - a placeholder token, not a password

Count = int | str  # a token count, or "refused" when the processor raises


@dataclass(frozen=True)
class Family:
    """One model family: the sidecar's rule and the two oracle paths for it."""

    id: str
    rule: VisionRule
    cheap_tokens: Callable[[int, int], int]  # (width, height) -> tokens; ValueError if refused
    full_tokens: Callable[[Image.Image], int]  # a real image -> tokens; ValueError if refused
    extremes: tuple[Size, ...] = ()
    factor: int = 1  # side in pixels of one token's grid cell; 1 where size does not matter
    min_pixels: int = 0  # the processor's pixel range; 0 and None where size does not matter
    max_pixels: int | None = None


def _qwen_family(family_id: str, model: str, overrides: ProfileOverrides | None = None) -> Family:
    preprocessor: dict[str, Any] = dict(BUILTIN_MODELS[model].preprocessor)
    if overrides is not None:
        # vLLM's --mm-processor-kwargs min_pixels/max_pixels land in the processor's size edges.
        preprocessor["size"] = {
            "shortest_edge": overrides.min_pixels,
            "longest_edge": overrides.max_pixels,
        }
        preprocessor.pop("min_pixels", None)
        preprocessor.pop("max_pixels", None)
    processor = Qwen2VLImageProcessorPil.from_dict(preprocessor)
    merge_length = processor.merge_size**2

    def cheap(width: int, height: int) -> int:
        return int(processor.get_number_of_image_patches(height, width, {})) // merge_length

    def full(image: Image.Image) -> int:
        grid = processor(images=image, return_tensors=None)["image_grid_thw"][0]
        return int(np.prod(grid)) // merge_length

    factor = processor.patch_size * processor.merge_size
    min_pixels, max_pixels = int(processor.size.shortest_edge), int(processor.size.longest_edge)
    return Family(
        family_id,
        load_profile(model, overrides).vision,
        cheap,
        full,
        _qwen_extremes(factor, min_pixels, max_pixels),
        factor,
        min_pixels,
        max_pixels,
    )


def _llava_family() -> Family:
    model = "llava-hf/llava-1.5-7b-hf"
    config = BUILTIN_MODELS[model].config
    image_processor = CLIPImageProcessorPil.from_dict(dict(BUILTIN_MODELS[model].preprocessor))
    # llava-hf's processor_config.json: patch 14, "default" strategy, 1 extra token (CLS).
    processor = LlavaProcessor(
        image_processor=image_processor,
        tokenizer=_placeholder_tokenizer(),
        patch_size=config["vision_config"]["patch_size"],
        vision_feature_select_strategy=config["vision_feature_select_strategy"],
        num_additional_image_tokens=1,
    )
    crop = image_processor.crop_size

    def cheap(width: int, height: int) -> int:
        counts = processor._get_num_multimodal_tokens(image_sizes=[(height, width)])
        return int(counts.num_image_tokens[0])

    def full(image: Image.Image) -> int:
        out = processor(images=[image], text=LLAVA_IMAGE_TOKEN, return_tensors=None)
        assert np.shape(out["pixel_values"][0]) == (3, crop.height, crop.width)
        return out["input_ids"][0].count(processor.image_token_id)

    return Family("llava-1.5", load_profile(model).vision, cheap, full)


def _placeholder_tokenizer() -> PreTrainedTokenizerFast:
    """A real fast tokenizer with a vocabulary of just the placeholder; counts need no more."""
    unknown = "<unk>"
    backend = Tokenizer(
        models.WordLevel(vocab={unknown: 0, LLAVA_IMAGE_TOKEN: 1}, unk_token=unknown)
    )
    backend.pre_tokenizer = pre_tokenizers.WhitespaceSplit()
    return PreTrainedTokenizerFast(
        tokenizer_object=backend, unk_token=unknown, additional_special_tokens=[LLAVA_IMAGE_TOKEN]
    )


def _qwen_extremes(factor: int, min_pixels: int, max_pixels: int) -> tuple[Size, ...]:
    """Sizes on each branch and boundary of ``smart_resize`` for these parameters."""
    sizes: list[Size] = []
    for pixels in (min_pixels, max_pixels):
        side = math.isqrt(pixels)
        for dw in (-1, 0, 1):
            for dh in (-1, 0, 1):
                sizes.append((side + dw, side + dh))
        sizes += [(side + factor // 2, side), (side + factor // 2 + 1, side)]
        sizes += [(side * 2, side // 2), (side // 2 + 1, side * 2)]
    for multiple in (1, 2, 3, 7, 100, 357):
        sizes += [(factor * multiple, factor), (factor, factor * multiple)]
    sizes += [(factor * 37, factor * 53), (factor * 128, factor * 128)]
    # Halfway points: round() is banker's rounding in transformers' smart_resize.
    sizes += [(factor // 2, factor // 2), (factor * 3 // 2, factor * 5 // 2)]
    sizes += [(factor * 5 // 2, factor * 7 // 2 + 1)]
    return tuple(sizes)


EXTREMES: tuple[Size, ...] = (
    *COMMON_EXTREMES,
    *ASPECT_LIMIT_EXTREMES,
    (1990, 10), (2000, 10), (2010, 10), (10, 2000), (10, 2001), (224, 224), (336, 336),
)  # fmt: skip

FAMILIES: list[Family] = [
    _qwen_family("qwen2-vl", "Qwen/Qwen2-VL-7B-Instruct"),
    _qwen_family("qwen2.5-vl", "Qwen/Qwen2.5-VL-7B-Instruct"),
    _qwen_family("qwen2.5-vl-capped", "Qwen/Qwen2.5-VL-7B-Instruct", CAPPED),
    _qwen_family("qwen3-vl", "Qwen/Qwen3-VL-8B-Instruct"),
    _llava_family(),
]
QWEN_FAMILIES = [f for f in FAMILIES if f.id.startswith("qwen")]

RANDOM_SIZES = list(log_uniform_sizes(random.Random(SEED), RANDOM_SIZES_PER_FAMILY))


def _full_path_sizes(family: Family) -> list[Size]:
    """Extremes that are cheap to materialise, big photos, then small random sizes."""
    # CLIP resizes the shortest edge to 336, so a 1x10000 image would become 336x3.36M px.
    max_aspect = 8.0 if family.max_pixels is None else math.inf
    if family.max_pixels is None:
        chosen: list[Size] = [(1, 1), (1, 8), (8, 1), (2, 3), (336, 336), (337, 335)]
    else:
        chosen = [(1, 1), (1, MAX_SIDE_PX), (MAX_SIDE_PX, 1), (200, 1), (201, 1), (3, 200)]
    chosen += [(224, 224), (4032, 3024)]
    # For Qwen the first extremes are the neighbours of min_pixels: the enlarge branch.
    chosen += [s for s in family.extremes if s[0] * s[1] <= REAL_IMAGE_MAX_PIXELS][:8]
    if family.max_pixels is not None:
        # Just over max_pixels once rounded, so the processor really runs its shrink branch.
        side = math.isqrt(family.max_pixels)
        chosen.append((side + family.factor // 2 + 1, side))
    rng = random.Random(SEED + 1)
    missing = FULL_PATH_SIZES_PER_FAMILY - len(chosen)
    chosen += log_uniform_sizes(
        rng, missing, max_pixels=REAL_IMAGE_MAX_PIXELS, max_aspect=max_aspect
    )
    return chosen


def _rule_outcome(rule: VisionRule, size: Size) -> Count:
    return outcome(lambda: rule.image_tokens(*size).tokens, UnsupportedImageSizeError)


def _size_only_outcome(family: Family) -> Callable[[Size], Count]:
    return lambda size: outcome(lambda: family.cheap_tokens(*size), ValueError)


@pytest.mark.parametrize("family", FAMILIES, ids=lambda f: f.id)
def test_rule_matches_the_processor_size_only_count_for_every_sampled_size(
    family: Family,
) -> None:
    sizes = [*EXTREMES, *family.extremes, *RANDOM_SIZES]
    check_size_only(sizes, lambda s: _rule_outcome(family.rule, s), _size_only_outcome(family))
    assert len(sizes) >= 1_000 + len(EXTREMES)


@pytest.mark.parametrize("family", FAMILIES, ids=lambda f: f.id)
def test_rule_and_size_only_count_match_the_processor_run_on_real_images(family: Family) -> None:
    sizes = _full_path_sizes(family)
    check_real_images(
        sizes,
        lambda s: _rule_outcome(family.rule, s),
        _size_only_outcome(family),
        lambda image: outcome(lambda: family.full_tokens(image), ValueError),
    )
    assert len(sizes) == FULL_PATH_SIZES_PER_FAMILY


@pytest.mark.parametrize("family", QWEN_FAMILIES, ids=lambda f: f.id)
def test_real_image_sample_covers_refusals_and_both_resize_branches(family: Family) -> None:
    sizes = _full_path_sizes(family)
    assert any(_rule_outcome(family.rule, s) == REFUSED for s in sizes)
    assert family.max_pixels is not None
    assert any(s[0] * s[1] > family.max_pixels for s in sizes)
    assert any(s[0] * s[1] < family.min_pixels for s in sizes)


# -- downscale_size ------------------------------------------------------------------------

SIDES = st.integers(min_value=1, max_value=MAX_SIDE_PX)
TOKEN_CAPS = st.none() | st.integers(min_value=0, max_value=20_000)
PIXEL_CAPS = st.none() | st.integers(min_value=1, max_value=20_000_000)


def _check_downscale(
    family: Family, width: int, height: int, max_tokens: int | None, max_pixels: int | None
) -> None:
    rule, factor = family.rule, family.factor
    original = _rule_outcome(rule, (width, height))
    try:
        new_width, new_height = rule.downscale_size(
            width, height, max_tokens=max_tokens, max_pixels=max_pixels
        )
    except UnsupportedImageSizeError:
        assert family.max_pixels is not None, "a fixed-cost family refused to downscale"
        if original != REFUSED:
            pixel_cap = family.max_pixels if max_pixels is None else max_pixels
            grid_cap = min(family.max_pixels, pixel_cap) // factor**2
            grid_cap = grid_cap if max_tokens is None else min(grid_cap, max_tokens)
            min_grid = -(-family.min_pixels // factor**2)
            exists = legal_grid_exists(
                width, height, factor=factor, min_grid=min_grid, grid_cap=grid_cap
            )
            assert not exists, "needless refusal"
        return
    assert original != REFUSED, "a size the processor refuses was downscaled"
    tokens = rule.image_tokens(new_width, new_height).tokens
    assert tokens == family.cheap_tokens(new_width, new_height)
    assert max_pixels is None or new_width * new_height <= max_pixels
    if family.max_pixels is not None:
        assert max_tokens is None or tokens <= max_tokens
    if (new_width, new_height) == (width, height):
        return
    for new_side, side in ((new_width, width), (new_height, height)):
        assert new_side <= side or side < factor
    if family.max_pixels is not None:
        assert new_width % factor == new_height % factor == 0
        assert tokens == (new_width // factor) * (new_height // factor)


@pytest.mark.parametrize("family", FAMILIES, ids=lambda f: f.id)
@settings(max_examples=1_000, deadline=None, derandomize=True, database=None)
@given(width=SIDES, height=SIDES, max_tokens=TOKEN_CAPS, max_pixels=PIXEL_CAPS)
@example(width=10_000, height=55, max_tokens=300, max_pixels=None)
@example(width=10_000, height=100, max_tokens=300, max_pixels=None)
@example(width=1_000, height=1_000, max_tokens=100, max_pixels=None)
@example(width=10_000, height=1, max_tokens=None, max_pixels=100)
@example(width=4_032, height=3_024, max_tokens=1_280, max_pixels=1_003_520)
def test_downscale_size_fits_both_caps_and_the_processor_agrees(
    family: Family, width: int, height: int, max_tokens: int | None, max_pixels: int | None
) -> None:
    _check_downscale(family, width, height, max_tokens, max_pixels)
