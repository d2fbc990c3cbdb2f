"""The text estimate against the truth: never below it, and by how much above.

Without a tokenizer the sidecar estimates text tokens (``sidecar/text/text_estimate.py``).
This benchmark builds a seeded mixed corpus of requests: English prose and Python code (the
standard library's docstrings and sources, so every run of one Python sees the same text),
digit tables, Chinese, Japanese and Korean, emoji, mixed scripts, multi-turn chats, tool
definitions, tool calls and tool results, on chat, completions, Responses and Anthropic
bodies. It counts each exactly with the real Qwen2 tokenizer and each family's real template
(the sidecar's exact path, which the renderer tier holds equal to vLLM 0.33), prices the same
request with a built-in profile, which has no tokenizer, asserts that no estimate is below the
truth and reports the overestimate per kind of text.

    .venv/bin/python bench/text_estimate.py [--requests-per-kind 40] [--seed N]
"""

from __future__ import annotations

import argparse
import asyncio
import importlib
import inspect
import json
import random
import statistics
import sys
from collections import defaultdict
from collections.abc import Callable
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))  # run as a script: tests/ is importable

from sidecar.body.request_body import parse_request_body  # noqa: E402
from sidecar.cost.assembly import PricingPolicy  # noqa: E402
from sidecar.cost.pricer import Pricer  # noqa: E402
from sidecar.profiles import load_profile  # noqa: E402
from sidecar.routes import Route  # noqa: E402
from sidecar.text.text_tokens import PromptCounter  # noqa: E402
from tests.real_vllm.cases import data_uri  # noqa: E402
from tests.support.qwen_models import ensure_model  # noqa: E402

MODELS = {
    "qwen2.5-vl-7b": "Qwen/Qwen2.5-VL-7B-Instruct",
    "qwen3-vl-8b": "Qwen/Qwen3-VL-8B-Instruct",
}
PNG = data_uri(64, 64)
CJK = [
    "人工智能是计算机科学的一个分支，它企图了解智能的实质。",  # noqa: RUF001
    "请仔细描述这张图片中的所有物体、颜色和文字。",
    "吾輩は猫である。名前はまだ無い。どこで生れたかとんと見当がつかぬ。",
    "この画像に写っているものを詳しく説明してください。",
    "대한민국은 민주공화국이다. 모든 권력은 국민으로부터 나온다.",
    "이 사진에 무엇이 있는지 자세히 설명해 주세요.",
]
EMOJI = ["🚀", "🔥", "😀", "👍", "🎉", "❤️", "🤖", "📷", "🌈", "👨‍👩‍👧", "🏳️‍🌈",
         "👩🏽‍💻", "✅", "🙏🏻"]  # fmt: skip
SCRIPTS = [
    "Съешь же ещё этих мягких французских булок, да выпей чаю.",
    "مرحبا بك في عالم الذكاء الاصطناعي، حيث تتعلم الآلات من البيانات.",
    "कृत्रिम बुद्धिमत्ता कंप्यूटर विज्ञान की एक शाखा है।",
    "Η ελληνική γλώσσα είναι μία από τις αρχαιότερες γλώσσες της Ευρώπης.",  # noqa: RUF001
    "Tiếng Việt là ngôn ngữ chính thức của Việt Nam.",
    "ปัญญาประดิษฐ์เป็นสาขาหนึ่งของวิทยาการคอมพิวเตอร์",
]
TOOL = {"type": "function", "function": {"name": "get_weather", "description":
    "Current weather for a city, in Celsius or Fahrenheit.", "parameters": {"type": "object",
    "properties": {"city": {"type": "string"}, "unit": {"type": "string", "enum": ["c", "f"]}},
    "required": ["city"]}}}  # fmt: skip


# The standard library's own prose and code: the same text on every run of one Python.
STDLIB = ("argparse", "asyncio.events", "collections", "dataclasses", "email.message",
          "functools", "http.server", "json.decoder", "logging", "pathlib", "subprocess",
          "textwrap", "typing", "unittest.case", "urllib.parse", "zipfile")  # fmt: skip


