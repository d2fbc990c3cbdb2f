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
from tests.real_vllm.renderer import VLLM_RENDER
from tests.support import family_dirs
from tests.support.family_dirs import EXTREME_SIZES, random_sizes

Size = tuple[int, int]
HERE = Path(__file__).resolve().parent
WORKER = HERE / "vllm_processors.py"
RANDOM_SIZES = 1000
WORKER_TIMEOUT_SECONDS = 600
# The full path processes a blank image of each size (resizing and tiling it: the slow part):
# small and odd sizes for each family, three for each variant of its knobs.
APPLY_SIZES = (
    (1, 1), (3, 900), (900, 3), (1, 4000), (4000, 1), (640, 480), (2048, 1),
    *random_sizes(7, 5, largest_side=1024),
)  # fmt: skip
VARIANT_APPLY_SIZES = ((1, 1), (900, 3), (640, 480))

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
    modality: str = "image"  # the item's modality in vLLM's processor (Kimi-K2.5: vision_chunk)
    refused_at_start: str | None = None  # vLLM fails every image; the sidecar refuses to
    # start, with a message matching this

    def sizes(self, seed: int) -> list[Size]:
        return [*EXTREME_SIZES, *random_sizes(seed, RANDOM_SIZES)]


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
)  # fmt: skip


@dataclass(frozen=True)
class Proven:
    family: Family
    directory: Path
    sizes: list[Size]
    counts: list[Answer]
    applied: list[Answer]
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
            "trust_remote_code": family.trust_remote_code, "modality": family.modality,
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
            answers[family.name].get("error"),
        )
        for family in FAMILIES
    }


def sidecar_answer(rule: Any, size: Size) -> Answer:
    try:
        return int(rule.image_tokens(*size).tokens)
    except UnsupportedImageSizeError as exc:
        return f"error: {exc}"


def agree(ours: Answer, theirs: Answer) -> bool:
    return (isinstance(ours, str) and isinstance(theirs, str)) or ours == theirs


@pytest.mark.parametrize("family", FAMILIES, ids=lambda family: family.name)
def test_sidecar_counts_equal_vllms_processor(
    vllm_answers: dict[str, Proven], family: Family
) -> None:
    proven = vllm_answers[family.name]
    overrides = ProfileOverrides(mm_processor_kwargs=family.mm_processor_kwargs)
    if family.refused_at_start:
        assert all(str(answer).startswith("error") for answer in proven.applied), proven.applied
        with pytest.raises(ConfigurationError, match=family.refused_at_start):
            load_profile(str(proven.directory), overrides)
        return
    assert proven.error is None, proven.error
    rule = load_profile(str(proven.directory), overrides).vision
    mismatches = [
        (size, ours, theirs)
        for size, theirs in zip(proven.sizes, proven.counts, strict=True)
        if not agree(ours := sidecar_answer(rule, size), theirs)
    ]
    assert len(proven.sizes) >= RANDOM_SIZES + len(EXTREME_SIZES)
    assert not mismatches, f"{len(mismatches)} of {len(proven.sizes)}: {mismatches[:5]}"


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
        if not agree(ours := sidecar_answer(rule, size), theirs)
    ]
    assert not mismatches, mismatches
