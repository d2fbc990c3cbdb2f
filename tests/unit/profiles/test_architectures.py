"""profiles.architectures: dispatch by ``architectures`` as vLLM 0.33's registry does, aliases
read from their own config nesting, and clear start-up errors for what no rule prices."""

from __future__ import annotations

import ast
import json
from pathlib import Path
from typing import Any

import pytest

from sidecar.errors import ConfigurationError
from sidecar.profiles import VIDEO_RULES, VISION_RULES, load_profile
from sidecar.profiles.architectures import (
    ARCHITECTURES,
    NO_IMAGE_ARCHITECTURES,
    Support,
    find_architecture,
    resolve_architecture,
    supported_models_markdown,
)
from sidecar.vision import PixelLimited
from sidecar.vision.qwen import QwenSmartResizeRule
from tests.real_vllm.renderer import VLLM_RENDER

QWEN3_PREPROCESSOR = {
    "image_processor_type": "Qwen2VLImageProcessorFast",
    "size": {"shortest_edge": 65536, "longest_edge": 16777216},
    "patch_size": 16,
    "temporal_patch_size": 2,
    "merge_size": 2,
}


def _text(model_type: str, **extra: Any) -> dict[str, Any]:
    return {
        "model_type": model_type,
        "hidden_size": 1024,
        "num_hidden_layers": 4,
        "num_attention_heads": 8,
        "num_key_value_heads": 2,
        "head_dim": 128,
        "max_position_embeddings": 32768,
        **extra,
    }


def _model_dir(
    tmp_path: Path, config: dict[str, Any], preprocessor: dict[str, Any] | None = None
) -> str:
    (tmp_path / "config.json").write_text(json.dumps(config))
    if preprocessor is not None:
        (tmp_path / "preprocessor_config.json").write_text(json.dumps(preprocessor))
    return str(tmp_path)


def _qwen3_5_config(architecture: str, model_type: str) -> dict[str, Any]:
    """A Qwen3.5 config.json's shape: text_config with hybrid layer_types, vision_config."""
    return {
        "architectures": [architecture],
        "model_type": model_type,
        "text_config": _text(
            f"{model_type}_text",
            layer_types=["linear_attention"] * 3 + ["full_attention"],
            dtype="bfloat16",
        ),
        "vision_config": {"patch_size": 16, "spatial_merge_size": 2, "out_hidden_size": 1024},
    }


@pytest.mark.parametrize(
    ("architecture", "model_type"),
    [
        ("Qwen3_5ForConditionalGeneration", "qwen3_5"),
        ("Qwen3_5MoeForConditionalGeneration", "qwen3_5_moe"),
    ],
)
def test_a_qwen3_5_directory_starts_and_prices_images_with_the_qwen3_vl_rule(
    architecture: str, model_type: str, tmp_path: Path
) -> None:
    directory = _model_dir(tmp_path, _qwen3_5_config(architecture, model_type), QWEN3_PREPROCESSOR)
    profile = load_profile(directory)
    assert profile.architecture.name == architecture
    assert profile.model_type == model_type
    assert profile.vision == PixelLimited(
        QwenSmartResizeRule.from_configs("qwen3_vl", {}, QWEN3_PREPROCESSOR)
    )
    # 1024 x 768 is already a multiple of 32 px (patch 16 x merge 2): 32 x 24 tokens.
    assert profile.vision.image_tokens(1024, 768).tokens == 32 * 24
    assert profile.video is not None  # Qwen3-VL's video processor, as vLLM's Info inherits it
    assert profile.architecture.prompt_family == "qwen3_vl"  # exact text counting applies


def test_architectures_decide_before_model_type(tmp_path: Path) -> None:
    config = _qwen3_5_config("Qwen3_5ForConditionalGeneration", "qwen3_5")
    config["architectures"] = ["SomethingUnregistered", "Qwen3_5ForConditionalGeneration"]
    config["model_type"] = "llava"  # would pick LLaVA's rule if model_type decided
    profile = load_profile(_model_dir(tmp_path, config, QWEN3_PREPROCESSOR))
    assert profile.architecture.name == "Qwen3_5ForConditionalGeneration"
    assert (
        find_architecture({"model_type": "qwen3_5"})
        is ARCHITECTURES["Qwen3_5ForConditionalGeneration"]
    )


