"""Qwen2.5-VL and Qwen3-VL model directories with the real tokenizer and templates, no weights.

vLLM's ``launch render`` reads a model directory's ``config.json``, processor configs,
tokenizer files and chat template; it never loads weights. So a directory made of

* ``config.json`` / ``preprocessor_config.json`` of a built-in checkpoint (the sidecar's own
  copies, ``sidecar.profiles.builtins``), plus the fields vLLM needs to pick the model class
  (``architectures``) and the multimodal token ids of the real checkpoint;
* Qwen2's real ``tokenizer.json`` (``tests.support.qwen_tokenizer``), with Qwen3's four extra
  added tokens for Qwen3-VL (``<tool_response>``, ``</tool_response>``, ``<think>``,
  ``</think>`` at ids 151665-151668, not special, as in the Qwen3-VL checkpoints);
* the family's real chat template,

renders every request exactly as the published checkpoint would: same vocabulary, same
template, same vision geometry. ``ensure_model(name)`` writes ``.tools/renderer-models/<name>``
once (about 2 s) and rewrites it when this file or a template changes. The renderer tier
serves them with vLLM; the unit tests and ``bench/text_estimate.py`` count with them.
"""

from __future__ import annotations

import hashlib
import json
import shutil
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from sidecar.profiles.builtins import BUILTIN_MODELS
from tests.support.paths import DATA, ROOT
from tests.support.qwen_tokenizer import ADDED_TOKENS, FIRST_ADDED_ID, qwen_tokenizer_json

MODELS_DIR = ROOT / ".tools" / "renderer-models"
QWEN3_EXTRA_TOKENS = ("<tool_response>", "</tool_response>", "<think>", "</think>")
# The multimodal token ids of every Qwen2-VL / Qwen2.5-VL / Qwen3-VL checkpoint.
_TOKEN_IDS = {
    "image_token_id": 151655,
    "video_token_id": 151656,
    "vision_start_token_id": 151652,
    "vision_end_token_id": 151653,
}


@dataclass(frozen=True)
class RenderModel:
    """One model directory: the built-in checkpoint it copies and its template."""

    name: str
    builtin: str
    architecture: str
    processor_class: str
    template: Path
    qwen3_tokens: bool


MODELS = {
    model.name: model
    for model in (
        RenderModel(
            "qwen2.5-vl-7b",
            "Qwen/Qwen2.5-VL-7B-Instruct",
            "Qwen2_5_VLForConditionalGeneration",
            "Qwen2_5_VLProcessor",
            DATA / "qwen2_vl_chat_template.jinja",
            qwen3_tokens=False,
        ),
        RenderModel(
            "qwen3-vl-8b",
            "Qwen/Qwen3-VL-8B-Instruct",
            "Qwen3VLForConditionalGeneration",
            "Qwen3VLProcessor",
            ROOT / "tests" / "real_vllm" / "qwen3_vl_chat_template.jinja",
            qwen3_tokens=True,
        ),
    )
}


def ensure_model(name: str) -> Path:
    """The model directory for ``name``, written unless an identical one is there."""
    model = MODELS[name]
    directory = MODELS_DIR / name
    digest = _digest(model)
    stamp = directory / ".recipe"
    if stamp.is_file() and stamp.read_text() == digest:
        return directory
    shutil.rmtree(directory, ignore_errors=True)
    _write(model, directory)
    stamp.write_text(digest)
    return directory


def _digest(model: RenderModel) -> str:
    blob = Path(__file__).read_text() + model.template.read_text() + repr(model)
    return hashlib.sha256(blob.encode()).hexdigest()[:16]


def _write(model: RenderModel, directory: Path) -> None:
    entry = BUILTIN_MODELS[model.builtin]
    directory.mkdir(parents=True, exist_ok=True)
    config: dict[str, Any] = {**entry.config, "architectures": [model.architecture], **_TOKEN_IDS}
    _dump(directory / "config.json", config)
    _dump(
        directory / "preprocessor_config.json",
        {**entry.preprocessor, "processor_class": model.processor_class},
    )
    if entry.video_preprocessor is not None:
        _dump(
            directory / "video_preprocessor_config.json",
            {**entry.video_preprocessor, "processor_class": model.processor_class},
        )
    qwen_tokenizer_json(directory)
    if model.qwen3_tokens:
        _add_qwen3_tokens(directory)
    shutil.copyfile(model.template, directory / "chat_template.jinja")


def _add_qwen3_tokens(directory: Path) -> None:
    """Qwen3's added tokens after Qwen2's, in both tokenizer files."""
    first = FIRST_ADDED_ID + len(ADDED_TOKENS)
    entries = [
        {"id": first + i, "content": content, "single_word": False, "lstrip": False,
         "rstrip": False, "normalized": False, "special": False}
        for i, content in enumerate(QWEN3_EXTRA_TOKENS)
    ]  # fmt: skip
    tokenizer_path = directory / "tokenizer.json"
    document = json.loads(tokenizer_path.read_text(encoding="utf-8"))
    document["added_tokens"].extend(entries)
    tokenizer_path.write_text(json.dumps(document, ensure_ascii=False), encoding="utf-8")
    config_path = directory / "tokenizer_config.json"
    config = json.loads(config_path.read_text(encoding="utf-8"))
    for entry in entries:
        config["added_tokens_decoder"][str(entry["id"])] = {
            key: value for key, value in entry.items() if key != "id"
        }
    _dump(config_path, config)


def _dump(path: Path, value: Any) -> None:
    path.write_text(json.dumps(value, indent=1), encoding="utf-8")


if __name__ == "__main__":
    for each in MODELS:
        print(ensure_model(each))
