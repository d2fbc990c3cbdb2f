"""Model profiles: built-ins, model directories, overrides and start-up errors."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from sidecar.errors import ConfigurationError
from sidecar.profiles import ProfileOverrides, builtin_model_names, load_profile
from sidecar.profiles.builtins import BUILTIN_MODELS
from sidecar.profiles.kv_geometry import AttentionKind

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
        ({"config.json": json.dumps({"model_type": "bert"})}, "does not support"),
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
