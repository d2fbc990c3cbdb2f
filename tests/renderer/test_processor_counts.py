"""The alias families, and the families with built-in profiles, against vLLM 0.33's own
multimodal processor: 0 mismatches, refusals included, on 1,000 random sizes per family plus
the extremes.

vLLM's processor runs in-process in ``.tools/vllm-render`` (``processor_worker.py``) on model
directories built offline (``processor_counts.py``). The 1,000 sizes and the extremes use the
placeholder count vLLM computes from the size (``info.get_num_image_tokens``, or for
Mistral3, Gemma 3, Idefics3 and SmolVLM the length of the replacement its prompt update
makes for the size), after vLLM's decode limit; a sample of real images goes through the
full processor (the HF processor, then vLLM's prompt updates), whose placeholder must equal
that count, so the size-only count is the one a served request gets. The sidecar's outcome
is ``load_profile(directory)``'s rule on the same directory: its token count, or a refusal.

One worker process serves every family: vLLM's import dominates, each family adds a few
seconds (measured in docs/supported-models.md).
"""

from __future__ import annotations

import random
from pathlib import Path
from typing import Any

import pytest

from sidecar.errors import UnsupportedImageSizeError
from sidecar.profiles import load_profile
from sidecar.profiles.architectures import ARCHITECTURES
from sidecar.vision import VisionRule
from tests.renderer.harness import renderer_installed
from tests.renderer.processor_counts import (
    FAMILIES,
    WORKER_TIMEOUT_SECONDS,
    Size,
    vllm_outcomes,
    write_model,
)
from tests.support.oracle_helpers import (
    ASPECT_LIMIT_EXTREMES,
    COMMON_EXTREMES,
    log_uniform_sizes,
    mismatch_report,
)

# One worker run builds every family's processor; the first test waits for it.
pytestmark = pytest.mark.timeout(WORKER_TIMEOUT_SECONDS)
SEED = 20_261_202
RANDOM_SIZES_PER_FAMILY = 1_000
# Around each family's pixel bounds (Qwen3 65,536 to 16,777,216; GLM 12,544 to 9,633,792;
# dots.ocr to 11,289,600; Omni to 12,845,056; LightOnOCR's 1,540 px edge) and past vLLM's
# decode limit of 178,956,970 px (13,377 x 13,377 is under it, 13,377 x 13,379 over).
BOUND_SIDES = (55, 56, 57, 111, 112, 113, 255, 256, 257, 1539, 1540, 1541, 3103, 3104, 3360,
               3361, 3584, 3585, 4096, 4097)  # fmt: skip
PIXEL_LIMIT_SIZES: tuple[Size, ...] = (
    (15000, 12000), (13377, 13377), (13377, 13379), (178_956_971, 1), (1, 178_956_971),
    (89_478_485, 2), (2, 89_478_486),
)  # fmt: skip
EXTREMES: tuple[Size, ...] = (
    *COMMON_EXTREMES,
    *ASPECT_LIMIT_EXTREMES,
    *((side, side) for side in BOUND_SIDES),
    *((side + 1, side) for side in BOUND_SIDES),
    *PIXEL_LIMIT_SIZES,
)
SIZES: list[Size] = [
    *log_uniform_sizes(random.Random(SEED), RANDOM_SIZES_PER_FAMILY),
    *EXTREMES,
]
# Real images through the full processor: small, odd, at a bound, refused (2000 x 1 shrinks to
# no rows in LightOnOCR's 1,540 px; 1 x 300 is past Qwen's aspect limit).
APPLIED: tuple[Size, ...] = (
    (1, 1), (28, 28), (300, 200), (640, 480), (1024, 768), (37, 1000), (3, 500), (1920, 1080),
    (2000, 1), (1, 300), (256, 256), (1541, 1540),
)  # fmt: skip
# A family proven through the full processor only takes these too: random real images small
# enough to process quickly (log-uniform sides, at most 1.5 M px).
APPLIED_ONLY_SIZES = 60
APPLIED_ONLY: tuple[Size, ...] = (
    *APPLIED,
    *log_uniform_sizes(random.Random(SEED + 1), APPLIED_ONLY_SIZES, max_pixels=1_500_000),
)
PIXEL_LIMIT = "pixel limit: "
REFUSED = "refused"


@pytest.fixture(scope="module")
def vllm_results(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Any]:
    if not renderer_installed():
        pytest.skip("vLLM 0.33 is not installed in .tools/vllm-render (make test-renderer)")
    root = tmp_path_factory.mktemp("alias-models")
    directories = {family.name: write_model(family, root / family.name) for family in FAMILIES}
    applied = {f.name: APPLIED if f.size_only_count_is_served else APPLIED_ONLY for f in FAMILIES}
    results = vllm_outcomes(directories, SIZES, applied)
    return {"directories": directories, **results}


