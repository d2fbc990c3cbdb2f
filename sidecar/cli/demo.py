"""``vlm-sidecar demo``: the sidecar in front of a stand-in for vLLM, on loopback.

It starts the stand-in (clearly labelled: it is NOT vLLM, it only answers with usage),
starts the sidecar in front of it with example budgets, sends a mixed workload of
generated images, prints what the sidecar decided and why, and keeps serving until
Ctrl-C so the user can try it with curl.
"""

from __future__ import annotations

import asyncio
import base64
import io
import socket
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, TextIO

import aiohttp
import orjson
from PIL import Image

from sidecar.profiles import load_profile
from sidecar.serve.server import running_sidecar
from sidecar.settings import Settings
from sidecar.standin import StandinConfig, run_standin
from sidecar.standin.replies import counting_images_by
from sidecar.units import format_bytes

DEMO_MODEL = "Qwen/Qwen2.5-VL-7B-Instruct"
DEMO_BUDGETS: dict[str, Any] = {
    "max_images_per_request": 4,
    "max_image_tokens": 4096,
    "kv_budget_bytes": 8 * 2**30,
    "over_budget_action": "downscale",
}


def jpeg_data_uri(width: int, height: int) -> str:
    """A generated photo-like JPEG as a data URI."""
    image = Image.linear_gradient("L").resize((width, height)).convert("RGB")
    buffer = io.BytesIO()
    image.save(buffer, "JPEG", quality=85)
    return "data:image/jpeg;base64," + base64.b64encode(buffer.getvalue()).decode()


def _chat(*images: str, stream: bool = False) -> dict[str, Any]:
    parts: list[dict[str, Any]] = [{"type": "text", "text": "Describe the image."}]
    parts += [{"type": "image_url", "image_url": {"url": url}} for url in images]
    body: dict[str, Any] = {
        "model": DEMO_MODEL,
        "messages": [{"role": "user", "content": parts}],
        "max_tokens": 256,
    }
    if stream:
        body |= {"stream": True, "stream_options": {"include_usage": True}}
    return body


@dataclass(frozen=True, slots=True)
class DemoCase:
    """One request of the demo workload."""

    label: str
    body: Callable[[], dict[str, Any]]


DEMO_CASES = (
    DemoCase("4032x3024 phone photo", lambda: _chat(jpeg_data_uri(4032, 3024))),
    DemoCase("3840x2160 4K frame", lambda: _chat(jpeg_data_uri(3840, 2160))),
    DemoCase("1920x1080 frame", lambda: _chat(jpeg_data_uri(1920, 1080))),
    DemoCase("64x64 icon, streamed", lambda: _chat(jpeg_data_uri(64, 64), stream=True)),
    DemoCase("corrupt payload", lambda: _chat("data:image/png;base64,bm90IGFuIGltYWdl")),
    DemoCase("6 images", lambda: _chat(*[jpeg_data_uri(640, 480)] * 6)),
    DemoCase("remote URL", lambda: _chat("https://images.example/cat.jpg")),
)


async def send_case(session: aiohttp.ClientSession, url: str, case: DemoCase) -> dict[str, str]:
    """Send one case; the row of the result table."""
    async with session.post(f"{url}/v1/chat/completions", json=case.body()) as response:
        text = await response.text()
        headers = response.headers
        detail = ""
        if response.status >= 400:
            detail = str(orjson.loads(text)["error"]["message"])
        kv = headers.get("x-vlm-sidecar-kv-bytes")
        return {
            "request": case.label,
            "status": str(response.status),
            "decision": headers.get("x-vlm-sidecar-decision", "-"),
            "visual": headers.get("x-vlm-sidecar-visual-tokens", "-"),
            "prompt": headers.get("x-vlm-sidecar-prompt-tokens", "-"),
            "kv": format_bytes(int(kv)) if kv else "-",
            "detail": detail,
        }


def print_table(rows: list[dict[str, str]], out: TextIO) -> None:
    """The decisions, one line per request."""
    columns = ("request", "status", "decision", "visual", "prompt", "kv", "detail")
    widths = {c: max(len(c), *(len(r[c]) for r in rows)) for c in columns[:-1]}
    out.write("  ".join(f"{c:<{widths[c]}}" for c in columns[:-1]) + "  detail\n")
    for row in rows:
        out.write("  ".join(f"{row[c]:<{widths[c]}}" for c in columns[:-1]))
        out.write(f"  {row['detail']}\n")


def _port_is_free(port: int) -> bool:
    """Whether 127.0.0.1:port can be bound; the demo falls back to a free port otherwise."""
    if port == 0:
        return True
    with socket.socket() as probe:
        try:
            probe.bind(("127.0.0.1", port))
        except OSError:
            return False
    return True


async def run_demo(out: TextIO, *, port: int = 8080, metrics_port: int = 9090, once: bool) -> None:
    """Start everything, send the workload, print the table, then serve until cancelled."""
    # The stand-in counts images as the demo model's processor does, as a vLLM configured
    # like the sidecar would: the sidecar's self-check at start-up agrees with it.
    vision = load_profile(DEMO_MODEL).vision
    config = StandinConfig(
        served_model_name=DEMO_MODEL, prompt_tokens_fn=counting_images_by(vision)
    )
    async with run_standin(config) as standin:
        settings = Settings(
            model=DEMO_MODEL,
            upstream_url=standin.url,  # type: ignore[arg-type]  # pydantic parses the URL
            listen_host="127.0.0.1",
            port=port if _port_is_free(port) else 0,
            metrics_port=metrics_port if _port_is_free(metrics_port) else 0,
            **DEMO_BUDGETS,
        )
        async with running_sidecar(settings) as sidecar:
            url = f"http://127.0.0.1:{sidecar.port}"
            out.write(
                f"stand-in for vLLM (NOT vLLM; it only answers with usage) at {standin.url}\n"
                f"sidecar for {DEMO_MODEL} at {url}, metrics at "
                f"http://127.0.0.1:{sidecar.metrics_port}/metrics\n"
                f"budgets: {DEMO_BUDGETS}\n\n"
            )
            async with aiohttp.ClientSession() as session:
                rows = [await send_case(session, url, case) for case in DEMO_CASES]
            print_table(rows, out)
            if once:
                return
            out.write(
                f"\nServing until Ctrl-C. Try:\n  curl -s {url}/v1/chat/completions "
                '-H \'Content-Type: application/json\' -d \'{"messages": [{"role": "user", '
                '"content": "hi"}]}\' -i\n'
            )
            out.flush()
            await asyncio.Event().wait()
