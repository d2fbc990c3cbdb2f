"""Tile and anyres vision rules against transformers' own processors: 0 mismatches, errors included.

The families: LLaVA-NeXT, LLaVA-OneVision, InternVL3 (-hf), Idefics3, SmolVLM2 and Llama 4.
Each processor is built from the built-in's values, PIL backends only (no torch), with a tiny
local tokenizer whose vocabulary is the processor's special tokens (plus "\\n" and "\\n\\n",
which the Llama 3 and SmolLM2 tokenizers both keep as one token each).

Two oracle paths per family, and a test that they agree:

* size-only, for thousands of sizes: the processor's own count, as vLLM calls it
  (``_get_num_multimodal_tokens`` for LLaVA-NeXT, LLaVA-OneVision, InternVL and Idefics3).
  ``SmolVLMProcessor`` has none, so its image processor's ``get_number_of_image_patches``
  feeds the module's own ``get_image_prompt_string``, which is tokenized and counted.
* full, for a smaller sample: the whole processor run on a real Pillow image, counting the
  ids it puts in place of the placeholder (all of them, for the families whose placeholder
  expands into several kinds of token).

Llama 4 is the exception: ``Llama4ImageProcessor`` is torchvision-only. Its canvas choice is
replicated here by running transformers' own ``find_supported_resolutions`` and
``get_best_fit`` source, read from the installed module, against a NumPy stand-in for torch
(float32, as torch divides an int64 tensor by a Python int); the prompt that the canvas
expands into is the real ``Llama4Processor``, in both paths. What is cross-checked for Llama 4
is therefore transformers' canvas source and prompt code, not torch or torchvision themselves.

Besides the shipped values, each family is also checked with changed processor values (other
tile counts, edges, strategies), to show the rules read them rather than assume them.

``LlavaOnevisionProcessor``, ``InternVLProcessor`` and ``SmolVLMProcessor`` take a video
processor, which cannot be built without torch; each is used through a subclass that drops
that one attribute. ``SmolVLMProcessor`` also insists on ``num2words`` (for video prompts)
while it is constructed, so a stand-in is patched in for the constructor only.
"""

from __future__ import annotations

import ast
import inspect
import random
from collections import defaultdict
from collections.abc import Callable
from dataclasses import dataclass
from functools import cache, lru_cache
from types import SimpleNamespace
from typing import Any
from unittest import mock

import numpy as np
import pytest
from hypothesis import example, given, settings
from hypothesis import strategies as st
from PIL import Image
from tokenizers import Regex, Tokenizer, models, pre_tokenizers
from transformers import BatchFeature, PreTrainedTokenizerFast
from transformers.image_processing_utils import BaseImageProcessor
from transformers.image_utils import SizeDict
from transformers.models.got_ocr2.image_processing_pil_got_ocr2 import GotOcr2ImageProcessorPil
from transformers.models.idefics3.image_processing_pil_idefics3 import Idefics3ImageProcessorPil
from transformers.models.idefics3.processing_idefics3 import Idefics3Processor
from transformers.models.internvl.processing_internvl import InternVLProcessor
from transformers.models.llama4 import processing_llama4
from transformers.models.llama4.processing_llama4 import Llama4Processor
from transformers.models.llava_next.image_processing_pil_llava_next import (
    LlavaNextImageProcessorPil,
)
from transformers.models.llava_next.processing_llava_next import LlavaNextProcessor
from transformers.models.llava_onevision.image_processing_pil_llava_onevision import (
    LlavaOnevisionImageProcessorPil,
)
from transformers.models.llava_onevision.processing_llava_onevision import LlavaOnevisionProcessor
from transformers.models.smolvlm import processing_smolvlm
from transformers.models.smolvlm.image_processing_pil_smolvlm import SmolVLMImageProcessorPil

from sidecar.errors import UnsupportedImageSizeError
from sidecar.profiles import VISION_RULES, load_profile
from sidecar.profiles.builtins import BUILTIN_MODELS
from sidecar.vision import VisionRule, family_rule
from sidecar.vision.anyres import AnyresRule, costliest_image
from sidecar.vision.tiling import cap_pixels, fit_inside
from tests.support.oracle_helpers import (
    COMMON_EXTREMES,
    MAX_SIDE_PX,
    REAL_IMAGE_MAX_PIXELS,
    Size,
    check_real_images,
    check_size_only,
    log_uniform_sizes,
    outcome,
    without_video,
)

