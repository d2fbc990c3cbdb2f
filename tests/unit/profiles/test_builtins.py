"""profiles.builtins: each built-in checkpoint is what its configuration files give, so a
built-in and the real model directory load as one profile."""

from __future__ import annotations

import json
from collections.abc import Callable
from pathlib import Path

import pytest

from sidecar.errors import UnsupportedImageSizeError
from sidecar.profiles import builtin_model_names, load_profile
from sidecar.profiles.builtins import BUILTIN_MODELS
from sidecar.vision import ImageTokens, VisionRule
from tests.support import family_dirs

NAMES = sorted(BUILTIN_MODELS)


def test_builtins_are_the_models_known_by_name() -> None:
    assert sorted(builtin_model_names()) == NAMES
    assert all("/" in name for name in NAMES)  # Hugging Face ids: owner/name


@pytest.mark.parametrize("name", NAMES)
def test_a_builtin_loads_as_its_model_directory_does(name: str, tmp_path: Path) -> None:
    entry = BUILTIN_MODELS[name]
    directory = tmp_path / name.replace("/", "--")
    directory.mkdir()
    (directory / "config.json").write_text(json.dumps(entry.config))
    (directory / "preprocessor_config.json").write_text(json.dumps(entry.preprocessor))
    if entry.video_preprocessor is not None:
        (directory / "video_preprocessor_config.json").write_text(
            json.dumps(entry.video_preprocessor)
        )
    builtin, from_files = load_profile(name), load_profile(str(directory))
    assert builtin.source == "builtin"
    for field in ("model_type", "vision", "video", "kv", "max_position_embeddings"):
        assert getattr(from_files, field) == getattr(builtin, field), field


@pytest.mark.parametrize("name", NAMES)
def test_a_builtin_carries_its_parameter_count_for_the_weights(name: str) -> None:
    count = BUILTIN_MODELS[name].parameter_count
    assert count is None or count > 10**8
    assert load_profile(name).parameter_count == count


@pytest.mark.parametrize("name", NAMES)
def test_a_builtin_prices_every_size_up_to_its_largest_image(name: str) -> None:
    profile = load_profile(name)
    largest = profile.vision.max_image_tokens()
    photo = profile.vision.image_tokens(1024, 768)
    assert 0 < photo.tokens <= largest.tokens
    # The costliest image fits the context it is served with (MiniCPM-V's is bounded by it),
    # and holds KV.
    assert largest.tokens + largest.wrapper_tokens <= profile.max_position_embeddings
    assert profile.kv.request_kv_bytes(largest.tokens + largest.wrapper_tokens) > 0
    assert profile.kv.bytes_per_token > 0


# Built-ins of families whose model directory the renderer tier proves against vLLM 0.33's
# processor (tests/renderer/test_new_families.py): the transcribed processor values must
# price every size as that directory does.
PROVEN_DIRECTORIES: dict[str, Callable[[Path], Path]] = {
    "PaddlePaddle/PaddleOCR-VL": family_dirs.write_paddleocr_vl_dir,
    "deepseek-ai/DeepSeek-OCR": family_dirs.write_deepseek_ocr_dir,
    "moonshotai/Kimi-K2.5": family_dirs.write_kimi_k25_dir,
    "moonshotai/Kimi-VL-A3B-Instruct": family_dirs.write_kimi_vl_dir,
    "AIDC-AI/Ovis2.5-9B": family_dirs.write_ovis2_5_dir,
    "microsoft/Phi-4-multimodal-instruct": family_dirs.write_phi4mm_dir,
    "openbmb/MiniCPM-V-4.6": family_dirs.write_minicpmv4_6_dir,
    "google/gemma-4-31B-it": family_dirs.write_gemma4_dir,
    "google/gemma-4-26B-A4B-it": family_dirs.write_gemma4_dir,
    "google/gemma-4-E4B-it": family_dirs.write_gemma4_dir,
    "google/gemma-4-E2B-it": family_dirs.write_gemma4_dir,
}
SIZES = family_dirs.EXTREME_SIZES + tuple(family_dirs.random_sizes(7, 300))


def _priced(vision: VisionRule, width_px: int, height_px: int) -> ImageTokens | str:
    try:
        return vision.image_tokens(width_px, height_px)
    except UnsupportedImageSizeError:
        return "refused"


@pytest.mark.parametrize("name", sorted(PROVEN_DIRECTORIES))
def test_a_builtin_prices_every_size_as_its_familys_proven_directory(
    name: str, tmp_path: Path
) -> None:
    builtin = load_profile(name).vision
    proven = load_profile(str(PROVEN_DIRECTORIES[name](tmp_path))).vision
    for width_px, height_px in SIZES:
        assert _priced(builtin, width_px, height_px) == _priced(proven, width_px, height_px), (
            width_px,
            height_px,
        )