class Texts:
    """Seeded text of each kind; English and code come from the standard library."""

    def __init__(self, rng: random.Random) -> None:
        self.rng = rng
        modules = [importlib.import_module(name) for name in STDLIB]
        self.code = [inspect.getsource(module) for module in modules]
        docs = [inspect.getdoc(item) or "" for module in modules for item in vars(module).values()
                if inspect.isclass(item) or inspect.isfunction(item)]  # fmt: skip
        paragraphs = (p.strip() for doc in docs for p in doc.split("\n\n"))
        self.prose = sorted({p for p in paragraphs if len(p) > 200 and ">>>" not in p})

    def english(self) -> str:
        return self.rng.choice(self.prose)

    def code_snippet(self) -> str:
        source = self.rng.choice(self.code)
        start = self.rng.randrange(max(1, len(source) - 1500))
        return "Explain this code:\n" + source[start : start + self.rng.randint(200, 1500)]

    def digits(self) -> str:
        rows = [", ".join(str(self.rng.randint(0, 10**self.rng.randint(1, 9))) for _ in range(6))
                for _ in range(self.rng.randint(2, 20))]  # fmt: skip
        return "Sum each row:\n" + "\n".join(rows)

    def cjk(self) -> str:
        return "".join(self.rng.choice(CJK) for _ in range(self.rng.randint(1, 12)))

    def emoji(self) -> str:
        words = [self.rng.choice(EMOJI) if self.rng.random() < 0.5 else "ok" for _ in range(40)]
        return " ".join(words[: self.rng.randint(3, 40)])

    def mixed(self) -> str:
        parts = [self.rng.choice(SCRIPTS), self.cjk(), self.english()[:200], self.emoji()]
        self.rng.shuffle(parts)
        return " ".join(parts)

    def any(self) -> str:
        kinds: list[Callable[[], str]] = [self.english, self.code_snippet, self.digits,
                                          self.cjk, self.emoji, self.mixed]  # fmt: skip
        return self.rng.choice(kinds)()


def chat_body(text: str) -> dict[str, Any]:
    return {"model": "m", "messages": [{"role": "user", "content": text}]}


def multi_turn(texts: Texts) -> dict[str, Any]:
    messages: list[dict[str, Any]] = [{"role": "system", "content": texts.english()[:300]}]
    for turn in range(texts.rng.randint(2, 12)):
        content: Any = texts.any()
        if turn == 0 and texts.rng.random() < 0.5:
            image = {"type": "image_url", "image_url": {"url": PNG}}
            content = [image, {"type": "text", "text": content}]
        messages += [{"role": "user", "content": content},
                     {"role": "assistant", "content": texts.any()}]  # fmt: skip
    return {"model": "m", "messages": messages[:-1]}


def tools_chat(texts: Texts) -> dict[str, Any]:
    city = texts.rng.choice(["Paris", "東京", "São Paulo", "Zürich", "Reykjavík"])
    call = {
        "id": f"call_{texts.rng.getrandbits(64):016x}",
        "type": "function",
        "function": {"name": "get_weather", "arguments": json.dumps({"city": city})},
    }
    messages = [{"role": "user", "content": texts.any()},
                {"role": "assistant", "content": None, "tool_calls": [call]},
                {"role": "tool", "tool_call_id": call["id"], "content": texts.digits()},
                {"role": "user", "content": "Thanks. " + texts.any()}]  # fmt: skip
    return {"model": "m", "messages": messages, "tools": [TOOL], "tool_choice": "none"}


def responses_body(texts: Texts) -> dict[str, Any]:
    items: list[dict[str, Any]] = [
        {"role": "user", "content": [{"type": "input_text", "text": texts.any()}]}
    ]
    if texts.rng.random() < 0.5:
        items += [
            {
                "type": "function_call",
                "call_id": "c1",
                "name": "get_weather",
                "arguments": '{"city": "Oslo"}',
            },
            {"type": "function_call_output", "call_id": "c1", "output": texts.digits()},
        ]
    tools = [{"type": "function", **TOOL["function"]}] if texts.rng.random() < 0.5 else []
    return {"model": "m", "input": items, "instructions": texts.english()[:200],
            "tools": tools, "tool_choice": "none"}  # fmt: skip