pytestmark = pytest.mark.oracle

SEED = 20_250_611
RANDOM_SIZES_PER_FAMILY = 1_200
FULL_PATH_SIZES_PER_FAMILY = 20

Count = int | str  # a token count, or an error's name when the processor raises

LLAVA_NEXT = "llava-hf/llava-v1.6-mistral-7b-hf"
LLAVA_ONEVISION = "llava-hf/llava-onevision-qwen2-7b-ov-hf"
INTERNVL = "OpenGVLab/InternVL3-8B-hf"
IDEFICS3 = "HuggingFaceM4/Idefics3-8B-Llama3"
SMOLVLM = "HuggingFaceTB/SmolVLM2-2.2B-Instruct"
LLAMA4 = "meta-llama/Llama-4-Scout-17B-16E-Instruct"


# -- tokenizers and processors -------------------------------------------------------------


def _tokenizer(specials: list[str], named: dict[str, str] | None = None) -> PreTrainedTokenizerFast:
    """A real fast tokenizer that knows the special tokens and keeps "\\n\\n" as one token."""
    unknown = "<unk>"
    vocab = {unknown: 0, "\n": 1, "\n\n": 2} | {token: 3 + i for i, token in enumerate(specials)}
    backend = Tokenizer(models.WordLevel(vocab=vocab, unk_token=unknown))
    backend.pre_tokenizer = pre_tokenizers.Split(Regex(r"\n+|[^\n]+"), behavior="isolated")
    tokenizer = PreTrainedTokenizerFast(
        tokenizer_object=backend, unk_token=unknown, extra_special_tokens=named or {}
    )
    tokenizer.add_special_tokens({"additional_special_tokens": specials})
    return tokenizer


def _token_counter(tokenizer: PreTrainedTokenizerFast) -> Callable[[str], int]:
    """Tokens in a prompt; a family's prompts repeat per grid shape, so each is tokenized once."""

    @cache
    def count(prompt: str) -> int:
        return len(tokenizer(prompt, add_special_tokens=False)["input_ids"])

    return count


def _preprocessor(model: str) -> dict[str, Any]:
    return dict(BUILTIN_MODELS[model].preprocessor)


def _rule(model: str, changes: dict[str, Any] | None) -> VisionRule:
    """The built-in's rule, or one built from its files with some processor values changed."""
    if changes is None:
        return load_profile(model).vision
    config = BUILTIN_MODELS[model].config
    model_type = config["model_type"]
    return VISION_RULES[model_type](model_type, config, _preprocessor(model) | changes)


def _placeholder_count(processor: Any, text: str, ids: set[int]) -> Callable[[Image.Image], int]:
    """Counts the ``ids`` the processor expands ``text`` into for one real image."""

    def count(image: Image.Image) -> int:
        output = processor(images=[image], text=text, return_tensors=None)
        return sum(1 for token in output["input_ids"][0] if token in ids)

    return count


# -- families ---------------------------------------------------------------------------------


@dataclass(frozen=True)
class Family:
    """One model family: the sidecar's rule and the two oracle paths for it."""

    id: str
    rule: VisionRule
    cheap_tokens: Callable[[int, int], int]  # (width, height) -> tokens
    full_tokens: Callable[[Image.Image], int]  # a real image -> tokens
    extremes: tuple[Size, ...]
    floor_tokens: Callable[[int, int, int | None], int]  # fewest tokens downscale may reach


def _llava_next_family(changes: dict[str, Any] | None = None) -> Family:
    pre = _preprocessor(LLAVA_NEXT) | (changes or {})
    image_processor = LlavaNextImageProcessorPil(
        size=pre["size"],
        crop_size=pre["crop_size"],
        image_grid_pinpoints=pre["image_grid_pinpoints"],
        do_pad=pre["do_pad"],
    )
    processor = LlavaNextProcessor(
        image_processor=image_processor,
        tokenizer=_tokenizer(["<image>"]),
        patch_size=pre["patch_size"],
        vision_feature_select_strategy=pre["vision_feature_select_strategy"],
        num_additional_image_tokens=pre["num_additional_image_tokens"],
    )
    return _anyres_family("llava-next", _rule(LLAVA_NEXT, changes), processor, 336)