def test_a_config_naming_only_unknown_architectures_is_not_read_by_its_model_type(
    tmp_path: Path,
) -> None:
    # The original LLaVA repositories say model_type llava; vLLM serves no LlavaLlamaForCausalLM.
    config = _qwen3_5_config("LlavaLlamaForCausalLM", "llava")
    with pytest.raises(ConfigurationError, match=r"LlavaLlamaForCausalLM.*not an image arch"):
        load_profile(_model_dir(tmp_path, config, QWEN3_PREPROCESSOR))


@pytest.mark.parametrize(
    ("architecture", "version"),
    [
        ("MllamaForConditionalGeneration", "0.10.2"),
        ("AyaVisionForConditionalGeneration", "0.24.0"),
    ],
)
def test_an_architecture_vllm_dropped_stops_start_up_naming_the_last_version(
    architecture: str, version: str, tmp_path: Path
) -> None:
    directory = _model_dir(tmp_path, {"architectures": [architecture], "model_type": "x"})
    with pytest.raises(ConfigurationError, match=rf"{architecture}.*until v{version}"):
        load_profile(directory)


def test_llama_3_2_vision_is_no_built_in_profile_any_more() -> None:
    with pytest.raises(ConfigurationError, match="unknown model"):
        load_profile("meta-llama/Llama-3.2-11B-Vision-Instruct")
    with pytest.raises(ConfigurationError, match=r"until v0\.10\.2"):
        resolve_architecture("m", {"model_type": "mllama"})  # an old config, no architectures


def test_an_architecture_without_a_rule_names_itself_and_the_engine_pricing(
    tmp_path: Path,
) -> None:
    config = {"architectures": ["KimiK3ForConditionalGeneration"], "model_type": "kimi_k3"}
    with pytest.raises(
        ConfigurationError, match=r"KimiK3ForConditionalGeneration.*SIDECAR_PRICING=engine"
    ):
        load_profile(_model_dir(tmp_path, config))


def test_an_architecture_that_takes_no_images_is_not_mistaken_for_one(tmp_path: Path) -> None:
    config = {"architectures": ["WhisperForConditionalGeneration"], "model_type": "whisper"}
    with pytest.raises(ConfigurationError, match=r"Whisper.*takes no images"):
        load_profile(_model_dir(tmp_path, config))
    bert = {"architectures": ["BertModel"], "model_type": "bert"}
    with pytest.raises(ConfigurationError, match=r"BertModel.*not an image architecture"):
        load_profile(_model_dir(tmp_path, bert))


def test_qwen_omni_reads_its_vision_and_text_config_under_thinker_config(tmp_path: Path) -> None:
    thinker = {
        "model_type": "qwen2_5_omni_thinker",
        "text_config": _text("qwen2_5_omni_text"),
        "vision_config": {"patch_size": 14, "spatial_merge_size": 2, "out_hidden_size": 1024},
    }
    config = {
        "architectures": ["Qwen2_5OmniForConditionalGeneration"],
        "model_type": "qwen2_5_omni",
        "thinker_config": thinker,
    }
    preprocessor = {"min_pixels": 3136, "max_pixels": 12845056, "patch_size": 14, "merge_size": 2}
    profile = load_profile(_model_dir(tmp_path, config, preprocessor))
    assert profile.vision.image_tokens(280, 280).tokens == 10 * 10  # 28 px a token
    assert profile.kv.layer_groups[0].num_layers == 4  # thinker_config.text_config's layers
    assert profile.video is None  # its videos interleave audio: not the Qwen2.5-VL video rule


def test_a_config_missing_its_nested_model_config_is_refused_clearly(tmp_path: Path) -> None:
    config = {"architectures": ["Qwen3OmniMoeForConditionalGeneration"], "model_type": "x"}
    with pytest.raises(ConfigurationError, match="thinker_config"):
        load_profile(_model_dir(tmp_path, config, {"min_pixels": 1, "max_pixels": 2}))


