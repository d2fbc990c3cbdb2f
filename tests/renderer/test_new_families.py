"""The new families' rules against vLLM 0.33's own multimodal processors, in one worker.

Each family's model directory is written offline (``tests.support.family_dirs``); one
``.tools/vllm-render/bin/python tests/renderer/vllm_processors.py`` process builds vLLM's
processor for every family and answers (a) the placeholder length vLLM's counting code gives
1,000 random sizes plus the extremes, and (b) the full ``processor(prompt, image)`` path on a
sample, which must agree with (a). The sidecar's rule, built from the same directory and
``--mm-processor-kwargs``, must give the same length for every size, and refuse exactly where
vLLM raises: 0 mismatches.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest

from sidecar.errors import ConfigurationError, UnsupportedImageSizeError
from sidecar.profiles import ProfileOverrides, load_profile
from sidecar.vision import at_index
from tests.real_vllm.renderer import VLLM_RENDER
from tests.support import family_dirs
from tests.support.family_dirs import EXTREME_SIZES, random_sizes

Size = tuple[int, int]
HERE = Path(__file__).resolve().parent
WORKER = HERE / "vllm_processors.py"
RANDOM_SIZES = 1000
MOST_SIZES = 40  # each tries every budget vLLM can hand the image: thousands of calls
WORKER_TIMEOUT_SECONDS = 600
# The full path processes a blank image of each size (resizing and tiling it: the slow part):
# small and odd sizes for each family, three for each variant of its knobs.
APPLY_SIZES = (
    (1, 1), (3, 900), (900, 3), (1, 4000), (4000, 1), (640, 480), (2048, 1),
    *random_sizes(7, 5, largest_side=1024),
)  # fmt: skip
VARIANT_APPLY_SIZES = ((1, 1), (900, 3), (640, 480))
# DeepSeek-OCR tiles past 640 px (OCR-2: 768 px) a side: the samples cross both thresholds.
DEEPSEEK_APPLY_SIZES = (
    *APPLY_SIZES, (640, 640), (641, 640), (768, 768), (769, 500), (1000, 800), (3000, 400),
    (2000, 1000), (1280, 1280),
)  # fmt: skip
# Command A Vision's grids: one tile, a tie on the grid's upscale, a downscale past 12 tiles.
COHERE2_VISION_APPLY_SIZES = (
    *APPLY_SIZES, (512, 512), (513, 512), (1024, 512), (6144, 512), (4000, 3000), (3000, 3000),
)  # fmt: skip
# Sizes whose tiles change with max_patches 6 (each on a grid of more than 6 tiles at 12).
COHERE2_VISION_TILED_SIZES = ((4000, 1000), (3000, 3000), (6144, 512))
DEEPSEEK_VARIANT_SIZES = ((1, 1), (900, 3), (640, 480), (1000, 800), (3000, 400))
# Sizes whose tiles change with crop_mode false or max_crops 9 (each past 768 px, and on a
# grid tie that 9 tiles break otherwise).
DEEPSEEK_TILED_SIZES = ((2000, 1000), (1500, 1500), (3000, 3000))
# Molmo 2's crops: several rows, several columns, a column of them, and the margins' edge.
MOLMO2_TILED_SIZES = ((4032, 3024), (3000, 400), (300, 3000), (112, 112), (113, 400))
# Step3-VL's windows: none, a narrow small image's, thin ones, the 3,024 px cap, a fraction of
# 0.2 rounded down and up, and a side shrunk to 0 px (vLLM's patcher fails).
STEP3_VL_APPLY_SIZES = (
    *APPLY_SIZES, (727, 727), (700, 400), (728, 728), (100, 3000), (3000, 100), (604, 1000),
    (605, 1000), (4032, 3024), (31, 2000), (32, 200000),
)  # fmt: skip
STEP3_VL_VARIANT_SIZES = (*VARIANT_APPLY_SIZES, (1000, 700), (32, 200000))
# The costliest image (one column of 1 px windows), and sides shrunk to 0 px or just not.
STEP3_VL_EXTREMES = (
    (32, 96768), (96768, 32), (32, 200000), (200000, 32), (33, 100000), (31, 100000),
    (32, 3024), (3024, 3024), (3025, 3025),
)  # fmt: skip

# The worker imports vLLM (about 20 s) and builds every family's processor (a few s each).
pytestmark = pytest.mark.timeout(WORKER_TIMEOUT_SECONDS + 60)

Answer = int | str  # a placeholder length, or vLLM's error


@dataclass(frozen=True)
class Family:
    """One model directory and server configuration to prove."""

    name: str
    build: Callable[[Path], Path]
    count: str  # vllm_processors.COUNTS key
    prompt: str
    mm_processor_kwargs: Mapping[str, Any] = field(default_factory=dict)
    apply_sizes: tuple[Size, ...] = VARIANT_APPLY_SIZES
    trust_remote_code: bool = True  # vLLM's --trust-remote-code
    max_model_len: int = 32768  # within the checkpoint's max_position_embeddings
    images: int = 1  # images in each fully processed prompt (all of one size)
    priced_above: bool = False  # the sidecar's price may exceed vLLM's count, never fall
    # below it (the count depends on the request, and this configuration's request is not the
    # one the rule prices exactly)
    modality: str = "image"  # the item's modality in vLLM's processor (Kimi-K2.5: vision_chunk)
    refused_at_start: str | None = None  # vLLM fails every image; the sidecar refuses to
    # start, with a message matching this
    kwargs_dropped: bool = False  # with refused_at_start: vLLM does not fail but drops the
    # kwargs, so its counts must be the sidecar's for the directory without them
    image_index: int = 0  # the image's place in the request, where the count depends on it:
    # the full path then processes a prompt of image_index + 1 images and reads the last
    # Sizes of images sent together, for families whose images share a budget: the sidecar
    # prices each as if alone, which must never be below vLLM's count for it.
    groups: tuple[tuple[Size, ...], ...] = ()
    # The sidecar prices the most any request can give an image (vLLM's count depends on the
    # rest of the request): at least vLLM's count for the image alone, and equal to vLLM's own
    # most on the first MOST_SIZES sizes.
    never_low: bool = False
    extreme_sizes: tuple[Size, ...] = ()  # the family's own extremes, beside EXTREME_SIZES

    def sizes(self, seed: int) -> list[Size]:
        return [*EXTREME_SIZES, *self.extreme_sizes, *random_sizes(seed, RANDOM_SIZES)]


FAMILIES = (
    Family(
        "gemma4", family_dirs.write_gemma4_dir, "gemma4", family_dirs.GEMMA4_PROMPT,
        apply_sizes=APPLY_SIZES,
    ),
    Family(
        "gemma4-max_soft_tokens-70", family_dirs.write_gemma4_dir, "gemma4",
        family_dirs.GEMMA4_PROMPT, {"max_soft_tokens": 70},
    ),
    Family(
        "gemma4-max_soft_tokens-1120", family_dirs.write_gemma4_dir, "gemma4",
        family_dirs.GEMMA4_PROMPT, {"max_soft_tokens": 1120},
    ),
    Family(
        "gemma4-images_kwargs-560", family_dirs.write_gemma4_dir, "gemma4",
        family_dirs.GEMMA4_PROMPT, {"images_kwargs": {"max_soft_tokens": 560}},
    ),
    Family(
        "gemma4-default_output_length-140",
        lambda directory: family_dirs.write_gemma4_dir(directory, default_output_length=140),
        "gemma4", family_dirs.GEMMA4_PROMPT,
    ),
    Family(
        "gemma4-max_soft_tokens-300", family_dirs.write_gemma4_dir, "gemma4",
        family_dirs.GEMMA4_PROMPT, {"max_soft_tokens": 300}, refused_at_start="max_soft_tokens",
    ),
    # DiffusionGemma: Gemma4ProcessingInfo under its own config class.
    Family(
        "diffusion-gemma", family_dirs.write_diffusion_gemma_dir, "gemma4",
        family_dirs.GEMMA4_PROMPT, apply_sizes=APPLY_SIZES, trust_remote_code=False,
    ),
    Family(
        "diffusion-gemma-max_soft_tokens-70", family_dirs.write_diffusion_gemma_dir, "gemma4",
        family_dirs.GEMMA4_PROMPT, {"max_soft_tokens": 70}, trust_remote_code=False,
    ),
    # Gemma 4 Unified: Gemma 4's count, its budget in vision_config.num_soft_tokens.
    Family(
        "gemma4-unified", family_dirs.write_gemma4_unified_dir, "gemma4",
        family_dirs.GEMMA4_PROMPT, apply_sizes=APPLY_SIZES, trust_remote_code=False,
    ),
    Family(
        "gemma4-unified-num_soft_tokens-560",
        lambda directory: family_dirs.write_gemma4_unified_dir(directory, num_soft_tokens=560),
        "gemma4", family_dirs.GEMMA4_PROMPT, trust_remote_code=False,
    ),
    Family(
        "gemma4-unified-max_soft_tokens-70", family_dirs.write_gemma4_unified_dir, "gemma4",
        family_dirs.GEMMA4_PROMPT, {"max_soft_tokens": 70}, trust_remote_code=False,
    ),
    Family(
        "gemma3n", family_dirs.write_gemma3n_dir, "image_repl", family_dirs.GEMMA3N_PROMPT,
        apply_sizes=APPLY_SIZES,
    ),
    Family(
        "internvl3", family_dirs.write_internvl_chat_dir, "internvl_style",
        family_dirs.INTERNVL_PROMPT, apply_sizes=APPLY_SIZES,
    ),
    Family(
        "internvl3-max_dynamic_patch-6", family_dirs.write_internvl_chat_dir, "internvl_style",
        family_dirs.INTERNVL_PROMPT, {"max_dynamic_patch": 6},
    ),
    Family(
        "internvl3-dynamic_patch-4-8", family_dirs.write_internvl_chat_dir, "internvl_style",
        family_dirs.INTERNVL_PROMPT, {"min_dynamic_patch": 4, "max_dynamic_patch": 8},
    ),
    Family(
        "internvl3-no-dynamic_image_size", family_dirs.write_internvl_chat_dir,
        "internvl_style", family_dirs.INTERNVL_PROMPT, {"dynamic_image_size": False},
    ),
    Family(
        "internvl3-no-thumbnail", family_dirs.write_internvl_chat_dir, "internvl_style",
        family_dirs.INTERNVL_PROMPT, {"use_thumbnail": False},
    ),
    Family(
        "internvl3-image_size-224", family_dirs.write_internvl_chat_dir, "internvl_style",
        family_dirs.INTERNVL_PROMPT, {"image_size": 224},
    ),
    Family(
        "internvl3-do_rescale", family_dirs.write_internvl_chat_dir, "internvl_style",
        family_dirs.INTERNVL_PROMPT, {"do_rescale": True}, refused_at_start="do_rescale",
    ),
    Family(
        "internvl3-max_pixels", family_dirs.write_internvl_chat_dir, "internvl_style",
        family_dirs.INTERNVL_PROMPT, {"max_pixels": 1003520}, refused_at_start="max_pixels",
    ),
    Family(
        "eagle2.5", family_dirs.write_eagle2_5_dir, "internvl_style", family_dirs.INTERNVL_PROMPT,
        apply_sizes=APPLY_SIZES,
    ),
    Family(
        "eagle2.5-force_image_size-512",
        lambda directory: family_dirs.write_eagle2_5_dir(directory, force_image_size=512),
        "internvl_style", family_dirs.INTERNVL_PROMPT,
    ),
    Family(
        "skywork-r1v", family_dirs.write_skywork_r1v_dir, "internvl_style",
        family_dirs.INTERNVL_PROMPT, apply_sizes=APPLY_SIZES,
    ),
    # transformers' own PaddleOCR-VL processor (the checkpoint's remote one cannot be fetched
    # here; vLLM reads the same bounds from it under other keys).
    Family(
        "paddleocr-vl", family_dirs.write_paddleocr_vl_dir, "paddleocr_vl",
        family_dirs.PADDLE_PROMPT, apply_sizes=APPLY_SIZES, trust_remote_code=False,
    ),
    Family(
        "paddleocr-vl-max_pixels", family_dirs.write_paddleocr_vl_dir, "paddleocr_vl",
        family_dirs.PADDLE_PROMPT, {"max_pixels": 1003520}, trust_remote_code=False,
    ),
    Family(
        "paddleocr-vl-min_pixels", family_dirs.write_paddleocr_vl_dir, "paddleocr_vl",
        family_dirs.PADDLE_PROMPT, {"min_pixels": 802816}, trust_remote_code=False,
    ),
    # Ovis 2.5's processor ignores pixel kwargs (transformers warns and drops them).
    Family(
        "ovis2.5", family_dirs.write_ovis2_5_dir, "ovis2_5", family_dirs.OVIS_PROMPT,
        apply_sizes=APPLY_SIZES,
    ),
    Family(
        "ovis2.5-max_pixels-ignored", family_dirs.write_ovis2_5_dir, "ovis2_5",
        family_dirs.OVIS_PROMPT, {"max_pixels": 200704},
    ),
    # DeepSeek-OCR: vLLM's own image_size/base_size/strategy override the server's; crop_mode
    # and max_crops reach only the HF processor, whose tiles then disagree with vLLM's count
    # (the worker's embeddings check: the model's output for the processed tiles).
    Family(
        "deepseek-ocr", family_dirs.write_deepseek_ocr_dir, "deepseek_ocr",
        family_dirs.DEEPSEEK_PROMPT, apply_sizes=DEEPSEEK_APPLY_SIZES, max_model_len=8192,
    ),
    Family(
        "deepseek-ocr-overridden-knobs", family_dirs.write_deepseek_ocr_dir, "deepseek_ocr",
        family_dirs.DEEPSEEK_PROMPT,
        {
            "crop_mode": True, "max_crops": 6, "image_size": 1024, "base_size": 1280,
            "strategy": "v2",
        },
        max_model_len=8192,
    ),
    Family(
        "deepseek-ocr-crop_mode-false", family_dirs.write_deepseek_ocr_dir, "deepseek_ocr",
        family_dirs.DEEPSEEK_PROMPT, {"crop_mode": False}, apply_sizes=DEEPSEEK_TILED_SIZES,
        max_model_len=8192, refused_at_start="crop_mode",
    ),
    Family(
        "deepseek-ocr-max_crops-9", family_dirs.write_deepseek_ocr_dir, "deepseek_ocr",
        family_dirs.DEEPSEEK_PROMPT, {"max_crops": 9}, apply_sizes=DEEPSEEK_TILED_SIZES,
        max_model_len=8192, refused_at_start="max_crops",
    ),
    Family(
        "deepseek-ocr2", family_dirs.write_deepseek_ocr2_dir, "deepseek_ocr2",
        family_dirs.DEEPSEEK_PROMPT, apply_sizes=DEEPSEEK_APPLY_SIZES, max_model_len=8192,
    ),
    Family(
        "deepseek-ocr2-crop_mode-false", family_dirs.write_deepseek_ocr2_dir, "deepseek_ocr2",
        family_dirs.DEEPSEEK_PROMPT, {"crop_mode": False}, apply_sizes=DEEPSEEK_TILED_SIZES,
        max_model_len=8192, refused_at_start="crop_mode",
    ),
    # DeepSeek-VL2 crops only a prompt of at most two images: exact for one and two, priced
    # above vLLM's uncropped count for three. vLLM fails on candidate_resolutions as a kwarg
    # (its processor cache cannot hash the nested list).
    Family(
        "deepseek-vl2", family_dirs.write_deepseek_vl2_dir, "deepseek_vl2",
        family_dirs.DEEPSEEK_PROMPT, apply_sizes=DEEPSEEK_APPLY_SIZES, max_model_len=8192,
    ),
    Family(
        "deepseek-vl2-2-images", family_dirs.write_deepseek_vl2_dir, "deepseek_vl2",
        family_dirs.DEEPSEEK_PROMPT, apply_sizes=DEEPSEEK_VARIANT_SIZES, max_model_len=8192,
        images=2,
    ),
    Family(
        "deepseek-vl2-3-images", family_dirs.write_deepseek_vl2_dir, "deepseek_vl2_uncropped",
        family_dirs.DEEPSEEK_PROMPT, apply_sizes=DEEPSEEK_VARIANT_SIZES, max_model_len=8192,
        images=3, priced_above=True,
    ),
    Family(
        "deepseek-vl2-candidate_resolutions", family_dirs.write_deepseek_vl2_dir, "deepseek_vl2",
        family_dirs.DEEPSEEK_PROMPT,
        {"candidate_resolutions": [[384, 384], [768, 384], [384, 768], [768, 768]]},
        apply_sizes=DEEPSEEK_VARIANT_SIZES, max_model_len=8192,
        refused_at_start="candidate_resolutions",
    ),
    # patch_size reaches vLLM's count and the processor but not the vision tower (the
    # worker's embeddings check).
    Family(
        "deepseek-vl2-patch_size-16", family_dirs.write_deepseek_vl2_dir, "deepseek_vl2",
        family_dirs.DEEPSEEK_PROMPT, {"patch_size": 16}, apply_sizes=DEEPSEEK_VARIANT_SIZES,
        max_model_len=8192, refused_at_start="patch_size",
    ),
    Family(
        "minicpmv4.6", family_dirs.write_minicpmv4_6_dir, "minicpmv4_6",
        family_dirs.MINICPMV4_6_PROMPT, apply_sizes=APPLY_SIZES,
    ),
    Family(
        "minicpmv4.6-max_slice_nums-4", family_dirs.write_minicpmv4_6_dir, "minicpmv4_6",
        family_dirs.MINICPMV4_6_PROMPT, {"max_slice_nums": 4},
    ),
    Family(
        "minicpmv4.6-images_kwargs-max_slice_nums-16", family_dirs.write_minicpmv4_6_dir,
        "minicpmv4_6", family_dirs.MINICPMV4_6_PROMPT, {"images_kwargs": {"max_slice_nums": 16}},
    ),
    # vLLM reads images_kwargs first: 2 slices at most, not 4.
    Family(
        "minicpmv4.6-max_slice_nums-in-both-scopes", family_dirs.write_minicpmv4_6_dir,
        "minicpmv4_6", family_dirs.MINICPMV4_6_PROMPT,
        {"max_slice_nums": 4, "images_kwargs": {"max_slice_nums": 2}},
    ),
    Family(
        "minicpmv4.6-downsample_mode-4x", family_dirs.write_minicpmv4_6_dir, "minicpmv4_6",
        family_dirs.MINICPMV4_6_PROMPT, {"downsample_mode": "4x"},
    ),
    Family(
        "minicpmv4.6-scale_resolution-336", family_dirs.write_minicpmv4_6_dir, "minicpmv4_6",
        family_dirs.MINICPMV4_6_PROMPT, {"scale_resolution": 336},
    ),
    # vLLM's image markup carries the id whatever use_image_id says.
    Family(
        "minicpmv4.6-use_image_id-off", family_dirs.write_minicpmv4_6_dir, "minicpmv4_6",
        family_dirs.MINICPMV4_6_PROMPT, {"use_image_id": False},
    ),
    Family(
        "minicpmv4.6-max_pixels-ignored", family_dirs.write_minicpmv4_6_dir, "minicpmv4_6",
        family_dirs.MINICPMV4_6_PROMPT, {"max_pixels": 200704},
    ),
    # The 13th image of a request: <image_id>12</image_id> spells two digits (the full path
    # processes 13 images in one prompt).
    Family(
        "minicpmv4.6-image-12", family_dirs.write_minicpmv4_6_dir, "minicpmv4_6-image-12",
        family_dirs.MINICPMV4_6_PROMPT, image_index=12,
    ),
    Family(
        "minicpmv4.7", family_dirs.write_minicpmv4_7_dir, "minicpmv4_6",
        family_dirs.MINICPMV4_6_PROMPT, apply_sizes=APPLY_SIZES,
    ),
    # 4.7's prompt reads max_slice_nums from config.json, not the image processor's file.
    Family(
        "minicpmv4.7-processor-max_slice_nums-4",
        lambda directory: family_dirs.write_minicpmv4_7_dir(directory, max_slice_nums=4),
        "minicpmv4_6", family_dirs.MINICPMV4_6_PROMPT,
    ),
    Family(
        "minicpmv4.7-max_slice_nums-4", family_dirs.write_minicpmv4_7_dir, "minicpmv4_6",
        family_dirs.MINICPMV4_6_PROMPT, {"max_slice_nums": 4},
    ),
    # MiniCPM-V 2.6 / 4.0 / 4.5: vLLM's prompt update over a stand-in for the checkpoint's
    # remote image processor (tests.support.family_dirs: its grid and placeholder text). The
    # server's kwargs are set on it at load, images_kwargs dropped whole.
    Family(
        "minicpmv2.6", family_dirs.write_minicpmv_dir, "minicpmv", family_dirs.MINICPMV_PROMPT,
        apply_sizes=APPLY_SIZES,
    ),
    Family(
        "minicpmv4.0", lambda directory: family_dirs.write_minicpmv_dir(directory, version=4.0),
        "minicpmv", family_dirs.MINICPMV_PROMPT, apply_sizes=APPLY_SIZES,
    ),
    Family(
        "minicpmv4.5", lambda directory: family_dirs.write_minicpmv_dir(directory, version=4.5),
        "minicpmv", family_dirs.MINICPMV_PROMPT, apply_sizes=APPLY_SIZES,
    ),
    Family(
        "minicpmv2.6-max_slice_nums-4", family_dirs.write_minicpmv_dir, "minicpmv",
        family_dirs.MINICPMV_PROMPT, {"max_slice_nums": 4},
    ),
    Family(
        "minicpmv2.6-scale_resolution-336", family_dirs.write_minicpmv_dir, "minicpmv",
        family_dirs.MINICPMV_PROMPT, {"scale_resolution": 336},
    ),
    # vLLM's prompt writes the id whatever use_image_id says.
    Family(
        "minicpmv2.6-use_image_id-off", family_dirs.write_minicpmv_dir, "minicpmv",
        family_dirs.MINICPMV_PROMPT, {"use_image_id": False},
    ),
    Family(
        "minicpmv4.5-preprocessor-max_slice_nums-2-scale-560",
        lambda directory: family_dirs.write_minicpmv_dir(
            directory, version=4.5, max_slice_nums=2, scale_resolution=560
        ),
        "minicpmv", family_dirs.MINICPMV_PROMPT,
    ),
    Family(
        "minicpmv2.6-images_kwargs-max_slice_nums-4", family_dirs.write_minicpmv_dir,
        "minicpmv", family_dirs.MINICPMV_PROMPT, {"images_kwargs": {"max_slice_nums": 4}},
        refused_at_start="images_kwargs", kwargs_dropped=True,
    ),
    # The 11th image of a request: <image_id>10</image_id> spells two digits (the full path
    # processes 11 images in one prompt).
    Family(
        "minicpmv2.6-image-10", family_dirs.write_minicpmv_dir, "minicpmv-image-10",
        family_dirs.MINICPMV_PROMPT, image_index=10,
    ),
    # MiniCPM-o 2.6: MiniCPM-V 2.6's image path, through vLLM's copy of the omni processor
    # (over stand-ins for the remote tokenizer and processor as well).
    Family(
        "minicpmo2.6", lambda directory: family_dirs.write_minicpmv_dir(directory, omni=True),
        "minicpmv", family_dirs.MINICPMV_PROMPT, apply_sizes=APPLY_SIZES,
    ),
    Family(
        "minicpmo2.6-max_slice_nums-4",
        lambda directory: family_dirs.write_minicpmv_dir(directory, omni=True), "minicpmv",
        family_dirs.MINICPMV_PROMPT, {"max_slice_nums": 4},
    ),
    Family(
        "minicpmo2.6-image-10",
        lambda directory: family_dirs.write_minicpmv_dir(directory, omni=True),
        "minicpmv-image-10", family_dirs.MINICPMV_PROMPT, image_index=10,
    ),
    # NVLM-D: InternVL chat's knobs; the tile tags counted by the checkpoint's tokenizer.
    Family(
        "nvlm-d", family_dirs.write_nvlm_d_dir, "nvlm_d", family_dirs.NVLM_PROMPT,
        apply_sizes=APPLY_SIZES,
    ),
    Family(
        "nvlm-d-max_dynamic_patch-12", family_dirs.write_nvlm_d_dir, "nvlm_d",
        family_dirs.NVLM_PROMPT, {"max_dynamic_patch": 12},
    ),
    Family(
        "nvlm-d-no-thumbnail", family_dirs.write_nvlm_d_dir, "nvlm_d", family_dirs.NVLM_PROMPT,
        {"use_thumbnail": False},
    ),
    Family(
        "nvlm-d-do_rescale", family_dirs.write_nvlm_d_dir, "nvlm_d", family_dirs.NVLM_PROMPT,
        {"do_rescale": True}, refused_at_start="do_rescale",
    ),
    # Llama-Nemotron-Nano-VL: the remote image processor's three values, kwargs over them.
    Family(
        "nemotron-vl", family_dirs.write_nemotron_vl_dir, "nemotron_vl",
        family_dirs.NEMOTRON_VL_PROMPT, apply_sizes=APPLY_SIZES,
    ),
    Family(
        "nemotron-vl-max_num_tiles-6", family_dirs.write_nemotron_vl_dir, "nemotron_vl",
        family_dirs.NEMOTRON_VL_PROMPT, {"max_num_tiles": 6},
    ),
    Family(
        "nemotron-vl-no-thumbnail-448", family_dirs.write_nemotron_vl_dir, "nemotron_vl",
        family_dirs.NEMOTRON_VL_PROMPT, {"use_thumbnail": False, "image_size": 448},
    ),
    Family(
        "nemotron-vl-preprocessor-max_num_tiles-4",
        lambda directory: family_dirs.write_nemotron_vl_dir(directory, max_num_tiles=4),
        "nemotron_vl", family_dirs.NEMOTRON_VL_PROMPT,
    ),
    # The tiling call's kwargs reach the tiles vLLM's placeholder is built from.
    Family(
        "nemotron-vl-max_dynamic_patch-6", family_dirs.write_nemotron_vl_dir, "nemotron_vl",
        family_dirs.NEMOTRON_VL_PROMPT, {"max_dynamic_patch": 6},
    ),
    Family(
        "nemotron-vl-min_dynamic_patch-4", family_dirs.write_nemotron_vl_dir, "nemotron_vl",
        family_dirs.NEMOTRON_VL_PROMPT, {"min_dynamic_patch": 4},
    ),
    Family(
        "nemotron-vl-no-dynamic_image_size", family_dirs.write_nemotron_vl_dir, "nemotron_vl",
        family_dirs.NEMOTRON_VL_PROMPT, {"dynamic_image_size": False},
    ),
    Family(
        "nemotron-vl-do_rescale", family_dirs.write_nemotron_vl_dir, "nemotron_vl",
        family_dirs.NEMOTRON_VL_PROMPT, {"do_rescale": True},
    ),
    # Nemotron Nano VL v2: InternVL's tiles, or (Omni V3) the dynamic resolution at the
    # worker's max_model_len of 32,768 (the tower's own positions here, as the sidecar prices).
    Family(
        "nano-nemotron-vl-v2", family_dirs.write_nano_nemotron_vl_dir, "nano_nemotron_vl",
        family_dirs.NANO_NEMOTRON_PROMPT, apply_sizes=APPLY_SIZES,
    ),
    Family(
        "nano-nemotron-vl-v2-max_num_tiles-4", family_dirs.write_nano_nemotron_vl_dir,
        "nano_nemotron_vl", family_dirs.NANO_NEMOTRON_PROMPT, {"max_num_tiles": 4},
    ),
    Family(
        "nano-nemotron-vl-v2-do_rescale", family_dirs.write_nano_nemotron_vl_dir,
        "nano_nemotron_vl", family_dirs.NANO_NEMOTRON_PROMPT, {"do_rescale": True},
        refused_at_start="do_rescale",
    ),
    Family(
        "nemotron-omni-v3-dynamic",
        lambda directory: family_dirs.write_nano_nemotron_vl_dir(
            directory, architecture="NemotronH_Nano_Omni_Reasoning_V3",
            vision_args=family_dirs.NANO_NEMOTRON_DYNAMIC_ARGS, context_tokens=32768,
        ),
        "nano_nemotron_vl", family_dirs.NANO_NEMOTRON_PROMPT, apply_sizes=APPLY_SIZES,
        never_low=True,
    ),
    Family(
        "nemotron-omni-v3-dynamic-unbounded",
        lambda directory: family_dirs.write_nano_nemotron_vl_dir(
            directory, architecture="NemotronH_Omni_Reasoning_V3",
            vision_args={"min_num_patches": 4, "max_num_patches": 0}, context_tokens=4096,
        ),
        "nano_nemotron_vl", family_dirs.NANO_NEMOTRON_PROMPT, max_model_len=4096,
        never_low=True,
    ),
    # Four images at a max_model_len of 8,192: a budget of 32,752 patches, under four shares
    # of 13,312, so vLLM shrinks them together; each alone keeps its share.
    Family(
        "nemotron-omni-v3-dynamic-shared",
        lambda directory: family_dirs.write_nano_nemotron_vl_dir(
            directory, architecture="NemotronH_Nano_Omni_Reasoning_V3",
            vision_args=family_dirs.NANO_NEMOTRON_DYNAMIC_ARGS, context_tokens=32768,
        ),
        "nano_nemotron_vl", family_dirs.NANO_NEMOTRON_PROMPT, apply_sizes=((640, 480),),
        max_model_len=8192, never_low=True,
        groups=(
            ((4000, 3000), (4000, 3000), (3000, 4000), (2048, 2048)),
            ((640, 480), (4000, 3000), (1, 1)),
            ((4000, 3000),),
            ((777, 333),),
        ),
    ),
    # H2OVL: MSAC for a lone image, InternVL chat's tiles beside others.
    Family(
        "h2ovl", family_dirs.write_h2ovl_dir, "h2ovl", family_dirs.INTERNVL_PROMPT,
        apply_sizes=APPLY_SIZES,
        groups=(
            ((640, 480), (4000, 3000)),
            ((1, 1), (900, 3), (3024, 4032), (1000, 1000)),
            ((640, 480),),
            ((2000, 500),),
        ),
    ),
    Family(
        "h2ovl-no-msac", family_dirs.write_h2ovl_dir, "h2ovl", family_dirs.INTERNVL_PROMPT,
        {"use_msac": False},
    ),
    Family(
        "h2ovl-max_dynamic_patch-12-no-thumbnail", family_dirs.write_h2ovl_dir, "h2ovl",
        family_dirs.INTERNVL_PROMPT, {"max_dynamic_patch": 12, "use_thumbnail": False},
        groups=(((640, 480), (4000, 3000)), ((640, 480),)),
    ),
    Family(
        "h2ovl-min_dynamic_patch-4", family_dirs.write_h2ovl_dir, "h2ovl",
        family_dirs.INTERNVL_PROMPT, {"min_dynamic_patch": 4},
        groups=(((1, 1), (640, 480)), ((1, 1),)),
    ),
    Family(
        "h2ovl-do_rescale", family_dirs.write_h2ovl_dir, "h2ovl", family_dirs.INTERNVL_PROMPT,
        {"do_rescale": True}, refused_at_start="do_rescale",
    ),
    # Kimi-K2.5: vLLM's fused processor, built from media_proc_cfg alone (no kwargs reach it).
    Family(
        "kimi-k2.5", family_dirs.write_kimi_k25_dir, "kimi_k25", family_dirs.KIMI_K25_PROMPT,
        apply_sizes=APPLY_SIZES, trust_remote_code=False, modality="vision_chunk",
    ),
    Family(
        "kimi-k2.5-in_patch_limit-4096-side-256",
        lambda directory: family_dirs.write_kimi_k25_dir(
            directory, in_patch_limit=4096, patch_limit_on_one_side=256
        ),
        "kimi_k25", family_dirs.KIMI_K25_PROMPT, trust_remote_code=False,
        modality="vision_chunk",
    ),
    Family(
        "kimi-k2.5-in_patch_limit-kwarg-ignored", family_dirs.write_kimi_k25_dir, "kimi_k25",
        family_dirs.KIMI_K25_PROMPT, {"in_patch_limit": 1024, "max_pixels": 200704},
        trust_remote_code=False, modality="vision_chunk",
    ),
    # Kimi-VL: vLLM's own count, over a stand-in for the checkpoint's remote image processor
    # (tests.support.family_dirs: the three values vLLM reads, and its resize and refusal).
    Family(
        "kimi-vl", family_dirs.write_kimi_vl_dir, "kimi_vl", family_dirs.KIMI_VL_PROMPT,
        apply_sizes=APPLY_SIZES,
    ),
    Family(
        "kimi-vl-thinking-2506-in_token_limit-16384",
        lambda directory: family_dirs.write_kimi_vl_dir(directory, in_token_limit=16384),
        "kimi_vl", family_dirs.KIMI_VL_PROMPT,
    ),
    # Keye-VL / 1.5: vLLM's own count, over a stand-in for the checkpoint's remote processor
    # (tests.support.family_dirs: the resize vLLM copied from it, over its own bounds).
    Family(
        "keye-vl", family_dirs.write_keye_dir, "keye", family_dirs.KEYE_PROMPT,
        apply_sizes=APPLY_SIZES,
    ),
    Family(
        "keye-vl-1.5-max_pixels-200704",
        lambda directory: family_dirs.write_keye_dir(
            directory, architecture="KeyeVL1_5ForConditionalGeneration", max_pixels=200704
        ),
        "keye", family_dirs.KEYE_PROMPT,
    ),
    # ERNIE-4.5-VL: vLLM's prompt update over a stand-in for the checkpoint's remote processor
    # (tests.support.family_dirs: its smart_resize over the processor's image bounds). The
    # processor takes its bounds from the kwargs or processor_config.json, never from
    # preprocessor_config.json; max_pixels and images_kwargs reach the image processor or the
    # call, not the count (refused, vLLM's counts those of the directory without them).
    Family(
        "ernie4.5-vl", family_dirs.write_ernie45_vl_dir, "ernie45_vl",
        family_dirs.ERNIE45_VL_PROMPT, apply_sizes=APPLY_SIZES,
    ),
    Family(
        "ernie4.5-vl-image_max_pixels-200704", family_dirs.write_ernie45_vl_dir, "ernie45_vl",
        family_dirs.ERNIE45_VL_PROMPT, {"image_max_pixels": 200704},
    ),
    Family(
        "ernie4.5-vl-image_min_pixels-200704-max-1003520", family_dirs.write_ernie45_vl_dir,
        "ernie45_vl", family_dirs.ERNIE45_VL_PROMPT,
        {"image_min_pixels": 200704, "image_max_pixels": 1003520},
    ),
    Family(
        "ernie4.5-vl-processor_config-image_max_pixels-1003520",
        lambda directory: family_dirs.write_ernie45_vl_dir(
            directory, processor={"image_max_pixels": 1003520}
        ),
        "ernie45_vl", family_dirs.ERNIE45_VL_PROMPT,
    ),
    Family(
        "ernie4.5-vl-preprocessor-bounds-ignored",
        lambda directory: family_dirs.write_ernie45_vl_dir(
            directory, image_min_pixels=200704, image_max_pixels=200704, max_pixels=200704
        ),
        "ernie45_vl", family_dirs.ERNIE45_VL_PROMPT,
    ),
    Family(
        "ernie4.5-vl-max_pixels-refused", family_dirs.write_ernie45_vl_dir, "ernie45_vl",
        family_dirs.ERNIE45_VL_PROMPT, {"max_pixels": 200704},
        refused_at_start="max_pixels", kwargs_dropped=True,
    ),
    Family(
        "ernie4.5-vl-images_kwargs-refused", family_dirs.write_ernie45_vl_dir, "ernie45_vl",
        family_dirs.ERNIE45_VL_PROMPT, {"images_kwargs": {"image_max_pixels": 200704}},
        refused_at_start="images_kwargs", kwargs_dropped=True,
    ),
    # LFM2-VL: transformers' own processor; the last sample's thumbnail outgrows its tiles.
    Family(
        "lfm2-vl", family_dirs.write_lfm2_vl_dir, "lfm2_vl", family_dirs.LFM2_VL_PROMPT,
        apply_sizes=(*APPLY_SIZES, (20, 30000)), trust_remote_code=False,
    ),
    Family(
        "lfm2-vl-tokens-32-128-max_tiles-4", family_dirs.write_lfm2_vl_dir, "lfm2_vl",
        family_dirs.LFM2_VL_PROMPT,
        {"min_image_tokens": 32, "max_image_tokens": 128, "max_tiles": 4},
        trust_remote_code=False,
    ),
    Family(
        "lfm2-vl-tile_size-384-tolerance-1.5",
        lambda directory: family_dirs.write_lfm2_vl_dir(directory, max_pixels_tolerance=1.5),
        "lfm2_vl", family_dirs.LFM2_VL_PROMPT, {"tile_size": 384},
        trust_remote_code=False,
    ),
    # Phi-4-multimodal: vLLM's own count, over a stand-in for the checkpoint's remote processor
    # (tests.support.family_dirs: dynamic_hd, the grid's tie rule, the resize and its refusal).
    Family(
        "phi4mm", family_dirs.write_phi4mm_dir, "phi4mm", family_dirs.PHI4MM_PROMPT,
        apply_sizes=APPLY_SIZES,
    ),
    Family(
        "phi4mm-dynamic_hd-16", family_dirs.write_phi4mm_dir, "phi4mm",
        family_dirs.PHI4MM_PROMPT, {"dynamic_hd": 16},
    ),
    Family(
        "phi4mm-dynamic_hd-4", family_dirs.write_phi4mm_dir, "phi4mm",
        family_dirs.PHI4MM_PROMPT, {"dynamic_hd": 4},
    ),
    Family(
        "phi4mm-preprocessor-dynamic_hd-12",
        lambda directory: family_dirs.write_phi4mm_dir(directory, dynamic_hd=12),
        "phi4mm", family_dirs.PHI4MM_PROMPT,
    ),
    # Phi-3.5-Vision (num_crops 4 in the file) and Phi-3-Vision-128k (16 in the file): vLLM's
    # count, the remote processor's own, over a stand-in written from its public source
    # (tests.support.family_dirs: num_crops, the HD transform and torchvision's refusal of a
    # 0 px side). num_crops as a server kwarg reaches the processor's from_pretrained; under
    # images_kwargs vLLM drops it, and at 0 every image fails: both refused.
    Family(
        "phi3.5-vision", family_dirs.write_phi3v_dir, "phi3v", family_dirs.PHI3V_PROMPT,
        apply_sizes=(*APPLY_SIZES, (16384, 1), (1, 5376), (1300, 876)),
    ),
    Family(
        "phi3-vision-128k", lambda directory: family_dirs.write_phi3v_dir(directory, num_crops=16),
        "phi3v", family_dirs.PHI3V_PROMPT,
        apply_sizes=(*VARIANT_APPLY_SIZES, (16384, 1), (1, 5376), (1300, 876)),
    ),
    Family(
        "phi3.5-vision-num_crops-9", family_dirs.write_phi3v_dir, "phi3v",
        family_dirs.PHI3V_PROMPT, {"num_crops": 9},
        apply_sizes=(*VARIANT_APPLY_SIZES, (1300, 876)),
    ),
    Family(
        "phi3.5-vision-images_kwargs-num_crops-16", family_dirs.write_phi3v_dir, "phi3v",
        family_dirs.PHI3V_PROMPT, {"images_kwargs": {"num_crops": 16}},
        refused_at_start="images_kwargs", kwargs_dropped=True,
    ),
    Family(
        "phi3.5-vision-num_crops-0", family_dirs.write_phi3v_dir, "phi3v",
        family_dirs.PHI3V_PROMPT, {"num_crops": 0}, refused_at_start="num_crops",
    ),
    # PaliGemma: one placeholder of SigLIP's grid of <image> tokens and the <bos> behind them,
    # whatever the size; PaliGemma 1's tokenizer adds <bos>, 2's does not.
    Family(
        "paligemma-224", family_dirs.write_paligemma_dir, "prompt_update",
        family_dirs.PALIGEMMA_PROMPT, apply_sizes=APPLY_SIZES, trust_remote_code=False,
        max_model_len=8192,
    ),
    Family(
        "paligemma2-448",
        lambda directory: family_dirs.write_paligemma_dir(directory, image_size_px=448, version=2),
        "prompt_update", family_dirs.PALIGEMMA_PROMPT, trust_remote_code=False,
        max_model_len=8192,
    ),
    Family(
        "paligemma2-896",
        lambda directory: family_dirs.write_paligemma_dir(directory, image_size_px=896, version=2),
        "prompt_update", family_dirs.PALIGEMMA_PROMPT, trust_remote_code=False,
        max_model_len=8192,
    ),
    # Granite 4 Vision: vLLM's count follows config.json's downsample_rate and ignores the
    # select strategy and the processor's additional tokens (the full path agrees).
    Family(
        "granite4-vision", family_dirs.write_granite4_vision_dir, "info",
        family_dirs.GRANITE4_VISION_PROMPT, apply_sizes=APPLY_SIZES, trust_remote_code=False,
    ),
    Family(
        "granite4-vision-default-strategy-1-4",
        lambda directory: family_dirs.write_granite4_vision_dir(
            directory, downsample_rate="1/4", select_strategy="default", additional_tokens=1
        ),
        "info", family_dirs.GRANITE4_VISION_PROMPT, trust_remote_code=False,
    ),
    # Molmo 2: transformers' own processor; vLLM builds the replacement and asserts the
    # processor cut as many crops. The knobs reach both at the top level; patch_size reaches
    # only the processor's call, which fails every image.
    Family(
        "molmo2", family_dirs.write_molmo2_dir, "molmo2", family_dirs.MOLMO2_PROMPT,
        apply_sizes=(*APPLY_SIZES, *MOLMO2_TILED_SIZES), trust_remote_code=False,
    ),
    Family(
        "molmo2-max_crops-4", family_dirs.write_molmo2_dir, "molmo2", family_dirs.MOLMO2_PROMPT,
        {"max_crops": 4}, apply_sizes=(*VARIANT_APPLY_SIZES, *MOLMO2_TILED_SIZES),
        trust_remote_code=False,
    ),
    Family(
        "molmo2-margins-0-pooling-3-max_crops-12", family_dirs.write_molmo2_dir, "molmo2",
        family_dirs.MOLMO2_PROMPT,
        {"overlap_margins": [0, 0], "pooling_size": [3, 3], "max_crops": 12},
        apply_sizes=(*VARIANT_APPLY_SIZES, *MOLMO2_TILED_SIZES), trust_remote_code=False,
    ),
    Family(
        "molmo2-no-col-tokens", family_dirs.write_molmo2_dir, "molmo2", family_dirs.MOLMO2_PROMPT,
        {"image_use_col_tokens": False, "use_single_crop_start_token": False},
        apply_sizes=(*VARIANT_APPLY_SIZES, *MOLMO2_TILED_SIZES), trust_remote_code=False,
    ),
    Family(
        "molmo2-files-max_crops-24-margins-2-3-single-crop-no-cols",
        lambda directory: family_dirs.write_molmo2_dir(
            directory, processor={"use_single_crop_col_tokens": False}, max_crops=24,
            overlap_margins=[2, 3],
        ),
        "molmo2", family_dirs.MOLMO2_PROMPT,
        apply_sizes=(*VARIANT_APPLY_SIZES, *MOLMO2_TILED_SIZES), trust_remote_code=False,
    ),
    Family(
        "molmo2-patch_size-16", family_dirs.write_molmo2_dir, "molmo2", family_dirs.MOLMO2_PROMPT,
        {"patch_size": 16}, trust_remote_code=False, refused_at_start="patch_size",
    ),
    # Molmo: vLLM's own insertion, over a stand-in for the checkpoint's remote processor
    # (tests.support.family_dirs: the crop attributes vLLM reads, one row per crop).
    Family(
        "molmo", family_dirs.write_molmo_dir, "prompt_update", family_dirs.MOLMO_PROMPT,
        apply_sizes=(*APPLY_SIZES, *MOLMO2_TILED_SIZES), max_model_len=4096,
    ),
    Family(
        "molmo-files-max_crops-20-margins-2-3",
        lambda directory: family_dirs.write_molmo_dir(
            directory, max_crops=20, overlap_margins=[2, 3]
        ),
        "prompt_update", family_dirs.MOLMO_PROMPT,
        apply_sizes=(*VARIANT_APPLY_SIZES, *MOLMO2_TILED_SIZES), max_model_len=4096,
    ),
    Family(
        "molmo-files-280px-10x8-tokens",
        lambda directory: family_dirs.write_molmo_dir(
            directory, base_image_input_size=[280, 280], image_token_length_w=10,
            image_token_length_h=8,
        ),
        "prompt_update", family_dirs.MOLMO_PROMPT,
        apply_sizes=(*VARIANT_APPLY_SIZES, *MOLMO2_TILED_SIZES), max_model_len=4096,
    ),
    # Aria: 256 <|img|> per image, whatever the size (transformers' AriaProcessor).
    Family(
        "aria", family_dirs.write_aria_dir, "prompt_update", family_dirs.ARIA_PROMPT,
        apply_sizes=APPLY_SIZES, trust_remote_code=False,
    ),
    # BLIP-2: num_query_tokens <image> tokens at the prompt's start (transformers'
    # Blip2Processor expands them too); OpenVLA: vLLM's own processor, 256 tokens after <s>.
    Family(
        "blip2", family_dirs.write_blip2_dir, "prompt_update", family_dirs.BLIP2_PROMPT,
        apply_sizes=APPLY_SIZES, trust_remote_code=False, max_model_len=2048,
    ),
    Family(
        "blip2-num_query_tokens-64",
        lambda directory: family_dirs.write_blip2_dir(directory, num_query_tokens=64),
        "prompt_update", family_dirs.BLIP2_PROMPT, trust_remote_code=False, max_model_len=2048,
    ),
    Family(
        "openvla", family_dirs.write_openvla_dir, "prompt_update", family_dirs.OPENVLA_PROMPT,
        apply_sizes=APPLY_SIZES, trust_remote_code=False, max_model_len=4096,
    ),
    # Qianfan-OCR: InternVL chat's processor over transformers' QianfanOCRConfig.
    Family(
        "qianfan-ocr", family_dirs.write_qianfan_ocr_dir, "internvl_style",
        family_dirs.QIANFAN_OCR_PROMPT, apply_sizes=APPLY_SIZES, trust_remote_code=False,
    ),
    Family(
        "qianfan-ocr-max_dynamic_patch-6-no-thumbnail", family_dirs.write_qianfan_ocr_dir,
        "internvl_style", family_dirs.QIANFAN_OCR_PROMPT,
        {"max_dynamic_patch": 6, "use_thumbnail": False}, trust_remote_code=False,
    ),
    Family(
        "qianfan-ocr-config-224px-4-tiles",
        lambda directory: family_dirs.write_qianfan_ocr_dir(
            directory, max_dynamic_patch=4,
            vision_config={
                "model_type": "qianfan_ocr_vision", "hidden_size": 64, "intermediate_size": 128,
                "num_hidden_layers": 1, "num_attention_heads": 2, "image_size": 224,
                "patch_size": 14,
            },
        ),
        "internvl_style", family_dirs.QIANFAN_OCR_PROMPT, trust_remote_code=False,
    ),
    Family(
        "qianfan-ocr-do_rescale", family_dirs.write_qianfan_ocr_dir, "internvl_style",
        family_dirs.QIANFAN_OCR_PROMPT, {"do_rescale": True}, trust_remote_code=False,
        refused_at_start="do_rescale",
    ),
    # Cosmos 3 Edge: transformers' Cosmos3EdgeImageProcessor, one frame of Qwen3-VL's video
    # resize; size is its one pixel knob (min_pixels / max_pixels: dropped at the top level,
    # every image failing under images_kwargs).
    Family(
        "cosmos3-edge", family_dirs.write_cosmos3_edge_dir, "qwen_vl", family_dirs.QWEN3_PROMPT,
        apply_sizes=(*APPLY_SIZES, (20, 3000), (31, 31)), trust_remote_code=False,
    ),
    Family(
        "cosmos3-edge-size-65536-200704", family_dirs.write_cosmos3_edge_dir, "qwen_vl",
        family_dirs.QWEN3_PROMPT, {"size": {"shortest_edge": 65536, "longest_edge": 200704}},
        trust_remote_code=False,
    ),
    Family(
        "cosmos3-edge-images_kwargs-size", family_dirs.write_cosmos3_edge_dir, "qwen_vl",
        family_dirs.QWEN3_PROMPT,
        {"images_kwargs": {"size": {"shortest_edge": 802816, "longest_edge": 4194304}}},
        trust_remote_code=False,
    ),
    Family(
        "cosmos3-edge-preprocessor-size-3136-1003520",
        lambda directory: family_dirs.write_cosmos3_edge_dir(
            directory, size={"shortest_edge": 3136, "longest_edge": 1003520}
        ),
        "qwen_vl", family_dirs.QWEN3_PROMPT, trust_remote_code=False,
    ),
    Family(
        "cosmos3-edge-max_pixels-dropped", family_dirs.write_cosmos3_edge_dir, "qwen_vl",
        family_dirs.QWEN3_PROMPT, {"max_pixels": 200704}, trust_remote_code=False,
        refused_at_start="min_pixels / max_pixels", kwargs_dropped=True,
    ),
    Family(
        "cosmos3-edge-images_kwargs-min_pixels", family_dirs.write_cosmos3_edge_dir, "qwen_vl",
        family_dirs.QWEN3_PROMPT, {"images_kwargs": {"min_pixels": 802816}},
        trust_remote_code=False, refused_at_start="min_pixels / max_pixels",
    ),
    # Alpamayo 2 Super: Qwen3-VL's processor under config.json's (or the config class's
    # default) min_pixels / max_pixels, the server's bounds over them as for Qwen3-VL.
    Family(
        "alpamayo2-super", family_dirs.write_alpamayo2_super_dir, "qwen_vl",
        family_dirs.QWEN3_PROMPT, apply_sizes=APPLY_SIZES, trust_remote_code=False,
    ),
    Family(
        "alpamayo2-super-max_pixels-1003520", family_dirs.write_alpamayo2_super_dir, "qwen_vl",
        family_dirs.QWEN3_PROMPT, {"max_pixels": 1003520}, trust_remote_code=False,
    ),
    Family(
        "alpamayo2-super-images_kwargs-min_pixels-30000", family_dirs.write_alpamayo2_super_dir,
        "qwen_vl", family_dirs.QWEN3_PROMPT, {"images_kwargs": {"min_pixels": 30000}},
        trust_remote_code=False,
    ),
    Family(
        "alpamayo2-super-config-bounds-50000-400000",
        lambda directory: family_dirs.write_alpamayo2_super_dir(
            directory, min_pixels=50000, max_pixels=400000
        ),
        "qwen_vl", family_dirs.QWEN3_PROMPT, trust_remote_code=False,
    ),
    # A null bound in config.json: the image processor keeps its own (Qwen3-VL's) size.
    Family(
        "alpamayo2-super-config-min_pixels-null",
        lambda directory: family_dirs.write_alpamayo2_super_dir(directory, min_pixels=None),
        "qwen_vl", family_dirs.QWEN3_PROMPT, trust_remote_code=False,
    ),
    # Cohere2Vision: transformers' own processor, the knobs at the top level of the kwargs.
    # The worker's embeddings check: a knob under images_kwargs reaches the processor's tiles
    # but not vLLM's count, and size the processor's tile side but not the count or the tower;
    # vLLM fails every image at max_patches 0 (no grid) and patch_size 8 (its count takes it
    # for the tile's size). All four refused.
    Family(
        "cohere2-vision", family_dirs.write_cohere2_vision_dir, "cohere2_vision",
        family_dirs.COHERE2_VISION_PROMPT, apply_sizes=COHERE2_VISION_APPLY_SIZES,
        trust_remote_code=False,
    ),
    Family(
        "cohere2-vision-max_patches-6", family_dirs.write_cohere2_vision_dir, "cohere2_vision",
        family_dirs.COHERE2_VISION_PROMPT, {"max_patches": 6, "min_patches": 4},
        apply_sizes=(*VARIANT_APPLY_SIZES, (4000, 1000)), trust_remote_code=False,
    ),
    Family(
        "cohere2-vision-no-crop_to_patches", family_dirs.write_cohere2_vision_dir,
        "cohere2_vision", family_dirs.COHERE2_VISION_PROMPT, {"crop_to_patches": False},
        apply_sizes=(*VARIANT_APPLY_SIZES, (4000, 1000)), trust_remote_code=False,
    ),
    Family(
        "cohere2-vision-preprocessor-max_patches-4",
        lambda directory: family_dirs.write_cohere2_vision_dir(directory, max_patches=4),
        "cohere2_vision", family_dirs.COHERE2_VISION_PROMPT,
        apply_sizes=(*VARIANT_APPLY_SIZES, (4000, 1000)), trust_remote_code=False,
    ),
    Family(
        "cohere2-vision-max_patches-0", family_dirs.write_cohere2_vision_dir, "cohere2_vision",
        family_dirs.COHERE2_VISION_PROMPT, {"max_patches": 0}, trust_remote_code=False,
        refused_at_start="max_patches",
    ),
    Family(
        "cohere2-vision-patch_size-8", family_dirs.write_cohere2_vision_dir, "cohere2_vision",
        family_dirs.COHERE2_VISION_PROMPT, {"patch_size": 8}, trust_remote_code=False,
        refused_at_start="patch_size",
    ),
    Family(
        "cohere2-vision-images_kwargs-max_patches-6", family_dirs.write_cohere2_vision_dir,
        "cohere2_vision", family_dirs.COHERE2_VISION_PROMPT,
        {"images_kwargs": {"max_patches": 6}}, apply_sizes=COHERE2_VISION_TILED_SIZES,
        trust_remote_code=False, refused_at_start="images_kwargs",
    ),
    Family(
        "cohere2-vision-size-384", family_dirs.write_cohere2_vision_dir, "cohere2_vision",
        family_dirs.COHERE2_VISION_PROMPT, {"size": {"height": 384, "width": 384}},
        trust_remote_code=False, refused_at_start="size",
    ),
    # Step3-VL: vLLM's own processor; StepVL and Step3p7 inherit its registration. The server's
    # kwargs never reach its image processor: enable_patch off there changes nothing (vLLM's
    # counts equal the default's), while config.json's enable_patch off leaves the global view.
    Family(
        "step3-vl", family_dirs.write_step3_vl_dir, "step3_vl", family_dirs.STEP3_VL_PROMPT,
        apply_sizes=STEP3_VL_APPLY_SIZES, trust_remote_code=False,
        extreme_sizes=STEP3_VL_EXTREMES,
    ),
    Family(
        "step3-vl-stepvl",
        lambda directory: family_dirs.write_step3_vl_dir(
            directory, architecture="StepVLForConditionalGeneration"
        ),
        "step3_vl", family_dirs.STEP3_VL_PROMPT, apply_sizes=STEP3_VL_VARIANT_SIZES,
        trust_remote_code=False, extreme_sizes=STEP3_VL_EXTREMES,
    ),
    Family(
        "step3-vl-step3p7",
        lambda directory: family_dirs.write_step3_vl_dir(
            directory, architecture="Step3p7ForConditionalGeneration"
        ),
        "step3_vl", family_dirs.STEP3_VL_PROMPT, apply_sizes=STEP3_VL_VARIANT_SIZES,
        trust_remote_code=False, extreme_sizes=STEP3_VL_EXTREMES,
    ),
    Family(
        "step3-vl-config-enable_patch-false",
        lambda directory: family_dirs.write_step3_vl_dir(directory, enable_patch=False),
        "step3_vl", family_dirs.STEP3_VL_PROMPT, apply_sizes=STEP3_VL_VARIANT_SIZES,
        trust_remote_code=False, extreme_sizes=STEP3_VL_EXTREMES,
    ),
    Family(
        "step3-vl-kwarg-enable_patch-false-ignored", family_dirs.write_step3_vl_dir, "step3_vl",
        family_dirs.STEP3_VL_PROMPT, {"enable_patch": False, "patch_size": 252},
        apply_sizes=STEP3_VL_VARIANT_SIZES, trust_remote_code=False,
        extreme_sizes=STEP3_VL_EXTREMES,
    ),
)  # fmt: skip


@dataclass(frozen=True)
class Proven:
    family: Family
    directory: Path
    sizes: list[Size]
    counts: list[Answer]
    applied: list[Answer]
    together: list[list[int] | str]
    most: list[Answer]
    error: str | None


@pytest.fixture(scope="module")
def vllm_answers(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Proven]:
    python = VLLM_RENDER / "bin" / "python"
    if not python.is_file():
        pytest.skip(
            "vLLM 0.33's renderer is not installed: run `make test-renderer` "
            "(python3 tests/real_vllm/install.py render) to install .tools/vllm-render"
        )
    root = tmp_path_factory.mktemp("families")
    specs, built = [], {}
    for seed, family in enumerate(FAMILIES):
        directory = family.build(root / family.name)
        sizes = family.sizes(seed)
        built[family.name] = (directory, sizes)
        specs.append({
            "name": family.name, "directory": str(directory), "count": family.count,
            "prompt": family.prompt, "mm_processor_kwargs": dict(family.mm_processor_kwargs),
            "sizes": sizes, "apply": family.apply_sizes,
            "trust_remote_code": family.trust_remote_code,
            "max_model_len": family.max_model_len,
            "images": max(family.images, family.image_index + 1), "groups": family.groups,
            "most_sizes": sizes[:MOST_SIZES] if family.never_low else [],
            "modality": family.modality,
        })  # fmt: skip
    spec_path, answers_path = root / "spec.json", root / "answers.json"
    spec_path.write_text(json.dumps({"families": specs}))
    environment = {**os.environ, "VLLM_TARGET_DEVICE": "cpu", "HF_HUB_OFFLINE": "1"}
    completed = subprocess.run(  # noqa: S603 - our own worker under the pinned interpreter
        [str(python), str(WORKER), str(spec_path), str(answers_path)],
        env=environment, capture_output=True, text=True, timeout=WORKER_TIMEOUT_SECONDS,
        check=False,
    )  # fmt: skip
    assert completed.returncode == 0, completed.stderr[-4000:]
    answers = json.loads(answers_path.read_text())
    for name, answer in answers.items():
        print(f"{name}: {answer.get('seconds', 0):.1f} s", file=sys.stderr)
    return {
        family.name: Proven(
            family,
            *built[family.name],
            answers[family.name].get("counts", []),
            answers[family.name].get("apply", []),
            answers[family.name].get("together", []),
            answers[family.name].get("most", []),
            answers[family.name].get("error"),
        )
        for family in FAMILIES
    }


def sidecar_answer(rule: Any, size: Size, image_index: int = 0) -> Answer:
    try:
        return int(at_index(rule.image_tokens(*size), rule, image_index).tokens)
    except UnsupportedImageSizeError as exc:
        return f"error: {exc}"


def agree(ours: Answer, theirs: Answer, *, never_low: bool = False) -> bool:
    if isinstance(ours, str) or isinstance(theirs, str):
        return isinstance(ours, str) and isinstance(theirs, str)
    return ours >= theirs if never_low else ours == theirs


@pytest.mark.parametrize("family", FAMILIES, ids=lambda family: family.name)
def test_sidecar_counts_equal_vllms_processor(
    vllm_answers: dict[str, Proven], family: Family
) -> None:
    proven = vllm_answers[family.name]
    overrides = ProfileOverrides(mm_processor_kwargs=family.mm_processor_kwargs)
    if family.refused_at_start:
        with pytest.raises(ConfigurationError, match=family.refused_at_start):
            load_profile(str(proven.directory), overrides)
        if not family.kwargs_dropped:
            assert all(str(answer).startswith("error") for answer in proven.applied), proven.applied
            return
        overrides = ProfileOverrides()  # what vLLM ran: the directory without the kwargs
    assert proven.error is None, proven.error
    rule = load_profile(str(proven.directory), overrides).vision
    mismatches = [
        (size, ours, theirs)
        for size, theirs in zip(proven.sizes, proven.counts, strict=True)
        if not agree(
            ours := sidecar_answer(rule, size, family.image_index),
            theirs,
            never_low=family.never_low or family.priced_above,
        )
    ]
    assert len(proven.sizes) >= RANDOM_SIZES + len(EXTREME_SIZES)
    assert not mismatches, f"{len(mismatches)} of {len(proven.sizes)}: {mismatches[:5]}"
    if family.never_low:
        most = [
            (size, ours, theirs)
            for size, theirs in zip(proven.sizes, proven.most, strict=False)
            if not agree(ours := sidecar_answer(rule, size), theirs)
        ]
        assert len(proven.most) == MOST_SIZES
        assert not most, f"{len(most)} of {MOST_SIZES}: {most[:5]}"


@pytest.mark.parametrize(
    "family", [f for f in FAMILIES if not f.refused_at_start], ids=lambda family: family.name
)
def test_full_processing_agrees_with_the_count_on_a_sample(
    vllm_answers: dict[str, Proven], family: Family
) -> None:
    proven = vllm_answers[family.name]
    rule = load_profile(
        str(proven.directory), ProfileOverrides(mm_processor_kwargs=family.mm_processor_kwargs)
    ).vision
    mismatches = [
        (size, ours, theirs)
        for size, theirs in zip(family.apply_sizes, proven.applied, strict=True)
        if not agree(
            ours := sidecar_answer(rule, size, family.image_index),
            theirs,
            never_low=family.never_low or family.priced_above,
        )
    ]
    assert not mismatches, mismatches


@pytest.mark.parametrize(
    "family", [f for f in FAMILIES if f.groups], ids=lambda family: family.name
)
def test_images_sharing_a_budget_are_never_priced_below_vllms_count(
    vllm_answers: dict[str, Proven], family: Family
) -> None:
    proven = vllm_answers[family.name]
    rule = load_profile(
        str(proven.directory), ProfileOverrides(mm_processor_kwargs=family.mm_processor_kwargs)
    ).vision
    shared = 0
    for group, theirs in zip(family.groups, proven.together, strict=True):
        assert isinstance(theirs, list), theirs
        ours = [sidecar_answer(rule, size) for size in group]
        assert all(isinstance(o, int) and o >= t for o, t in zip(ours, theirs, strict=True)), (
            group, ours, theirs,
        )  # fmt: skip
        if len(group) == 1:
            assert ours == theirs
        shared += ours != theirs
    assert shared, "no group made vLLM share the budget: the check proves nothing"
