"""SIDECAR_MM_PROCESSOR_KWARGS: vLLM's --mm-processor-kwargs reach the family's count."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from sidecar.errors import ConfigurationError
from sidecar.profiles import ProfileOverrides, load_profile
from sidecar.profiles.processor_kwargs import ProcessorKwargs
from sidecar.settings import Settings
from tests.support.family_dirs import write_minicpmv4_6_dir

QWEN = "Qwen/Qwen2.5-VL-7B-Instruct"
INTERNVL_HF = "OpenGVLab/InternVL3-8B-hf"


def kwargs(values: dict[str, object], **pixels: int) -> ProfileOverrides:
    return ProfileOverrides(mm_processor_kwargs=values, **pixels)  # type: ignore[arg-type]


def test_pixel_bounds_in_the_kwargs_are_the_pixel_settings() -> None:
    through_kwargs = load_profile(QWEN, kwargs({"min_pixels": 200_704, "max_pixels": 1_003_520}))
    settings = ProfileOverrides(min_pixels=200_704, max_pixels=1_003_520)
    through_settings = load_profile(QWEN, settings)
    assert through_kwargs.vision == through_settings.vision
    assert through_kwargs.vision.max_image_tokens().tokens == 1_280


def test_the_same_bound_in_both_places_is_accepted_and_a_different_one_refused() -> None:
    same = load_profile(QWEN, kwargs({"max_pixels": 1_003_520}, max_pixels=1_003_520))
    assert same.vision.max_image_tokens().tokens == 1_280
    with pytest.raises(ConfigurationError, match="SIDECAR_MAX_PIXELS=802816"):
        load_profile(QWEN, kwargs({"max_pixels": 1_003_520}, max_pixels=802_816))


def test_a_family_knob_changes_the_count() -> None:
    default = load_profile(INTERNVL_HF).vision
    capped = load_profile(INTERNVL_HF, kwargs({"max_patches": 4})).vision
    assert default.image_tokens(6000, 500).tokens == 2 + 256 * (12 + 1)
    assert capped.image_tokens(6000, 500).tokens == 2 + 256 * (4 + 1)


def test_knobs_in_the_images_scope_count_and_the_top_level_wins() -> None:
    scoped = load_profile(INTERNVL_HF, kwargs({"images_kwargs": {"max_patches": 4}})).vision
    both = kwargs({"images_kwargs": {"max_patches": 4}, "max_patches": 6})
    assert scoped.image_tokens(6000, 500).tokens == 2 + 256 * 5
    assert load_profile(INTERNVL_HF, both).vision.image_tokens(6000, 500).tokens == 2 + 256 * 7


def test_where_vllm_reads_the_images_scope_first_so_does_the_sidecar(tmp_path: Path) -> None:
    # MiniCPM-V 4.6: max_slice_nums 2 under images_kwargs beats 4 at the top level in vLLM.
    directory = write_minicpmv4_6_dir(tmp_path)
    both = kwargs({"images_kwargs": {"max_slice_nums": 2}, "max_slice_nums": 4})
    assert load_profile(str(directory), both).vision.image_tokens(3000, 1000).tokens == 219


def test_a_knob_the_family_cannot_price_stops_start_up_naming_it() -> None:
    with pytest.raises(ConfigurationError, match=r"max_soft_tokens.*knobs it prices: max_pixels"):
        load_profile(QWEN, kwargs({"max_soft_tokens": 560}))


def test_count_neutral_knobs_pass() -> None:
    profile = load_profile(QWEN, kwargs({"do_rescale": True, "image_mean": [0.5, 0.5, 0.5]}))
    assert profile.vision == load_profile(QWEN).vision


@pytest.mark.parametrize("bad", [0, -3, "1003520", True])
def test_a_pixel_bound_must_be_a_positive_integer(bad: object) -> None:
    with pytest.raises(ConfigurationError, match="max_pixels must be a positive integer"):
        load_profile(QWEN, kwargs({"max_pixels": bad}))


def test_the_setting_reads_vllms_json(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("SIDECAR_MODEL", INTERNVL_HF)
    monkeypatch.setenv("SIDECAR_MM_PROCESSOR_KWARGS", '{"max_patches": 4}')
    settings = Settings()  # type: ignore[call-arg]  # model comes from the environment
    assert settings.mm_processor_kwargs == {"max_patches": 4}
    profile = load_profile(settings.model, ProfileOverrides.from_settings(settings))
    assert profile.vision.max_image_tokens().tokens == 2 + 256 * 5


def test_unset_is_no_knob(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("SIDECAR_MODEL", QWEN)
    monkeypatch.delenv("SIDECAR_MM_PROCESSOR_KWARGS", raising=False)
    assert Settings().mm_processor_kwargs == {}  # type: ignore[call-arg]


def test_an_engine_priced_model_takes_any_knob(tmp_path: Path) -> None:
    # vLLM counts such a model's images itself, with its own kwargs: nothing to price here.
    config = {
        "architectures": ["KimiK3ForConditionalGeneration"],
        "model_type": "kimi_k3",
        "text_config": {
            "hidden_size": 64, "num_attention_heads": 2, "num_hidden_layers": 2,
            "max_position_embeddings": 4096,
        },
    }  # fmt: skip
    (tmp_path / "config.json").write_text(json.dumps(config))
    overrides = kwargs({"in_token_limit": 2048})
    profile = load_profile(str(tmp_path), overrides, engine_only=True)
    assert profile.architecture.name == "KimiK3ForConditionalGeneration"


def test_a_top_level_only_family_refuses_its_knobs_under_images_kwargs() -> None:
    # LFM2-VL's vLLM grid reads tile_size at the top level; its processor reads images_kwargs.
    knobs = ProcessorKwargs.from_settings_values({"images_kwargs": {"tile_size": 384}})
    with pytest.raises(ConfigurationError, match="tile_size under images_kwargs"):
        knobs.for_family("m", "lfm2_vl", frozenset({"tile_size"}), top_level_only=True)
    assert knobs.for_family("m", "gemma4", frozenset({"tile_size"})) == {"tile_size": 384}
    top = ProcessorKwargs.from_settings_values({"tile_size": 384})
    assert top.for_family("m", "lfm2_vl", frozenset({"tile_size"}), top_level_only=True) == {
        "tile_size": 384
    }


def test_a_family_whose_count_ignores_pixel_bounds_refuses_them_in_any_form() -> None:
    # Cosmos 3 Edge's image processor reads size alone: vLLM drops min_pixels / max_pixels.
    for knobs in (
        ProcessorKwargs.from_settings_values({"max_pixels": 200_704}),
        ProcessorKwargs.from_settings_values({"images_kwargs": {"min_pixels": 3136}}),
        ProcessorKwargs.from_settings_values({}, max_pixels=200_704),
    ):
        with pytest.raises(ConfigurationError, match="does not apply to this family"):
            knobs.for_family("m", "cosmos3_edge", frozenset({"size"}), pixel_bounds=False)
    size = ProcessorKwargs.from_settings_values({"size": {"longest_edge": 1}})
    assert size.for_family("m", "cosmos3_edge", frozenset({"size"}), pixel_bounds=False) == {
        "size": {"longest_edge": 1}
    }