def test_lightonocr_counts_rows_times_columns_fitted_into_the_vision_image_size(
    tmp_path: Path,
) -> None:
    config = {
        "architectures": ["LightOnOCRForConditionalGeneration"],
        "model_type": "mistral3",
        "spatial_merge_size": 2,
        "text_config": _text("qwen3"),
        "vision_config": {"model_type": "pixtral", "image_size": 1540, "patch_size": 14},
    }
    profile = load_profile(_model_dir(tmp_path, config, {"size": {"longest_edge": 1000}}))
    # vision_config.image_size (1540), not the processor's longest_edge, bounds the grid.
    assert profile.vision.image_tokens(1540, 1540).tokens == 55 * 55
    assert profile.vision.image_tokens(3080, 280).tokens == 55 * 5  # halved to 1540 x 140


def test_every_rule_entry_names_a_rule_the_sidecar_has() -> None:
    for entry in ARCHITECTURES.values():
        if entry.support is Support.RULE:
            assert entry.rule in VISION_RULES, entry.name
            assert entry.video_rule is None or entry.video_rule in VIDEO_RULES, entry.name
        else:
            assert entry.rule is None, entry.name
        assert (entry.support is Support.NOT_SERVED) == (entry.dropped_after is not None)
    model_types = [t for entry in ARCHITECTURES.values() for t in entry.model_types]
    assert len(model_types) == len(set(model_types))


def test_every_engine_priced_architecture_says_why() -> None:
    # The user reads the note in docs/supported-models.md to learn why the sidecar asks vLLM.
    silent = [
        entry.name
        for entry in ARCHITECTURES.values()
        if entry.support is Support.NEEDS_ENGINE and not entry.note.strip()
    ]
    assert not silent


def _registry_tables() -> dict[str, Any]:
    files = sorted(VLLM_RENDER.glob("lib/python3*/site-packages/vllm/model_executor/models/"))
    if not files:
        pytest.skip("vLLM 0.33 is not installed in .tools/vllm-render (make test-renderer)")
    tree = ast.parse((files[0] / "registry.py").read_text(encoding="utf-8"))
    tables: dict[str, Any] = {}
    for node in tree.body:
        if isinstance(node, ast.Assign) and isinstance(node.targets[0], ast.Name):
            name = node.targets[0].id
            if name in {"_MULTIMODAL_MODELS", "_PREVIOUSLY_SUPPORTED_MODELS"}:
                tables[name] = ast.literal_eval(node.value)
    return tables


def test_the_table_follows_vllm_0_33s_registry() -> None:
    tables = _registry_tables()
    served, dropped = tables["_MULTIMODAL_MODELS"], tables["_PREVIOUSLY_SUPPORTED_MODELS"]
    for entry in ARCHITECTURES.values():
        if entry.support is Support.NOT_SERVED:
            assert dropped.get(entry.name) == entry.dropped_after, entry.name
        else:
            assert served[entry.name][0] == entry.vllm_module, entry.name
    assert set(served) == {
        name for name, e in ARCHITECTURES.items() if e.support is not Support.NOT_SERVED
    } | set(NO_IMAGE_ARCHITECTURES)


def test_the_supported_models_page_holds_the_table_in_code() -> None:
    page = (Path(__file__).parents[3] / "docs" / "supported-models.md").read_text()
    begin = page.index("<!-- architectures table: generated by")
    start = page.index("\n", begin) + 1
    end = page.index("<!-- end of the architectures table -->")
    assert page[start:end] == supported_models_markdown(), (
        "regenerate docs/supported-models.md's table from "
        "sidecar.profiles.architectures.supported_models_markdown()"
    )


QWEN3_5_BUILTINS = {
    "Qwen/Qwen3.5-9B": ("Qwen3_5ForConditionalGeneration", 32),
    "Qwen/Qwen3.5-27B": ("Qwen3_5ForConditionalGeneration", 64),
    "Qwen/Qwen3.5-35B-A3B": ("Qwen3_5MoeForConditionalGeneration", 40),
    "Qwen/Qwen3.6-35B-A3B": ("Qwen3_5MoeForConditionalGeneration", 40),
    "Qwen/Qwen3.5-397B-A17B": ("Qwen3_5MoeForConditionalGeneration", 60),
}


