"""Gemma 3, Pixtral, Mistral Small 3.1 and GLM-4.1V against transformers.

The oracle is transformers 5.24 itself, PIL backends only (no torch), built with ``from_dict``
from the shipped values the sidecar loads, and tiny local tokenizers whose vocabulary is just
the special tokens a processor inserts. Two oracle paths per family, as in
``test_vision_oracle.py``:

* size-only, for a thousand log-uniform sizes plus extremes:
  - Gemma 3: ``Gemma3Processor._get_num_multimodal_tokens`` (the soft tokens) plus its
    ``full_image_sequence`` run through the tokenizer (the frame);
  - Pixtral / Mistral Small: transformers' ``get_resize_output_image_size`` called the way the
    processor's ``resize`` calls it (on a channels-first array of the image's shape), then
    ``PixtralProcessor.replace_image_token``; an empty side is a refusal, as the processor's
    resize raises (the full path below shows it);
  - GLM-4.1V: ``Glm4vImageProcessorPil.get_number_of_image_patches`` divided by
    ``merge_size**2``, as ``Glm4vProcessor._get_num_multimodal_tokens`` does.
* full, for a smaller sample of real Pillow images: the processor's ``__call__``, counting
  what it puts in ``input_ids`` (Gemma 3, Pixtral). ``Glm4vProcessor`` needs a torch video
  processor to be built, so GLM runs its image processor and then the processor's own
  ``replace_image_token``.

``PixtralProcessor``'s module imports one size helper from the torchvision image processor;
the import below stands the PIL module's identical function in for it (a test checks that
the two are the same source text).
"""

from __future__ import annotations

import importlib
import inspect
import math
import random
import sys
import types
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
import pytest
from hypothesis import example, given, settings
from hypothesis import strategies as st
from PIL import Image
from tokenizers import AddedToken, Tokenizer, models, pre_tokenizers
from transformers import PreTrainedTokenizerFast
from transformers.image_utils import ChannelDimension
from transformers.models.gemma3.image_processing_pil_gemma3 import Gemma3ImageProcessorPil
from transformers.models.gemma3.processing_gemma3 import Gemma3Processor
from transformers.models.glm4v.image_processing_pil_glm4v import Glm4vImageProcessorPil
from transformers.models.glm4v.processing_glm4v import Glm4vProcessor
from transformers.models.pixtral import image_processing_pil_pixtral as pixtral_pil

from sidecar.errors import UnsupportedImageSizeError
from sidecar.profiles import load_profile
from sidecar.profiles.builtins import BUILTIN_MODELS
from sidecar.vision import VisionRule, family_rule
from sidecar.vision.glm4v import Glm4vSmartResizeRule
from sidecar.vision.pixtral import PixtralRule
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

SEED = 20_251_129
RANDOM_SIZES_PER_FAMILY = 1_000
GEMMA3 = "google/gemma-3-4b-it"
PIXTRAL = "mistral-community/pixtral-12b"
MISTRAL_SMALL = "mistralai/Mistral-Small-3.1-24B-Instruct-2503"
GLM4V = "zai-org/GLM-4.1V-9B-Thinking"
NEW_BUILTINS = [
    "google/gemma-3-4b-it",
    "google/gemma-3-12b-it",
    "google/gemma-3-27b-it",
    PIXTRAL,
    MISTRAL_SMALL,
    GLM4V,
]

Count = tuple[int, int] | str  # (prompt tokens, cross-attention states), or "refused"


@dataclass(frozen=True)
class Family:
    """One model family: the sidecar's rule and the two oracle paths for it."""

    id: str
    rule: VisionRule
    size_only: Callable[[int, int], tuple[int, int]]  # (width, height); ValueError if refused
    processed: Callable[[Image.Image], tuple[int, int]]  # a real image; ValueError if refused
    extremes: tuple[Size, ...]
    real_extremes: tuple[Size, ...]  # extremes cheap enough to materialise