def _llava_onevision_family(changes: dict[str, Any] | None = None) -> Family:
    pre = _preprocessor(LLAVA_ONEVISION) | (changes or {})
    image_processor = LlavaOnevisionImageProcessorPil(
        size=pre["size"], image_grid_pinpoints=pre["image_grid_pinpoints"], do_pad=pre["do_pad"]
    )
    processor = without_video(LlavaOnevisionProcessor)(
        image_processor=image_processor,
        tokenizer=_tokenizer(["<image>", "<video>"]),
        num_image_tokens=pre["num_image_tokens"],
        vision_feature_select_strategy=pre["vision_feature_select_strategy"],
        vision_aspect_ratio=pre["vision_aspect_ratio"],
    )
    return _anyres_family("llava-onevision", _rule(LLAVA_ONEVISION, changes), processor, 384)


def _anyres_family(family_id: str, rule: VisionRule, processor: Any, tile: int) -> Family:
    """LLaVA-NeXT and LLaVA-OneVision: one ``<image>`` expanded, sampled around the pinpoints."""
    return Family(
        family_id,
        rule,
        _count_method(processor),
        _placeholder_count(processor, "<image>", {processor.image_token_id}),
        _anyres_extremes(processor.image_processor.image_grid_pinpoints, tile),
        _aspect_floor(rule, tile),
    )


def _internvl_family(changes: dict[str, Any] | None = None) -> Family:
    pre = _preprocessor(INTERNVL) | (changes or {})
    tokens = {"start_image_token": "<img>", "end_image_token": "</img>"}
    tokens |= {"context_image_token": "<IMG_CONTEXT>", "video_token": "<video>"}
    processor = without_video(InternVLProcessor)(
        image_processor=GotOcr2ImageProcessorPil(
            size=pre["size"], min_patches=pre["min_patches"], max_patches=pre["max_patches"]
        ),
        tokenizer=_tokenizer(list(tokens.values()), tokens),
        image_seq_length=pre["image_seq_length"],
    )
    rule = _rule(INTERNVL, changes)

    def patches(width: int, height: int) -> dict[str, Any]:
        kwargs = processor._merge_kwargs()["images_kwargs"]
        return {
            "num_patches": [
                processor.image_processor.get_number_of_image_patches(height, width, kwargs)
            ]
        }

    return Family(
        "internvl3",
        rule,
        _replacement_count(processor, patches),
        _placeholder_count(processor, "<IMG_CONTEXT>", set(processor.image_token_ids)),
        _internvl_extremes(448),
        lambda width, height, max_pixels: rule.image_tokens(1, 1).tokens,  # one tile, any shape
    )


_ROW_COL_TOKENS = [f"<row_{r}_col_{c}>" for r in range(1, 7) for c in range(1, 7)]
_IDEFICS_TOKENS = ["<fake_token_around_image>", "<image>", "<end_of_utterance>", "<global-img>"]


def _idefics3_family(changes: dict[str, Any] | None = None) -> Family:
    pre = _preprocessor(IDEFICS3) | (changes or {})
    processor = Idefics3Processor(
        image_processor=Idefics3ImageProcessorPil(
            size=pre["size"],
            max_image_size=pre["max_image_size"],
            do_image_splitting=pre["do_image_splitting"],
        ),
        tokenizer=_tokenizer(_IDEFICS_TOKENS + _ROW_COL_TOKENS),
        image_seq_len=pre["image_seq_len"],
    )
    rule = _rule(IDEFICS3, changes)

    def grid(width: int, height: int) -> dict[str, Any]:
        kwargs = processor._merge_kwargs()["images_kwargs"]
        _, rows, columns = processor.image_processor.get_number_of_image_patches(
            height, width, kwargs
        )
        return {"rows": [[rows]], "cols": [[columns]]}

    return Family(
        "idefics3",
        rule,
        _replacement_count(processor, grid),
        lambda image: len(processor(images=[image], text="<image>")["input_ids"][0]),
        _split_extremes(1456, 364),
        _flattest_floor(rule),
    )