@pytest.mark.parametrize("name", sorted(QWEN3_5_BUILTINS), ids=lambda n: n.split("/")[1])
def test_qwen3_5_builtins_price_as_their_model_directories_do(name: str, tmp_path: Path) -> None:
    from sidecar.profiles.builtins import BUILTIN_MODELS

    entry = BUILTIN_MODELS[name]
    architecture, layers = QWEN3_5_BUILTINS[name]
    builtin = load_profile(name)
    directory = _model_dir(tmp_path, entry.config, entry.preprocessor)
    assert builtin.architecture.name == architecture
    assert (load_profile(directory).vision, load_profile(directory).kv) == (
        builtin.vision,
        builtin.kv,
    )
    layer_types = entry.config["text_config"]["layer_types"]
    assert len(layer_types) == layers
    assert layer_types[3::4] == ["full_attention"] * (layers // 4)  # every 4th is full
    assert builtin.vision.image_tokens(1024, 768).tokens == 32 * 24  # Qwen3-VL's 32 px cells
    assert builtin.max_position_embeddings == 262_144


def test_the_dots_ocr_builtin_is_qwen2_vls_rule_over_a_flat_config(tmp_path: Path) -> None:
    from sidecar.profiles.builtins import BUILTIN_MODELS

    entry = BUILTIN_MODELS["rednote-hilab/dots.ocr"]
    builtin = load_profile("rednote-hilab/dots.ocr")
    from_directory = load_profile(_model_dir(tmp_path, entry.config, entry.preprocessor))
    assert (from_directory.vision, from_directory.kv) == (builtin.vision, builtin.kv)
    assert builtin.architecture.name == "DotsOCRForCausalLM"
    assert builtin.vision.image_tokens(1024, 768).tokens == 37 * 27  # vLLM 0.33 counts 999
    assert builtin.vision.max_image_tokens().tokens == 14_400  # 11,289,600 px / 784
    assert builtin.kv.bytes_per_token == 28 * 2 * 2 * 128 * 2  # flat config, 2 KV heads
    assert builtin.architecture.prompt_family is None  # its <|imgpad|> is not Qwen's counter


def test_the_glm_4_5v_builtin_is_glm_4_1vs_rule_over_its_moe_tower(tmp_path: Path) -> None:
    from sidecar.profiles.builtins import BUILTIN_MODELS

    entry = BUILTIN_MODELS["zai-org/GLM-4.5V"]
    builtin = load_profile("zai-org/GLM-4.5V")
    from_directory = load_profile(_model_dir(tmp_path, entry.config, entry.preprocessor))
    assert (from_directory.vision, from_directory.kv) == (builtin.vision, builtin.kv)
    assert builtin.architecture.name == "Glm4vMoeForConditionalGeneration"
    assert builtin.vision == load_profile("zai-org/GLM-4.1V-9B-Thinking").vision
    assert builtin.vision.image_tokens(1024, 768).tokens == 999  # vLLM 0.33's count
    assert builtin.kv.bytes_per_token == 46 * 2 * 8 * 128 * 2


def test_alpamayo2_super_lifts_vlm_configs_towers_beside_its_own_fields() -> None:
    # As vLLM's Alpamayo2SuperConfig: the nested towers win, the top level's token ids win.
    config = {
        "architectures": ["Alpamayo2Super"],
        "min_pixels": 1,
        "image_token_id": 7,
        "vision_config": {"patch_size": 14},
        "vlm_config": {
            "image_token_id": 9,
            "video_token_id": 10,
            "vision_config": {"patch_size": 16},
            "text_config": {"hidden_size": 64},
        },
    }
    lifted = ARCHITECTURES["Alpamayo2Super"].model_config(config)
    assert lifted["vision_config"] == {"patch_size": 16}
    assert lifted["text_config"] == {"hidden_size": 64}
    assert (lifted["image_token_id"], lifted["video_token_id"], lifted["min_pixels"]) == (7, 10, 1)
    with pytest.raises(ConfigurationError, match="'vlm_config' must be an object"):
        ARCHITECTURES["Alpamayo2Super"].model_config({"vlm_config": [1]})