def messages_body(texts: Texts) -> dict[str, Any]:
    use = {"type": "tool_use", "id": "tu1", "name": "get_weather", "input": {"city": "Rome"}}
    turns: list[dict[str, Any]] = [{"role": "user", "content": texts.any()}]
    if texts.rng.random() < 0.5:
        turns += [{"role": "assistant", "content": [{"type": "text", "text": "Checking."}, use]},
                  {"role": "user", "content": [{"type": "tool_result", "tool_use_id": "tu1",
                   "content": texts.digits()}]}]  # fmt: skip
    return {"model": "m", "max_tokens": 8, "system": texts.english()[:300], "messages": turns}


def corpus(per_kind: int, seed: int) -> list[tuple[str, Route, dict[str, Any]]]:
    texts = Texts(random.Random(seed))
    single = {"english": texts.english, "code": texts.code_snippet, "digits": texts.digits,
              "cjk": texts.cjk, "emoji": texts.emoji, "mixed": texts.mixed}  # fmt: skip
    cases = [(kind, Route.CHAT, chat_body(make())) for kind, make in single.items()
             for _ in range(per_kind)]  # fmt: skip
    for _ in range(per_kind):
        cases += [("multi-turn", Route.CHAT, multi_turn(texts)),
                  ("tools", Route.CHAT, tools_chat(texts)),
                  ("completions", Route.COMPLETIONS, {"model": "m", "prompt": texts.any()}),
                  ("responses", Route.RESPONSES, responses_body(texts)),
                  ("messages", Route.MESSAGES, messages_body(texts))]  # fmt: skip
    return cases


async def text_tokens(pricer: Pricer, route: Route, body: dict[str, Any]) -> tuple[int, bool]:
    raw = json.dumps(body).encode()
    prediction = await pricer.price(parse_request_body(raw, route), raw)
    return prediction.text_tokens, prediction.text_tokens_exact


async def measure(per_kind: int, seed: int) -> dict[str, dict[str, list[float]]]:
    """Estimate over truth, per model and kind of text."""
    ratios: dict[str, dict[str, list[float]]] = {}
    cases = corpus(per_kind, seed)
    for name, builtin in MODELS.items():
        directory = ensure_model(name)
        profile = load_profile(str(directory))
        counter = PromptCounter.from_model_dir(directory, profile.architecture.prompt_family)
        exact = Pricer(profile, PricingPolicy(), None, counter)
        estimated = Pricer(load_profile(builtin), PricingPolicy(), None, None)
        by_kind: dict[str, list[float]] = defaultdict(list)
        for kind, route, body in cases:
            truth, is_exact = await text_tokens(exact, route, body)
            guess, _ = await text_tokens(estimated, route, body)
            assert is_exact, f"{name} {kind}: the exact path fell back to the estimate"
            assert guess >= truth, f"{name} {kind}: estimate {guess} < truth {truth}: {body}"
            by_kind[kind].append(guess / truth)
        ratios[name] = dict(by_kind)
    return ratios


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--requests-per-kind", type=int, default=40)
    parser.add_argument("--seed", type=int, default=20261201)
    args = parser.parse_args()
    ratios = asyncio.run(measure(args.requests_per_kind, args.seed))
    print("| Model | Kind | Requests | Min estimate / truth | Median | Max |")
    print("|---|---|---:|---:|---:|---:|")
    for name, by_kind in ratios.items():
        every = [r for values in by_kind.values() for r in values]
        for kind, values in [*by_kind.items(), ("all", every)]:
            print(f"| {name} | {kind} | {len(values)} | {min(values):.3f}x "
                  f"| {statistics.median(values):.2f}x | {max(values):.2f}x |")  # fmt: skip
    print("No estimate was below the truth.")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