def _smolvlm_family(changes: dict[str, Any] | None = None) -> Family:
    pre = _preprocessor(SMOLVLM) | (changes or {})
    image_processor = SmolVLMImageProcessorPil(
        size=pre["size"], max_image_size=pre["max_image_size"]
    )
    tokenizer = _tokenizer(_IDEFICS_TOKENS + _ROW_COL_TOKENS + ["<video>"])
    count_tokens = _token_counter(tokenizer)
    with mock.patch.object(processing_smolvlm, "num2words", str):  # only for video prompts
        processor = without_video(processing_smolvlm.SmolVLMProcessor)(
            image_processor=image_processor,
            tokenizer=tokenizer,
            video_processor=None,
            image_seq_len=pre["image_seq_len"],
        )

    def cheap(width: int, height: int) -> int:
        _, rows, columns = image_processor.get_number_of_image_patches(height, width, {})
        prompt = processing_smolvlm.get_image_prompt_string(
            rows,
            columns,
            processor.image_seq_len,
            fake_token_around_image=processor.fake_image_token,
            image_token=processor.image_token,
            global_image_token=processor.global_image_token,
        )
        return count_tokens(prompt)

    rule = _rule(SMOLVLM, changes)
    return Family(
        "smolvlm2",
        rule,
        cheap,
        lambda image: len(processor(images=[image], text="<image>")["input_ids"][0]),
        _split_extremes(1536, 384),
        _flattest_floor(rule),
    )


def _replacement_count(
    processor: Any, size_inputs: Callable[[int, int], dict[str, Any]]
) -> Callable[[int, int], int]:
    """Tokens of the markup the processor puts in place of one image, from its size alone.

    The processor's own ``replace_image_token`` fed by its image processor's size-only patch
    count (with the processor's merged image kwargs, as its own shortcut takes them), tokenized
    by its tokenizer: what the prompt holds, wrappers and merged newlines
    included. ``_get_num_multimodal_tokens`` is no stand-in here: from transformers 5.25 it
    counts InternVL's and Idefics3's context tokens only, leaving out the markup around them.
    """
    count_tokens = _token_counter(processor.tokenizer)
    return lambda width, height: count_tokens(
        processor.replace_image_token(size_inputs(width, height), 0)
    )


def _count_method(processor: Any) -> Callable[[int, int], int]:
    def count(width: int, height: int) -> int:
        counts = processor._get_num_multimodal_tokens(image_sizes=[(height, width)])
        return int(counts.num_image_tokens[0])

    return count


# -- Llama 4: transformers' canvas source on a NumPy stand-in for torch -----------------------


def _llama4_canvas_functions() -> SimpleNamespace:
    """``find_supported_resolutions`` and ``get_best_fit``, exec'd from the installed module."""
    module_path = inspect.getfile(processing_llama4).replace(
        "processing_llama4.py", "image_processing_llama4.py"
    )
    with open(module_path, encoding="utf-8") as source_file:
        tree = ast.parse(source_file.read())
    wanted = {"get_factors", "find_supported_resolutions", "get_best_fit"}
    functions = [n for n in tree.body if isinstance(n, ast.FunctionDef) and n.name in wanted]
    assert {f.name for f in functions} == wanted
    torch_stand_in = SimpleNamespace(
        Tensor=np.ndarray, where=np.where, min=np.min, max=np.max, argmin=np.argmin
    )
    namespace: dict[str, Any] = {
        "torch": torch_stand_in,
        "SizeDict": SizeDict,
        "defaultdict": defaultdict,
        "lru_cache": lru_cache,
    }
    code = compile(ast.Module(body=functions, type_ignores=[]), module_path, "exec")
    exec(code, namespace)  # noqa: S102 - transformers' own source, read from the installed package
    return SimpleNamespace(**{name: namespace[name] for name in wanted})


_LLAMA4 = _llama4_canvas_functions()


class _Llama4CanvasProcessor(BaseImageProcessor):  # type: ignore[misc]
    """Stands in for the torchvision-only image processor: tiles' shape and aspect ratios only."""

    def __init__(self, size: dict[str, int], max_patches: int, resize_to_max_canvas: bool):
        super().__init__()
        self.tile = size["height"]
        self.max_patches = max_patches
        self.resize_to_max_canvas = resize_to_max_canvas

    def ratios(self, width: int, height: int) -> tuple[int, int]:
        tile = SizeDict(height=self.tile, width=self.tile)
        # torch.tensor(list of int tuples) / int is float32; NumPy needs float32 input for that.
        canvases = np.array(
            _LLAMA4.find_supported_resolutions(self.max_patches, tile), dtype=np.float32
        )
        canvas = _LLAMA4.get_best_fit((height, width), canvases, self.resize_to_max_canvas)
        return int(canvas[0]) // self.tile, int(canvas[1]) // self.tile

    def __call__(self, images: list[Image.Image], **kwargs: Any) -> BatchFeature:
        ratios = [self.ratios(*image.size) for image in images]
        tiles = [np.broadcast_to(np.float32(0), (1, 3, self.tile, self.tile)) for _ in images]
        return BatchFeature({"pixel_values": tiles, "aspect_ratios": ratios})


