"""The per-request cost of exact text tokens: a chat template rendered and tokenized.

Builds a Qwen2.5-VL model directory in a temporary folder (the shipped config values, a
small byte-level BPE tokenizer trained here with Qwen-VL's special tokens, and the Qwen2-VL
chat template the tests use), then times ``PromptCounter.chat_prompt_tokens`` on a short
chat with one image and on a 40-turn conversation. Imported by ``bench/proxy.py``.
"""

from __future__ import annotations

import json
import sys
import tempfile
import timeit
from pathlib import Path
from typing import Any

from sidecar.text.chat_request import from_chat_body
from sidecar.text.text_tokens import PromptCounter

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))  # run as a script: tests/support
from tests.support.model_dirs import write_config_files, write_qwen_tokenizer

QWEN = "Qwen/Qwen2.5-VL-7B-Instruct"
SENTENCE = "Describe what you see in the picture, then list every object and its colour. "


def _model_dir(directory: Path) -> Path:
    write_config_files(directory, QWEN)
    corpus = [SENTENCE * 4, "You are a helpful assistant."] * 200
    return write_qwen_tokenizer(directory, corpus, vocab_size=2000)


def _unique(seed: int, sentences: int) -> str:
    """Text that differs from turn to turn, as a real conversation does."""
    words = SENTENCE.split()
    return " ".join(f"{words[(seed + i) % len(words)]}{seed}" for i in range(12 * sentences))


def _chat(turns: int) -> dict[str, Any]:
    messages: list[dict[str, Any]] = [{"role": "system", "content": "You are a helpful assistant."}]
    for turn in range(turns):
        content: list[dict[str, Any]] = [{"type": "text", "text": _unique(turn, 3)}]
        if turn == 0:
            content.insert(0, {"type": "image_url", "image_url": {"url": "<image 0>"}})
        messages.append({"role": "user", "content": content})
        if turn < turns - 1:
            messages.append({"role": "assistant", "content": _unique(turns + turn, 2)})
    return {"model": QWEN, "messages": messages}


def exact_token_costs() -> list[tuple[str, float]]:
    """Microseconds per call of exact prompt counting: cold, and a chat's next turn."""
    rows = []
    with tempfile.TemporaryDirectory() as folder:
        counter = PromptCounter.from_model_dir(_model_dir(Path(folder)), "qwen2_5_vl")
        if counter is None:
            raise RuntimeError("the benchmark model directory did not give a PromptCounter")
        images = [1_222]  # the image's own tokens; its two wrappers are in the template
        calls = 100
        for label, turns in (("1 turn + 1 image", 1), ("40 turns + 1 image", 40)):
            body = _chat(turns)
            characters = len(json.dumps(body))

            def cold(b: dict[str, Any] = body) -> None:
                counter.segment_tokens.cache_clear()  # type: ignore[attr-defined]
                counter.chat_prompt_tokens(from_chat_body(b), images, add_special_tokens=False)

            seconds = min(timeit.repeat(cold, number=calls, repeat=3))
            rows.append(
                (f"exact text tokens, cold ({label}, {characters:,} chars)", seconds / calls * 1e6)
            )
        history = _chat(40)
        counter.chat_prompt_tokens(from_chat_body(history), images, add_special_tokens=False)
        turn = iter(range(10**9))

        def next_turn() -> None:
            text = _unique(1000 + next(turn), 3)
            messages = [*history["messages"], {"role": "user", "content": text}]
            request = from_chat_body({**history, "messages": messages})
            counter.chat_prompt_tokens(request, images, add_special_tokens=False)

        seconds = min(timeit.repeat(next_turn, number=calls, repeat=3))
        rows.append(
            (
                "exact text tokens, the 41st turn of that chat (history memoised)",
                seconds / calls * 1e6,
            )
        )
    return rows
