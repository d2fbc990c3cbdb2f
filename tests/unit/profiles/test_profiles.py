"""profiles: built-ins, model directories, overrides, start-up errors, and which vision and video
rule each model family gets."""

from __future__ import annotations

import json
from dataclasses import replace
from pathlib import Path
from typing import Any

import pytest

from sidecar.errors import ConfigurationError
from sidecar.profiles import VISION_RULES, ProfileOverrides, builtin_model_names, load_profile
from sidecar.profiles.builtins import BUILTIN_MODELS
from sidecar.profiles.kv_geometry import AttentionKind
from sidecar.video.qwen import QwenVideoRule
from sidecar.vision import PixelLimited
from sidecar.vision.pixtral import PixtralRule
from tests.support.hybrid_models import NEMOTRON_NANO_9B_V2, QWEN3_5_27B, hybrid_geometry
from tests.support.sidecars import QWEN
from tests.support.videos import QWEN3, QWEN3_RULE, qwen3_directory, video_rule

REQUIRED_BUILTINS = [
    "llava-hf/llava-1.5-7b-hf",
    "Qwen/Qwen2-VL-2B-Instruct",
    "Qwen/Qwen2-VL-7B-Instruct",
    "Qwen/Qwen2-VL-72B-Instruct",
    "Qwen/Qwen2.5-VL-3B-Instruct",
    "Qwen/Qwen2.5-VL-7B-Instruct",
    "Qwen/Qwen2.5-VL-32B-Instruct",
    "Qwen/Qwen2.5-VL-72B-Instruct",
    "Qwen/Qwen3-VL-2B-Instruct",
    "Qwen/Qwen3-VL-4B-Instruct",
    "Qwen/Qwen3-VL-8B-Instruct",
    "Qwen/Qwen3-VL-32B-Instruct",
]


def _write_model_dir(directory: Path, name: str, *, processor_file: str) -> Path:
    entry = BUILTIN_MODELS[name]
    directory.mkdir(parents=True)
    (directory / "config.json").write_text(json.dumps(entry.config))
    (directory / processor_file).write_text(json.dumps(entry.preprocessor))
    return directory


@pytest.mark.parametrize("name", REQUIRED_BUILTINS, ids=lambda n: n.split("/")[1])
def test_load_profile_knows_every_required_builtin(name: str) -> None:
    profile = load_profile(name)
    assert profile.name == name
    assert profile.kv.bytes_per_token > 0
    assert profile.vision.image_tokens(640, 480).tokens > 0
    assert name in builtin_model_names()


def test_load_profile_matches_builtin_names_case_insensitively() -> None:
    assert load_profile("qwen/qwen2.5-vl-7b-instruct").name == "Qwen/Qwen2.5-VL-7B-Instruct"


@pytest.mark.parametrize("name", REQUIRED_BUILTINS, ids=lambda n: n.split("/")[1])
def test_load_profile_from_a_model_directory_equals_the_builtin(name: str, tmp_path: Path) -> None:
    directory = _write_model_dir(
        tmp_path / "model", name, processor_file="preprocessor_config.json"
    )
    from_dir, builtin = load_profile(str(directory)), load_profile(name)
    assert from_dir.vision == builtin.vision
    assert from_dir.kv == builtin.kv
    assert from_dir.max_position_embeddings == builtin.max_position_embeddings
    assert from_dir.source == str(directory)


def test_load_profile_reads_processor_config_json_when_no_preprocessor_config(
    tmp_path: Path,
) -> None:
    name = "Qwen/Qwen3-VL-8B-Instruct"
    directory = _write_model_dir(tmp_path / "m", name, processor_file="processor_config.json")
    assert load_profile(str(directory)).vision == load_profile(name).vision


def test_load_profile_counts_parameters_from_the_safetensors_index(tmp_path: Path) -> None:
    directory = _write_model_dir(
        tmp_path / "m", "Qwen/Qwen2.5-VL-7B-Instruct", processor_file="preprocessor_config.json"
    )
    index = {"metadata": {"total_size": 16_584_333_312}, "weight_map": {}}
    (directory / "model.safetensors.index.json").write_text(json.dumps(index))
    assert load_profile(str(directory)).parameter_count == 8_292_166_656


