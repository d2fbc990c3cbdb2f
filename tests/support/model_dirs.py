"""Model directories made on the spot: shipped config values, a tokenizer trained here.

Exact prompt counting needs a model directory with ``tokenizer.json`` and a chat template.
The real Qwen tokenizers cannot be downloaded here, so a small byte-level BPE tokenizer is
trained locally with Qwen-VL's special tokens; counts are then compared with transformers'
own processors using that same tokenizer. Shared by the tests and ``bench/exact_tokens.py``.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from pathlib import Path

from tokenizers import Tokenizer, decoders, models, pre_tokenizers, trainers

from sidecar.profiles.builtins import BUILTIN_MODELS
from tests.support.paths import DATA

QWEN_SPECIAL_TOKENS = (
    "<|endoftext|>", "<|im_start|>", "<|im_end|>", "<|vision_start|>", "<|vision_end|>",
    "<|image_pad|>", "<|video_pad|>",
)  # fmt: skip
QWEN2_VL_CHAT_TEMPLATE = (DATA / "qwen2_vl_chat_template.jinja").read_text()
QWEN25_VL_7B = "Qwen/Qwen2.5-VL-7B-Instruct"
CHAT_CORPUS = (
    "You are a helpful assistant.",
    "What is in this picture? Describe the image in detail, please.",
    "Compare the two photos and list every difference you can find.",
    "system user assistant",
)


def write_config_files(directory: Path, model: str) -> Path:
    """``config.json`` and ``preprocessor_config.json`` of a built-in checkpoint."""
    entry = BUILTIN_MODELS[model]
    directory.mkdir(parents=True, exist_ok=True)
    (directory / "config.json").write_text(json.dumps(entry.config))
    (directory / "preprocessor_config.json").write_text(json.dumps(entry.preprocessor))
    return directory


def write_qwen_tokenizer(directory: Path, corpus: Sequence[str], *, vocab_size: int) -> Path:
    """A byte-level BPE ``tokenizer.json`` trained on ``corpus``, and the Qwen chat template."""
    tokenizer = Tokenizer(models.BPE())
    tokenizer.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False)
    tokenizer.decoder = decoders.ByteLevel()
    trainer = trainers.BpeTrainer(
        vocab_size=vocab_size,
        special_tokens=list(QWEN_SPECIAL_TOKENS),
        initial_alphabet=pre_tokenizers.ByteLevel.alphabet(),
    )
    tokenizer.train_from_iterator(corpus, trainer)
    tokenizer.save(str(directory / "tokenizer.json"))
    (directory / "chat_template.jinja").write_text(QWEN2_VL_CHAT_TEMPLATE)
    return directory


def write_qwen25_model_dir(directory: Path) -> Path:
    """A Qwen2.5-VL-7B model directory: shipped configs, a tokenizer trained on ``CHAT_CORPUS``,
    the chat template, and ``tokenizer_config.json`` naming the special tokens."""
    write_config_files(directory, QWEN25_VL_7B)
    write_qwen_tokenizer(directory, list(CHAT_CORPUS) * 20, vocab_size=500)
    config = {"eos_token": "<|im_end|>", "pad_token": "<|endoftext|>"}
    (directory / "tokenizer_config.json").write_text(json.dumps(config))
    return directory