def _llama4_family(changes: dict[str, Any] | None = None) -> Family:
    pre = _preprocessor(LLAMA4) | (changes or {})
    specials = ["<|image|>", "<|image_start|>", "<|image_end|>", "<|patch|>"]
    specials += ["<|tile_x_separator|>", "<|tile_y_separator|>"]
    canvas = _Llama4CanvasProcessor(pre["size"], pre["max_patches"], pre["resize_to_max_canvas"])
    processor = Llama4Processor(
        image_processor=canvas,
        tokenizer=_tokenizer(specials),
        patch_size=pre["patch_size"],
        pixel_shuffle_ratio=pre["pixel_shuffle_ratio"],
    )
    tile_shape = [np.broadcast_to(np.float32(0), (1, 3, canvas.tile, canvas.tile))]
    count_tokens = _token_counter(processor.tokenizer)

    def cheap(width: int, height: int) -> int:
        inputs = {"pixel_values": tile_shape, "aspect_ratios": [canvas.ratios(width, height)]}
        return count_tokens(processor.replace_image_token(inputs, image_idx=0))

    rule = _rule(LLAMA4, changes)
    return Family(
        "llama4",
        rule,
        cheap,
        lambda image: len(
            processor(images=[image], text="<|image|>", return_tensors=None)["input_ids"][0]
        ),
        _llama4_extremes(canvas.tile),
        _aspect_floor(rule, canvas.tile),
    )


# -- sizes ------------------------------------------------------------------------------------


def _around(width: int, height: int) -> list[Size]:
    return [(max(1, width + dw), max(1, height + dh)) for dw in (-1, 0, 1) for dh in (-1, 0, 1)]


