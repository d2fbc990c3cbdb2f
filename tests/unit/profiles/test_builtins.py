"""profiles.builtins: each built-in checkpoint is what its configuration files give, so a
built-in and the real model directory load as one profile."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from sidecar.profiles import builtin_model_names, load_profile
from sidecar.profiles.builtins import BUILTIN_MODELS

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