def _vllm(count: int | str) -> int | str:
    """vLLM's outcome as the sidecar states it: a count, the decode limit, or a refusal. A
    count of 0 is a refusal: the HF processor cannot make an image with no patches (the
    full-processor sample shows it)."""
    if isinstance(count, str):
        return PIXEL_LIMIT if count.startswith(PIXEL_LIMIT) else REFUSED
    return REFUSED if count == 0 else count


def _sidecar(rule: VisionRule, size: Size) -> int | str:
    try:
        return rule.image_tokens(*size).tokens
    except UnsupportedImageSizeError as exc:
        if "exceed the maximum of 178956970 pixels" in exc.message:
            return PIXEL_LIMIT
        return REFUSED


SIZE_ONLY = [family.name for family in FAMILIES if family.size_only_count_is_served]
APPLIED_ONLY_FAMILIES = [f.name for f in FAMILIES if not f.size_only_count_is_served]


@pytest.mark.parametrize("name", SIZE_ONLY)
def test_the_sidecar_prices_every_size_as_vllms_processor_does(
    name: str, vllm_results: dict[str, Any]
) -> None:
    result = vllm_results[name]
    assert "error" not in result, result
    rule = load_profile(str(vllm_results["directories"][name])).vision
    mismatches = [
        f"{w}x{h}: sidecar {mine}, vLLM {theirs}"
        for (w, h), count in zip(SIZES, result["counts"], strict=True)
        if (mine := _sidecar(rule, (w, h))) != (theirs := _vllm(count))
    ]
    assert not mismatches, mismatch_report(mismatches, len(SIZES)) + f"\n{result['errors']}"
    outcomes = [_vllm(count) for count in result["counts"]]
    assert outcomes.count(PIXEL_LIMIT) >= 4  # the decode limit was met, not skipped
    if rule.image_tokens(1, 1) != rule.max_image_tokens():  # not a fixed-count family
        assert len({o for o in outcomes if isinstance(o, int)}) > 50  # a range of counts


@pytest.mark.parametrize("name", APPLIED_ONLY_FAMILIES)
def test_a_family_whose_size_only_count_is_not_served_matches_vllms_full_processor(
    name: str, vllm_results: dict[str, Any]
) -> None:
    result = vllm_results[name]
    assert "error" not in result, result
    rule = load_profile(str(vllm_results["directories"][name])).vision
    mismatches = [
        f"{w}x{h}: sidecar {mine}, vLLM {theirs}"
        for (w, h), applied in zip(APPLIED_ONLY, result["applied"], strict=True)
        if (mine := _sidecar(rule, (w, h))) != (theirs := _vllm(applied))
    ]
    assert not mismatches, mismatch_report(mismatches, len(APPLIED_ONLY)) + str(result["errors"])
    # vLLM's size-only count differs (InternVL-hf: 256 whatever the size) or does not exist
    # (Llama 4: its replacement reads the HF processor's aspect_ratios); the decode limit
    # still refuses what vLLM will not load.
    size_only = [_vllm(count) for count in result["counts"]]
    assert len({o for o in size_only if isinstance(o, int)}) < 3
    for size, outcome in zip(SIZES, size_only, strict=True):
        assert (outcome == PIXEL_LIMIT) == (_sidecar(rule, size) == PIXEL_LIMIT), size


@pytest.mark.parametrize("name", [family.name for family in FAMILIES])
def test_vllms_full_processor_gives_the_size_only_count(
    name: str, vllm_results: dict[str, Any]
) -> None:
    result = vllm_results[name]
    assert "error" not in result, result
    rule = load_profile(str(vllm_results["directories"][name])).vision
    size_only = dict(zip(SIZES, result["counts"], strict=True))
    served = next(f for f in FAMILIES if f.name == name).size_only_count_is_served
    for size, applied in zip(APPLIED, result["applied"][: len(APPLIED)], strict=True):
        expected = _sidecar(rule, size)
        assert _vllm(applied) == expected, (size, applied, result["errors"])
        if served and size in size_only:
            assert _vllm(size_only[size]) == expected, size


def test_every_alias_family_is_served_by_the_processing_info_the_table_names(
    vllm_results: dict[str, Any],
) -> None:
    for family in FAMILIES:
        profile = load_profile(str(vllm_results["directories"][family.name]))
        assert profile.architecture.name == family.architecture
        assert vllm_results[family.name]["info"].endswith("ProcessingInfo")


def test_the_directories_carry_what_the_sidecar_reads(tmp_path: Path) -> None:
    # Runs without vLLM: each alias directory loads in the sidecar with its architecture.
    for family in FAMILIES:
        profile = load_profile(str(write_model(family, tmp_path / family.name)))
        assert profile.architecture.name == family.architecture


def test_every_family_run_here_is_recorded_as_proven_against_vllms_processor() -> None:
    # The "Proven against" column of docs/supported-models.md comes from the architectures
    # table: each family this tier runs is recorded there as proven by it.
    for family in FAMILIES:
        assert "tests/renderer" in ARCHITECTURES[family.architecture].proof, family.architecture