def test_load_profile_reads_sliding_window_layer_types(tmp_path: Path) -> None:
    config = dict(BUILTIN_MODELS["Qwen/Qwen2.5-VL-7B-Instruct"].config)
    config["layer_types"] = ["sliding_attention"] * 20 + ["full_attention"] * 8
    config["sliding_window"] = 4096
    directory = tmp_path / "m"
    directory.mkdir()
    (directory / "config.json").write_text(json.dumps(config))
    (directory / "preprocessor_config.json").write_text(
        json.dumps(BUILTIN_MODELS["Qwen/Qwen2.5-VL-7B-Instruct"].preprocessor)
    )
    groups = {g.kind: g for g in load_profile(str(directory)).kv.layer_groups}
    assert groups[AttentionKind.SLIDING_WINDOW].num_layers == 20
    assert groups[AttentionKind.SLIDING_WINDOW].window_tokens == 4096
    assert groups[AttentionKind.FULL].num_layers == 8


@pytest.mark.parametrize(
    ("model", "message"),
    [
        ("no-such/model", "unknown model"),
        ("/nonexistent/dir", "unknown model"),
    ],
    ids=["unknown-name", "missing-dir"],
)
def test_load_profile_refuses_unknown_models_clearly(model: str, message: str) -> None:
    with pytest.raises(ConfigurationError, match=message):
        load_profile(model)


@pytest.mark.parametrize(
    ("files", "message"),
    [
        ({}, "no config.json"),
        ({"config.json": "{not json"}, "cannot read"),
        ({"config.json": "[1, 2]"}, "JSON object"),
        ({"config.json": json.dumps({"model_type": "bert"})}, "not an image architecture"),
        ({"config.json": json.dumps({"model_type": "qwen2_vl"})}, "missing or malformed"),
    ],
    ids=["no-config", "bad-json", "not-object", "unsupported-type", "incomplete"],
)
def test_load_profile_refuses_unreadable_directories_clearly(
    files: dict[str, str], message: str, tmp_path: Path
) -> None:
    for name, text in files.items():
        (tmp_path / name).write_text(text)
    with pytest.raises(ConfigurationError, match=message):
        load_profile(str(tmp_path))


@pytest.mark.parametrize(
    ("kv_cache_dtype", "bytes_per_token"),
    [("auto", 57_344), ("bfloat16", 57_344), ("fp8", 28_672), ("fp8_e5m2", 28_672)],
    ids=["auto", "bf16", "fp8", "fp8-e5m2"],
)
def test_kv_cache_dtype_override_sets_bytes_per_element(
    kv_cache_dtype: str, bytes_per_token: int
) -> None:
    overrides = ProfileOverrides(kv_cache_dtype=kv_cache_dtype)
    profile = load_profile("Qwen/Qwen2.5-VL-7B-Instruct", overrides)
    assert profile.kv.bytes_per_token == bytes_per_token


def test_kv_cache_dtype_override_refuses_unknown_dtypes() -> None:
    with pytest.raises(ConfigurationError, match="unsupported KV cache dtype"):
        load_profile("Qwen/Qwen2.5-VL-7B-Instruct", ProfileOverrides(kv_cache_dtype="int3"))


@pytest.mark.parametrize(
    ("tp", "bytes_per_token"),
    [(1, 327_680), (2, 163_840), (8, 40_960), (16, 40_960)],
    ids=["tp1", "tp2", "tp8", "tp16-one-head-per-rank"],
)
def test_tensor_parallel_override_splits_kv_heads_per_gpu(tp: int, bytes_per_token: int) -> None:
    profile = load_profile(
        "Qwen/Qwen2.5-VL-72B-Instruct", ProfileOverrides(tensor_parallel_size=tp)
    )
    assert profile.kv.bytes_per_token == bytes_per_token


def test_pixel_overrides_change_qwen_tokens_like_mm_processor_kwargs() -> None:
    profile = load_profile(
        "Qwen/Qwen2.5-VL-7B-Instruct", ProfileOverrides(min_pixels=200_704, max_pixels=1_003_520)
    )
    assert profile.vision.image_tokens(64, 64).tokens == 256
    assert profile.vision.max_image_tokens().tokens == 1_280


def test_invalid_block_size_override_is_a_configuration_error() -> None:
    with pytest.raises(ConfigurationError, match="block_size"):
        load_profile("Qwen/Qwen2.5-VL-7B-Instruct", ProfileOverrides(block_size_tokens=0))


# -- video rules --------------------------------------------------------------------------


def test_families_without_a_video_rule_have_none() -> None:
    assert load_profile("llava-hf/llava-1.5-7b-hf").video is None


def test_vllm_pixel_bounds_reach_the_qwen2_video_processor_only() -> None:
    overrides = ProfileOverrides(min_pixels=200_704, max_pixels=1_003_520)
    assert (video_rule(QWEN, overrides).min_pixels, video_rule(QWEN, overrides).max_pixels) == (
        200_704, 1_003_520,
    )  # fmt: skip
    assert video_rule(QWEN3, overrides) == QWEN3_RULE