def _tokenizer(
    specials: list[str], *, plain: tuple[str, ...] = (), **named: str
) -> PreTrainedTokenizerFast:
    """A real fast tokenizer whose vocabulary is the processor's special tokens (and ``plain``)."""
    unknown = "<unk>"
    vocab = {unknown: 0} | {token: i + 1 for i, token in enumerate([*specials, *plain])}
    backend = Tokenizer(models.WordLevel(vocab=vocab, unk_token=unknown))
    backend.pre_tokenizer = pre_tokenizers.WhitespaceSplit()
    tokenizer = PreTrainedTokenizerFast(
        tokenizer_object=backend, unk_token=unknown, extra_special_tokens=named
    )
    tokenizer.add_special_tokens({"additional_special_tokens": specials})
    # Gemma's tokenizer has "\n\n" as one token; here it is matched before pre-tokenizing.
    tokenizer.add_tokens([AddedToken(token, normalized=False) for token in plain])
    return tokenizer


def _image_processor_values(model: str, keys: set[str]) -> dict[str, Any]:
    return {k: v for k, v in BUILTIN_MODELS[model].preprocessor.items() if k in keys}


# -- Gemma 3 -------------------------------------------------------------------------------


def _gemma3_family() -> Family:
    preprocessor = BUILTIN_MODELS[GEMMA3].preprocessor
    image_processor = Gemma3ImageProcessorPil.from_dict(
        _image_processor_values(GEMMA3, {"size", "do_pan_and_scan"})
    )
    tokenizer = _tokenizer(
        ["<start_of_image>", "<end_of_image>", "<image_soft_token>"],
        plain=("\n\n",),
        boi_token="<start_of_image>",  # noqa: S106 - token names, not passwords
        eoi_token="<end_of_image>",  # noqa: S106
        image_token="<image_soft_token>",  # noqa: S106
    )
    processor = Gemma3Processor(
        image_processor=image_processor,
        tokenizer=tokenizer,
        image_seq_length=preprocessor["image_seq_length"],
    )
    sequence = tokenizer(processor.full_image_sequence)["input_ids"]
    frame = len(sequence) - processor.image_seq_length

    def size_only(width: int, height: int) -> tuple[int, int]:
        counts = processor._get_num_multimodal_tokens(image_sizes=[(height, width)])
        return int(counts.num_image_tokens[0]) + frame, 0

    def processed(image: Image.Image) -> tuple[int, int]:
        out = processor(images=[image], text=processor.boi_token, return_tensors=None)
        assert np.shape(out["pixel_values"]) == (1, 3, 896, 896)
        return len(out["input_ids"][0]), 0

    return Family("gemma3", load_profile(GEMMA3).vision, size_only, processed, (), ())


# -- Pixtral and Mistral Small 3.1 ----------------------------------------------------------


def _pixtral_processor_class() -> Any:
    """``PixtralProcessor`` without torch; ``sys.modules`` is left as it was."""
    torch_module = "transformers.models.pixtral.image_processing_pixtral"
    target = "transformers.models.pixtral.processing_pixtral"
    stub = types.ModuleType(torch_module)
    stub.get_resize_output_image_size = pixtral_pil.get_resize_output_image_size
    saved = {name: sys.modules.get(name) for name in (torch_module, target)}
    sys.modules[torch_module] = stub
    sys.modules.pop(target, None)
    try:
        return importlib.import_module(target).PixtralProcessor
    finally:
        for name, module in saved.items():
            if module is None:
                sys.modules.pop(name, None)
            else:
                sys.modules[name] = module


PIXTRAL_PROCESSOR = _pixtral_processor_class()
PIXTRAL_TOKENS = ["[IMG]", "[IMG_BREAK]", "[IMG_END]"]


def _pixtral_processor(model: str) -> Any:
    values = _image_processor_values(model, {"patch_size", "size"})
    image_processor = pixtral_pil.PixtralImageProcessorPil.from_dict(values)
    return PIXTRAL_PROCESSOR(
        image_processor=image_processor,
        tokenizer=_tokenizer(PIXTRAL_TOKENS),
        patch_size=values["patch_size"]["height"],
        spatial_merge_size=BUILTIN_MODELS[model].preprocessor["spatial_merge_size"],
    )


