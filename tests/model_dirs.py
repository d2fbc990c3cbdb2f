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

QWEN_SPECIAL_TOKENS = (
    "<|endoftext|>", "<|im_start|>", "<|im_end|>", "<|vision_start|>", "<|vision_end|>",
    "<|image_pad|>", "<|video_pad|>",
)  # fmt: skip
QWEN2_VL_CHAT_TEMPLATE = (
    Path(__file__).parent / "data" / "qwen2_vl_chat_template.jinja"
).read_text()


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