def test_model_directory_video_config_is_found_where_transformers_looks(tmp_path: Path) -> None:
    video = {"size": {"shortest_edge": 8192, "longest_edge": 1_000_000}, "patch_size": 16}
    nested = {"video_processor": {"size": {"shortest_edge": 1024, "longest_edge": 2_000_000}}}
    alone = qwen3_directory(tmp_path / "alone", video_preprocessor_config=video)
    rule = load_profile(str(alone)).video
    assert isinstance(rule, QwenVideoRule)
    assert (rule.min_pixels, rule.max_pixels) == (8192, 1_000_000)
    both = qwen3_directory(
        tmp_path / "nested", video_preprocessor_config=video, processor_config=nested
    )
    rule = load_profile(str(both)).video
    assert isinstance(rule, QwenVideoRule)
    assert (rule.min_pixels, rule.max_pixels) == (1024, 2_000_000)
    rule = load_profile(str(qwen3_directory(tmp_path / "neither"))).video
    assert isinstance(rule, QwenVideoRule)  # built from preprocessor_config.json's size
    assert (rule.min_pixels, rule.max_pixels) == (65_536, 16_777_216)


# -- the design brief's weights -------------------------------------------------------------

QWEN25_VL_7B = "Qwen/Qwen2.5-VL-7B-Instruct"
QWEN25_VL_72B = "Qwen/Qwen2.5-VL-72B-Instruct"


@pytest.mark.parametrize(
    ("model", "weights_gib"), [(QWEN25_VL_7B, 15.4), (QWEN25_VL_72B, 136.7)], ids=["7b", "72b"]
)
def test_bf16_weights_match_the_brief(model: str, weights_gib: float) -> None:
    parameters = load_profile(model).parameter_count
    assert parameters is not None
    assert round(parameters * 2 / 2**30, 1) == weights_gib


# -- which rule each family gets, and model directories of the other built-ins ---------------

PIXTRAL = "mistral-community/pixtral-12b"
OTHER_FAMILY_BUILTINS = [
    "google/gemma-3-4b-it",
    "google/gemma-3-12b-it",
    "google/gemma-3-27b-it",
    PIXTRAL,
    "mistralai/Mistral-Small-3.1-24B-Instruct-2503",
    "zai-org/GLM-4.1V-9B-Thinking",
]
LLAVA_NEXT = "llava-hf/llava-v1.6-mistral-7b-hf"
LLAVA_ONEVISION = "llava-hf/llava-onevision-qwen2-7b-ov-hf"
INTERNVL = "OpenGVLab/InternVL3-8B-hf"
IDEFICS3 = "HuggingFaceM4/Idefics3-8B-Llama3"
SMOLVLM = "HuggingFaceTB/SmolVLM2-2.2B-Instruct"
LLAMA4 = "meta-llama/Llama-4-Scout-17B-16E-Instruct"


def test_pixtral_12b_dispatches_on_the_llava_wrappers_vision_tower() -> None:
    assert load_profile(PIXTRAL).model_type == "llava"
    assert load_profile(PIXTRAL).vision == PixelLimited(
        PixtralRule.from_configs("pixtral", BUILTIN_MODELS[PIXTRAL].config, _preprocessor(PIXTRAL))
    )
    llava = load_profile("llava-hf/llava-1.5-7b-hf").vision
    assert llava.family == "llava"
    assert llava.image_tokens(4000, 100).tokens == 576


@pytest.mark.parametrize("name", OTHER_FAMILY_BUILTINS, ids=lambda n: n.split("/")[1])
def test_model_directory_gives_the_builtin_profile(name: str, tmp_path: Path) -> None:
    entry = BUILTIN_MODELS[name]
    (tmp_path / "config.json").write_text(json.dumps(entry.config))
    (tmp_path / "preprocessor_config.json").write_text(json.dumps(entry.preprocessor))
    from_dir, builtin = load_profile(str(tmp_path)), load_profile(name)
    assert (from_dir.vision, from_dir.kv) == (builtin.vision, builtin.kv)
    assert builtin.max_position_embeddings > 0


TILE_BUILTINS = [
    LLAVA_NEXT,
    LLAVA_ONEVISION,
    *(f"OpenGVLab/InternVL3-{size}-hf" for size in ("1B", "2B", "8B", "14B", "38B", "78B")),
    IDEFICS3,
    SMOLVLM,
    LLAMA4,
]


@pytest.mark.parametrize("name", TILE_BUILTINS, ids=lambda n: n.split("/")[1])
def test_builtin_profile_equals_the_profile_of_its_model_directory(
    name: str, tmp_path: Path
) -> None:
    entry = BUILTIN_MODELS[name]
    (tmp_path / "config.json").write_text(json.dumps(entry.config))
    (tmp_path / "preprocessor_config.json").write_text(json.dumps(entry.preprocessor))
    from_directory, builtin = load_profile(str(tmp_path)), load_profile(name)
    assert from_directory.vision == builtin.vision
    assert from_directory.kv == builtin.kv
    assert builtin.kv.bytes_per_token > 0
    assert builtin.max_position_embeddings == from_directory.max_position_embeddings > 0