def _pixtral_family(family_id: str, model: str) -> Family:
    processor = _pixtral_processor(model)
    cell = processor.patch_size * processor.spatial_merge_size
    longest = processor.image_processor.size["longest_edge"]

    def size_only(width: int, height: int) -> tuple[int, int]:
        layout = np.broadcast_to(np.uint8(0), (3, height, width))  # no pixels behind it
        resized = pixtral_pil.get_resize_output_image_size(
            layout, (longest, longest), (cell, cell), input_data_format=ChannelDimension.FIRST
        )
        if 0 in resized:
            raise ValueError(f"{width}x{height} resizes to an empty image {resized}")
        text = processor.replace_image_token({"image_sizes": [resized]}, 0)
        return sum(text.count(token) for token in PIXTRAL_TOKENS), 0

    def processed(image: Image.Image) -> tuple[int, int]:
        out = processor(images=[image], text="[IMG]", return_tensors="np")
        return len(out["input_ids"][0]), 0

    extremes: list[Size] = []
    for height in (1, 2, 3, 4, 5):
        for width in (1, 2, 3, 100, longest, longest + 1, 2 * longest, 2 * longest + 1, 5_000):
            extremes += [(width, height), (height, width)]
    for side in (longest - 1, longest, longest + 1, cell - 1, cell, cell + 1, 5 * cell + 1):
        extremes += [(side, side), (side, longest), (3 * side, side)]
    real = ((1, 1), (100, 1), (100, 3), (3, 100), (longest + 1, 1), (2 * longest, 2), (5, 3))
    rule = load_profile(model).vision
    return Family(family_id, rule, size_only, processed, tuple(extremes), real)


# -- GLM-4.1V -------------------------------------------------------------------------------