def _anyres_extremes(pinpoints: list[list[int]], tile: int) -> tuple[Size, ...]:
    """Each pinpoint and its neighbours, tiles, and aspect ratios far past every pinpoint."""
    sizes: list[Size] = []
    for height, width in pinpoints:
        sizes += [*_around(width, height), (width * 3, height * 3), (width // 2, height // 2)]
    sizes += _around(tile, tile) + _around(tile // 2, tile // 4) + _around(tile // 4, tile // 2)
    for long_side in (1_000, 5_000, MAX_SIDE_PX):
        for short_side in (1, 2, 3, 7, 50, 333):
            sizes += [(long_side, short_side), (short_side, long_side)]
    return tuple(sizes)


def _internvl_extremes(tile: int) -> tuple[Size, ...]:
    """Exact grids, their neighbours, and the squares where the area tie-break flips."""
    sizes: list[Size] = []
    for columns in range(1, 13):
        for rows in range(1, 13 // columns + 1):
            sizes += _around(columns * tile, rows * tile)
    for side in (316, 317, 633, 634, 949, 950, 951):  # 0.5 * 448**2 * k**2 around k = 1, 2, 3
        sizes += _around(side, side)
    sizes += [(tile * 12, tile), (tile, tile * 12), (tile * 13, tile), (tile * 2, tile * 7)]
    return tuple(sizes)


def _split_extremes(longest: int, crop: int) -> tuple[Size, ...]:
    """Images whose resized short side lands on, just under and just over each crop boundary."""
    sizes: list[Size] = []
    for crops in range(1, longest // crop + 1):
        for delta in (-3, -2, -1, 0, 1, 2, 3):
            short = crops * crop + delta
            sizes += [(longest, short), (short, longest)]
            sizes += [(longest * 2, short * 2 + 1), (short * 3 - 1, longest * 3)]
    sizes += [(longest + 1, longest), (longest, longest + 1), (4096, 4097), (4097, 4096)]
    sizes += [(1, 1), (10, 10), (100, 100), (crop, crop), (crop + 1, crop), (1, 2), (2, 1)]
    return tuple(sizes)


def _llama4_extremes(tile: int) -> tuple[Size, ...]:
    sizes: list[Size] = []
    for rows in range(1, 17):
        for columns in range(1, 16 // rows + 1):
            sizes += _around(columns * tile, rows * tile)
    sizes += [(tile * 16, tile), (tile, tile * 17), (tile * 5, tile * 5), (tile * 4 + 1, tile * 4)]
    return tuple(sizes)


EXTREMES: tuple[Size, ...] = (*COMMON_EXTREMES, (2, 1), (2, MAX_SIDE_PX), (MAX_SIDE_PX, 3))
RANDOM_SIZES = list(log_uniform_sizes(random.Random(SEED), RANDOM_SIZES_PER_FAMILY))


def _full_path_sizes(family: Family) -> list[Size]:
    """Extremes cheap to materialise, a photo, then small random sizes."""
    chosen: list[Size] = [(1, 1), (1, 2), (2, 1), (1, MAX_SIDE_PX), (MAX_SIDE_PX, 1), (3, 7)]
    chosen += [(MAX_SIDE_PX, 37), (41, MAX_SIDE_PX), (1600, 1200)]
    extremes = [s for s in family.extremes if s[0] * s[1] <= REAL_IMAGE_MAX_PIXELS]
    chosen += random.Random(SEED + 2).sample(extremes, 7)
    missing = FULL_PATH_SIZES_PER_FAMILY - len(chosen)
    rng = random.Random(SEED + 1)
    chosen += log_uniform_sizes(rng, missing, max_pixels=REAL_IMAGE_MAX_PIXELS)
    return chosen


# -- downscale floors: the fewest tokens the family's downscale promises to reach ---------------


def _aspect_floor(rule: VisionRule, tile: int) -> Callable[[int, int, int | None], int]:
    """Anyres and Llama 4 keep the aspect ratio: the cheapest is the image fitted into one tile."""

    def floor(width: int, height: int, max_pixels: int | None) -> int:
        fitted = cap_pixels(*fit_inside(width, height, tile, tile), max_pixels)
        return rule.image_tokens(*fitted).tokens

    return floor


def _flattest_floor(rule: VisionRule) -> Callable[[int, int, int | None], int]:
    """Idefics3 and SmolVLM flatten the short side: one row (or column) of crops at the least."""

    def floor(width: int, height: int, max_pixels: int | None) -> int:
        flattest = cap_pixels(*((width, 1) if width >= height else (1, height)), max_pixels)
        original = cap_pixels(width, height, max_pixels)
        return min(rule.image_tokens(*flattest).tokens, rule.image_tokens(*original).tokens)

    return floor


FAMILIES: list[Family] = [
    _llava_next_family(),
    _llava_onevision_family(),
    _internvl_family(),
    _idefics3_family(),
    _smolvlm_family(),
    _llama4_family(),
]
BY_ID = {family.id: family for family in FAMILIES}


_ERRORS = (ValueError, ZeroDivisionError, UnsupportedImageSizeError)


def _outcome(count: Callable[[], int]) -> Count:
    """The count, or the name of the error it raised: rule and processor must fail alike."""
    return outcome(count, *_ERRORS, named=True)


def _rule_outcome(rule: VisionRule, size: Size) -> Count:
    return _outcome(lambda: rule.image_tokens(*size).tokens)


def _size_only_outcome(family: Family) -> Callable[[Size], Count]:
    return lambda size: _outcome(lambda: family.cheap_tokens(*size))


# -- token counts -------------------------------------------------------------------------------


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
        lambda image: _outcome(lambda: family.full_tokens(image)),
    )
    assert len(sizes) == FULL_PATH_SIZES_PER_FAMILY


@pytest.mark.parametrize("family_id", ["idefics3", "smolvlm2"])
@pytest.mark.parametrize("size", [(1, 1), (10, 10), (64, 48), (300, 300), (20, 15)], ids=str)
def test_small_images_cost_as_much_as_large_ones_of_their_shape(family_id: str, size: Size) -> None:
    family = BY_ID[family_id]
    image = Image.new("RGB", size, (200, 10, 10))
    predicted = family.rule.image_tokens(*size).tokens
    assert predicted == family.full_tokens(image) == family.cheap_tokens(*size)
    # Upscaled to the longest edge first: an icon is split like a photo 40 times its size
    # (40, not more: 300 x 300 times 100 is past vLLM's decode limit, refused by every rule).
    assert predicted == family.rule.image_tokens(size[0] * 40, size[1] * 40).tokens
    if size[0] == size[1]:
        assert predicted == family.rule.max_image_tokens().tokens  # the full 4 x 4 grid


@pytest.mark.parametrize(
    "size",
    [(1, MAX_SIDE_PX), (MAX_SIDE_PX, 1), (2, 5_000), (7, MAX_SIDE_PX), (MAX_SIDE_PX, 13),
     (1_009, 1), (1, 1_007), (337, 1), (1, 673), (3_000, 1_000), (1_000, 3_001)],
    ids=str,
)  # fmt: skip
def test_llava_next_matches_the_processor_at_extreme_aspect_ratios(size: Size) -> None:
    family = BY_ID["llava-next"]
    image = Image.new("RGB", size, (0, 90, 200))
    assert family.rule.image_tokens(*size).tokens == family.full_tokens(image)


def test_anyres_costliest_image_is_real_and_no_sampled_size_costs_more() -> None:
    for family_id in ("llava-next", "llava-onevision"):
        family = BY_ID[family_id]
        rule = family_rule(family.rule)
        assert isinstance(rule, AnyresRule)
        tokens, size = costliest_image(rule)
        assert family.rule.max_image_tokens().tokens == tokens == family.cheap_tokens(*size)
        sizes = [*EXTREMES, *family.extremes, *RANDOM_SIZES]
        assert max(family.rule.image_tokens(*s).tokens for s in sizes) <= tokens


@pytest.mark.parametrize(
    ("family_id", "size", "tokens"),
    [
        ("llava-next", (672, 672), 2_928),
        ("llava-onevision", (1_152, 1_407), 8_765),  # anyres_max_9 lets a padded grid keep more
        ("internvl3", (448 * 12, 448), 3_330),
        ("idefics3", (1_456, 1_456), 2_912),
        ("smolvlm2", (1_536, 1_536), 1_416),
        ("llama4", (336 * 4, 336 * 4), 2_467),
    ],
    ids=lambda v: v if isinstance(v, str) else None,
)
def test_max_image_tokens_is_what_the_costliest_image_costs_in_the_processor(
    family_id: str, size: Size, tokens: int
) -> None:
    family = BY_ID[family_id]
    assert family.rule.max_image_tokens().tokens == tokens == family.cheap_tokens(*size)
    sizes = [*EXTREMES, *family.extremes, *RANDOM_SIZES]
    assert max(family.rule.image_tokens(*s).tokens for s in sizes) <= tokens


@pytest.mark.parametrize("family", FAMILIES, ids=lambda f: f.id)
def test_tile_rules_have_no_pixel_knob_describe_themselves_and_add_no_wrapper(
    family: Family,
) -> None:
    assert family.rule.with_pixel_range(200_704, 1_003_520) is family.rule
    assert f"{family.rule.max_image_tokens().tokens:,}" in family.rule.describe()
    assert family.rule.image_tokens(640, 480).wrapper_tokens == 0


_ANYRES_MAX_4 = {"vision_aspect_ratio": "anyres_max_4"}
_SMOLVLM_512 = {"size": {"longest_edge": 2048}, "max_image_size": {"longest_edge": 512}}
VARIANTS: list[tuple[str, Callable[[dict[str, Any]], Family], dict[str, Any]]] = [
    ("llava-next-full-strategy", _llava_next_family, {"vision_feature_select_strategy": "full"}),
    ("llava-onevision-anyres-max-4", _llava_onevision_family, _ANYRES_MAX_4),
    ("internvl-2-to-6-tiles", _internvl_family, {"min_patches": 2, "max_patches": 6}),
    ("internvl-one-tile", _internvl_family, {"max_patches": 1}),
    ("idefics3-past-4096-px", _idefics3_family, {"size": {"longest_edge": 16 * 364}}),
    ("idefics3-no-splitting", _idefics3_family, {"do_image_splitting": False}),
    ("smolvlm-512-px-crops", _smolvlm_family, _SMOLVLM_512 | {"image_seq_len": 64}),
    ("llama4-4-tiles", _llama4_family, {"max_patches": 4}),
    ("llama4-max-canvas", _llama4_family, {"resize_to_max_canvas": True}),
]


@pytest.mark.parametrize(("variant", "build", "changes"), VARIANTS, ids=[v[0] for v in VARIANTS])
def test_rule_follows_non_default_processor_values_as_the_processor_does(
    variant: str, build: Callable[[dict[str, Any]], Family], changes: dict[str, Any]
) -> None:
    family = build(changes)
    assert family.rule != BY_ID[family.id].rule, "the changed values were not read"
    sizes = [*EXTREMES, *family.extremes, *RANDOM_SIZES[:300]]
    check_size_only(sizes, lambda s: _rule_outcome(family.rule, s), _size_only_outcome(family))
    image = Image.new("RGB", (1_234, 567), (9, 9, 9))
    assert family.rule.image_tokens(*image.size).tokens == family.full_tokens(image)


# -- downscale_size -----------------------------------------------------------------------------

SIDES = st.integers(min_value=1, max_value=MAX_SIDE_PX)
TOKEN_CAPS = st.none() | st.integers(min_value=0, max_value=10_000)
PIXEL_CAPS = st.none() | st.integers(min_value=1, max_value=20_000_000)


@pytest.mark.parametrize("family", FAMILIES, ids=lambda f: f.id)
@settings(max_examples=300, deadline=None, derandomize=True, database=None)
@given(width=SIDES, height=SIDES, max_tokens=TOKEN_CAPS, max_pixels=PIXEL_CAPS)
@example(width=4_032, height=3_024, max_tokens=1_500, max_pixels=None)
@example(width=4_032, height=3_024, max_tokens=None, max_pixels=1_003_520)
@example(width=1_000, height=1_000, max_tokens=1_100, max_pixels=None)
@example(width=10_000, height=55, max_tokens=900, max_pixels=None)
@example(width=10, height=10, max_tokens=500, max_pixels=None)
@example(width=1, height=1, max_tokens=0, max_pixels=1)
def test_downscale_size_fits_both_caps_and_the_processor_agrees(
    family: Family, width: int, height: int, max_tokens: int | None, max_pixels: int | None
) -> None:
    rule = family.rule
    original = rule.image_tokens(width, height).tokens
    try:
        new_width, new_height = rule.downscale_size(
            width, height, max_tokens=max_tokens, max_pixels=max_pixels
        )
    except UnsupportedImageSizeError:
        assert max_tokens is not None, "refused with no token cap"
        assert max_tokens < family.floor_tokens(width, height, max_pixels), "needless refusal"
        return
    tokens = rule.image_tokens(new_width, new_height).tokens
    assert tokens == family.cheap_tokens(new_width, new_height)
    assert max_tokens is None or tokens <= max_tokens
    assert max_pixels is None or new_width * new_height <= max_pixels
    assert 1 <= new_width <= width
    assert 1 <= new_height <= height
    fits = (max_tokens is None or original <= max_tokens) and (
        max_pixels is None or width * height <= max_pixels
    )
    assert ((new_width, new_height) == (width, height)) == fits


@pytest.mark.parametrize(
    ("family_id", "size", "max_tokens", "expected"),
    [
        # 4:3 photo, 4x3 tiles + thumbnail = 13 patches; 7 fit: the 3x2 grid, the nearest shape.
        ("internvl3", (4_032, 3_024), 2 + 256 * 7, (4_032, 2_688)),
        # A square needs 3x3 + 1; under 5 patches it stays square on one tile (area < 2 tiles').
        ("internvl3", (1_000, 1_000), 2 + 256 * 4, (633, 633)),
        # 4x3 crops; flattened to 2 rows of crops, the width kept.
        ("idefics3", (4_000, 3_000), 2 * (4 * 171 + 1) + 172, (4_000, 2_000)),
        # The 12-tile canvas of a 4:3 photo shrinks onto the 2x2 canvas, aspect ratio kept.
        ("llama4", (4_032, 3_024), 145 * 4 + 147, (672, 504)),
        # LLaVA-NeXT: fitted into one 336 px tile, the image lands on the smallest pinpoint.
        ("llava-next", (1_000, 1_000), 1_176, (336, 336)),
    ],
    ids=lambda v: v if isinstance(v, str) else None,
)
def test_downscale_size_lands_exactly_on_a_smaller_grid(
    family_id: str, size: Size, max_tokens: int, expected: Size
) -> None:
    family = BY_ID[family_id]
    assert family.rule.downscale_size(*size, max_tokens=max_tokens, max_pixels=None) == expected
    assert family.cheap_tokens(*expected) <= max_tokens