def _preprocessor(model: str) -> dict[str, Any]:
    return dict(BUILTIN_MODELS[model].preprocessor)


def _without(mapping: dict[str, Any], *keys: str) -> dict[str, Any]:
    return {key: value for key, value in mapping.items() if key not in keys}


@pytest.mark.parametrize(
    ("model", "drop_config", "drop_preprocessor"),
    [
        (LLAVA_NEXT, (), ("size", "crop_size", "patch_size")),
        (LLAVA_ONEVISION, (), ("size", "num_image_tokens", "vision_aspect_ratio")),
        (INTERNVL, ("image_seq_length",), ("image_seq_length", "size")),
        (IDEFICS3, (), ("image_seq_len",)),
        (SMOLVLM, (), ("image_seq_len",)),
        (LLAMA4, (), ("size", "patch_size", "pixel_shuffle_ratio")),
    ],
    ids=lambda v: v.split("/")[1] if isinstance(v, str) else None,
)
def test_rule_derives_values_missing_from_the_processor_files_from_config_json(
    model: str, drop_config: tuple[str, ...], drop_preprocessor: tuple[str, ...]
) -> None:
    config = _without(BUILTIN_MODELS[model].config, *drop_config)
    model_type = config["model_type"]
    preprocessor = _without(_preprocessor(model), *drop_preprocessor)
    rule = VISION_RULES[model_type](model_type, config, preprocessor)
    assert PixelLimited(rule) == load_profile(model).vision


@pytest.mark.parametrize(
    ("model", "changes", "message"),
    [
        (LLAVA_NEXT, {"image_grid_pinpoints": None}, "image_grid_pinpoints"),
        (IDEFICS3, {"size": {}}, "longest_edge"),
        (LLAMA4, {"size": {"height": 336, "width": 448}}, "square"),
    ],
    ids=lambda v: v.split("/")[1] if isinstance(v, str) and "/" in v else None,
)
def test_rule_refuses_processor_files_it_cannot_price(
    model: str, changes: dict[str, Any], message: str
) -> None:
    config = _without(BUILTIN_MODELS[model].config, *changes)
    model_type = config["model_type"]
    with pytest.raises(ValueError, match=message):
        VISION_RULES[model_type](model_type, config, _preprocessor(model) | changes)


def _hybrid_profile() -> Any:
    """Qwen2.5-VL's vision rule over Qwen3.5-27B's language model: the KV side of a Qwen3.5
    profile, whatever rule prices its images."""
    return replace(load_profile(QWEN), kv=hybrid_geometry(QWEN3_5_27B))


@pytest.mark.parametrize(
    ("overrides", "expected"),
    [
        (ProfileOverrides(), (2, None, True, 64)),
        (ProfileOverrides(mamba_cache_dtype="float32"), (4, None, True, 64)),
        (ProfileOverrides(mamba_ssm_cache_dtype="bfloat16"), (2, 2, True, 64)),
        (ProfileOverrides(prefix_caching=False), (2, None, False, 64)),
        (ProfileOverrides(gdn_prefill_backend="triton"), (2, None, True, None)),
    ],
    ids=["defaults", "mamba-cache-dtype", "ssm-dtype", "no-prefix-caching", "triton-gdn"],
)
def test_vllms_recurrent_state_flags_reach_the_kv_geometry(
    overrides: ProfileOverrides, expected: tuple[Any, ...]
) -> None:
    kv = _hybrid_profile().with_overrides(overrides).kv
    got = (
        kv.conv_state_dtype_bytes,
        kv.ssm_state_dtype_bytes,
        kv.prefix_caching,
        kv.prefill_checkpoint_tokens,
    )
    assert got == expected


def test_a_model_without_gated_deltanet_layers_exports_no_prefill_checkpoints() -> None:
    nemotron = replace(load_profile(QWEN), kv=hybrid_geometry(NEMOTRON_NANO_9B_V2))
    assert nemotron.with_overrides(ProfileOverrides()).kv.prefill_checkpoint_tokens is None
    assert load_profile(QWEN).kv.prefill_checkpoint_tokens is None


def test_an_unknown_mamba_cache_dtype_is_a_configuration_error() -> None:
    with pytest.raises(ConfigurationError, match="Mamba cache dtype"):
        _hybrid_profile().with_overrides(ProfileOverrides(mamba_cache_dtype="fp8"))