def _glm4v_family() -> Family:
    values = _image_processor_values(
        GLM4V, {"size", "patch_size", "temporal_patch_size", "merge_size"}
    )
    image_processor = Glm4vImageProcessorPil.from_dict(values)
    merge_length = image_processor.merge_size**2
    image_token = "<|image|>"  # noqa: S105 - a token name, not a password
    stand_in = types.SimpleNamespace(image_processor=image_processor, image_token=image_token)

    def size_only(width: int, height: int) -> tuple[int, int]:
        return int(image_processor.get_number_of_image_patches(height, width, {})) // (
            merge_length
        ), 0

    def processed(image: Image.Image) -> tuple[int, int]:
        out = image_processor(images=image, return_tensors=None)
        text = Glm4vProcessor.replace_image_token(stand_in, out, 0)
        return text.count(image_token), 0

    factor = image_processor.patch_size * image_processor.merge_size
    frames = image_processor.temporal_patch_size
    low, high = values["size"]["shortest_edge"], values["size"]["longest_edge"]
    extremes: list[Size] = []
    for pixels in (low // frames, high // frames):
        side = math.isqrt(pixels)
        extremes += [(side + dw, side + dh) for dw in (-1, 0, 1) for dh in (-1, 0, 1)]
        extremes += [(side + factor // 2, side), (side + factor // 2 + 1, side)]
    for small in (1, 2, 3, 5, 7, 13, 27, 28, 29):
        extremes += [(small, small), (small, 200 * small), (small, 200 * small + 1)]
        extremes += [(200 * small + small // 2, small), (small, 1001), (1001, small)]
    extremes += [(factor // 2, factor // 2), (factor * 3 // 2, factor * 5 // 2)]
    real = ((1, 1), (5, 1001), (3, 600), (27, 27), (29, 5800), (80, 80), (1001, 5))
    rule = load_profile(GLM4V).vision
    return Family("glm4v", rule, size_only, processed, tuple(extremes), real)


EXTREMES: tuple[Size, ...] = (
    *COMMON_EXTREMES,
    *ASPECT_LIMIT_EXTREMES,
    (2, 1), (224, 224), (336, 336), (896, 896),
)  # fmt: skip

FAMILIES = [
    _gemma3_family(),
    _pixtral_family("pixtral-12b", PIXTRAL),
    _pixtral_family("mistral-small-3.1", MISTRAL_SMALL),
    _glm4v_family(),
]
FAMILY_IDS = [family.id for family in FAMILIES]
BY_ID = {family.id: family for family in FAMILIES}

RANDOM_SIZES = list(log_uniform_sizes(random.Random(SEED), RANDOM_SIZES_PER_FAMILY))


def _rule_outcome(rule: VisionRule, size: Size) -> Count:
    def count() -> tuple[int, int]:
        tokens = rule.image_tokens(*size)
        return tokens.tokens, tokens.cross_attention_tokens

    return outcome(count, UnsupportedImageSizeError)


def _size_only_outcome(family: Family) -> Callable[[Size], Count]:
    return lambda size: outcome(lambda: family.size_only(*size), ValueError)


@pytest.mark.parametrize("family", FAMILIES, ids=FAMILY_IDS)
def test_rule_matches_the_processor_size_only_count_for_every_sampled_size(
    family: Family,
) -> None:
    sizes = [*EXTREMES, *family.extremes, *RANDOM_SIZES]
    check_size_only(sizes, lambda s: _rule_outcome(family.rule, s), _size_only_outcome(family))
    assert len(sizes) >= RANDOM_SIZES_PER_FAMILY + len(EXTREMES)


def _real_image_sizes(family: Family) -> list[Size]:
    chosen = [(1, 1), (2, 3), (224, 224), (640, 480), (1920, 1080), (4032, 3024)]
    chosen += family.real_extremes
    rng = random.Random(SEED + 1)
    return chosen + list(log_uniform_sizes(rng, 16, max_pixels=REAL_IMAGE_MAX_PIXELS))


@pytest.mark.parametrize("family", FAMILIES, ids=FAMILY_IDS)
def test_rule_and_size_only_count_match_the_processor_run_on_real_images(family: Family) -> None:
    check_real_images(
        _real_image_sizes(family),
        lambda s: _rule_outcome(family.rule, s),
        _size_only_outcome(family),
        lambda image: outcome(lambda: family.processed(image), ValueError),
    )


# -- family-specific facts ------------------------------------------------------------------


def test_pixtral_processor_module_stand_in_is_transformers_own_function() -> None:
    torch_source = Path(pixtral_pil.__file__).with_name("image_processing_pixtral.py").read_text()
    assert inspect.getsource(pixtral_pil.get_resize_output_image_size) in torch_source
    assert inspect.getsource(pixtral_pil._num_image_tokens) in torch_source


@pytest.mark.parametrize(
    ("size", "processed"),
    [((100, 1), 8), ((100, 3), 8), ((2000, 3), 65), ((2000, 1), "refused")],
    ids=["1px-tall", "3px-tall", "3px-tall-shrunk", "1px-tall-refused"],
)
def test_pixtral_rule_follows_the_processor_where_the_size_only_count_swaps_the_sides(
    size: Size, processed: Count
) -> None:
    family = BY_ID["pixtral-12b"]
    processor = _pixtral_processor(PIXTRAL)
    result = outcome(lambda: family.processed(Image.new("RGB", size)), ValueError)
    assert result == (processed if processed == REFUSED else (processed, 0))
    assert _rule_outcome(family.rule, size) == result
    # transformers' own count reads an (h, w, 3) array with h in (1, 3) as channels-first.
    count = processor._get_num_multimodal_tokens(image_sizes=[(size[1], size[0])])
    assert count.num_image_tokens[0] != processed


def test_pixtral_refuses_an_image_whose_short_side_shrinks_to_nothing() -> None:
    family = BY_ID["pixtral-12b"]
    image = Image.new("RGB", (5000, 2))
    assert outcome(lambda: family.processed(image), ValueError) == REFUSED
    assert _rule_outcome(family.rule, (5000, 2)) == REFUSED
    # The size-only count of transformers calls it 0 tokens instead.
    processor = _pixtral_processor(PIXTRAL)
    assert processor._get_num_multimodal_tokens(image_sizes=[(2, 5000)]).num_image_tokens == [0]


def test_glm4v_prices_an_image_as_two_frames_so_its_bounds_are_halved() -> None:
    rule = family_rule(load_profile(GLM4V).vision)
    assert isinstance(rule, Glm4vSmartResizeRule)
    assert rule.max_image_tokens().tokens == 9_633_792 // (2 * 28 * 28) == 6_144
    # A 2,800 x 2,800 image is under longest_edge once, over it twice: GLM shrinks it.
    assert rule.image_tokens(2800, 2800).tokens < 100 * 100
    assert BY_ID["glm4v"].size_only(2800, 2800)[0] == rule.image_tokens(2800, 2800).tokens


# -- downscale_size ------------------------------------------------------------------------

SIDES = st.integers(min_value=1, max_value=MAX_SIDE_PX)
TOKEN_CAPS = st.none() | st.integers(min_value=0, max_value=8_000)
PIXEL_CAPS = st.none() | st.integers(min_value=1, max_value=20_000_000)


def _check_downscale(
    family: Family, width: int, height: int, max_tokens: int | None, max_pixels: int | None
) -> None:
    rule = family_rule(family.rule)  # the family's own type, behind the decode limit
    original = _rule_outcome(rule, (width, height))
    try:
        new_width, new_height = rule.downscale_size(
            width, height, max_tokens=max_tokens, max_pixels=max_pixels
        )
    except UnsupportedImageSizeError:
        assert family.id != "gemma3", "a fixed-cost family refused to downscale"
        if original == REFUSED:
            return
        if isinstance(rule, PixtralRule):
            assert max_tokens is not None
            assert max_tokens < rule.image_tokens(1, 1).tokens
        else:
            assert isinstance(rule, Glm4vSmartResizeRule)
            cap = rule.max_pixels // (rule.temporal_patch_size * rule.factor**2)
            cap = cap if max_tokens is None else min(cap, max_tokens)
            cap = cap if max_pixels is None else min(cap, max_pixels // rule.factor**2)
            min_grid = -(-rule.min_pixels // (rule.temporal_patch_size * rule.factor**2))
            exists = legal_grid_exists(
                width, height, factor=rule.factor, min_grid=min_grid, grid_cap=cap
            )
            assert not exists, "needless refusal"
        return
    assert original != REFUSED, "a size the processor refuses was downscaled"
    tokens = rule.image_tokens(new_width, new_height)
    assert (tokens.tokens, tokens.cross_attention_tokens) == family.size_only(new_width, new_height)
    assert max_pixels is None or new_width * new_height <= max_pixels
    if family.id != "gemma3":
        assert max_tokens is None or tokens.tokens <= max_tokens
    if (new_width, new_height) == (width, height):
        return
    cell = rule.factor if isinstance(rule, Glm4vSmartResizeRule) else 1
    for new_side, side in ((new_width, width), (new_height, height)):
        assert new_side <= side or side < cell
    if isinstance(rule, Glm4vSmartResizeRule):
        assert new_width % cell == new_height % cell == 0


@pytest.mark.parametrize("family", FAMILIES, ids=FAMILY_IDS)
@settings(max_examples=400, deadline=None, derandomize=True, database=None)
@given(width=SIDES, height=SIDES, max_tokens=TOKEN_CAPS, max_pixels=PIXEL_CAPS)
@example(width=10_000, height=55, max_tokens=300, max_pixels=None)
@example(width=4_032, height=3_024, max_tokens=1_000, max_pixels=1_003_520)
@example(width=1_000, height=3, max_tokens=20, max_pixels=None)
@example(width=20, height=3_000, max_tokens=50, max_pixels=None)
@example(width=1_025, height=1, max_tokens=None, max_pixels=100)
@example(width=640, height=480, max_tokens=1, max_pixels=None)
def test_downscale_size_fits_both_caps_and_the_processor_agrees(
    family: Family, width: int, height: int, max_tokens: int | None, max_pixels: int | None
) -> None:
    _check_downscale(family, width, height, max_tokens, max_pixels)
