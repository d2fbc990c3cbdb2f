"""The renderer tier's moving parts: render servers, a loopback image server, the sidecar's
own prediction for a body, and vLLM's count for it.

``RenderPair`` starts one ``vllm launch render`` per model directory at once (they start in
about 40 s, in parallel) with ``--trust-request-chat-template``, so a request's own template
is rendered too. ``ImageServer`` serves PNGs at ``/<w>x<h>.png`` on 127.0.0.1, so URL images
are fetched by vLLM and probed by the sidecar alike.
"""

from __future__ import annotations

import http.server
import json
import threading
from collections.abc import Iterator, Mapping
from contextlib import ExitStack, contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from sidecar.body.request_body import BodyPolicy, parse_request_body
from sidecar.cost.assembly import PricingPolicy
from sidecar.cost.pricer import Pricer
from sidecar.images.remote import RemoteImagePolicy, RemoteImageProber
from sidecar.profiles import load_profile
from sidecar.routes import ROUTES_BY_PATH
from sidecar.settings import RemoteImages
from sidecar.text.text_tokens import PromptCounter
from tests.real_vllm.cases import png_bytes
from tests.real_vllm.renderer import VLLM_RENDER, RenderServer

RENDER_FLAGS = ("--trust-request-chat-template",)
BODY_POLICY = BodyPolicy(trust_request_chat_template=True)


def renderer_installed() -> bool:
    return (VLLM_RENDER / "bin" / "vllm").is_file()


@dataclass
class Prediction:
    prompt_tokens: int
    exact: bool


class SidecarModel:
    """The sidecar's view of one model directory: its profile and exact prompt counter, built
    once (the tokenizer takes a fraction of a second to load)."""

    def __init__(self, directory: Path) -> None:
        self.profile = load_profile(str(directory))
        counter = PromptCounter.from_model_dir(directory, self.profile.architecture.prompt_family)
        assert counter is not None, f"no prompt counter for {directory}"
        self.counter = counter

    async def predict(self, route: str, body: Mapping[str, Any]) -> Prediction:
        """The sidecar's prompt tokens for ``body`` on ``route``'s render twin. URL images are
        probed (loopback allowed); the prober lives for this call, in this event loop."""
        prober = RemoteImageProber(RemoteImagePolicy(), address_allowed=lambda _: True)
        policy = PricingPolicy(remote_images=RemoteImages.PROBE)
        pricer = Pricer(self.profile, policy, prober, self.counter)
        raw = json.dumps(body).encode()
        try:
            parsed = parse_request_body(raw, ROUTES_BY_PATH[route + "/render"], policy=BODY_POLICY)
            prediction = await pricer.price(parsed, raw)
        finally:
            await prober.close()
        return Prediction(prediction.prompt_tokens, prediction.text_tokens_exact)


def rendered_tokens(server: RenderServer, route: str, body: Mapping[str, Any]) -> int | str:
    """vLLM's prompt tokens for ``body`` (summed over a completions list), or its error."""
    status, payload = server.render(route, body)
    if status != 200:
        return f"{status}: {json.dumps(payload)[:300]}"
    answers = payload if isinstance(payload, list) else [payload]
    return sum(len(answer["token_ids"]) for answer in answers)


class _PngHandler(http.server.BaseHTTPRequestHandler):
    def do_GET(self) -> None:
        width, _, height = self.path.strip("/").removesuffix(".png").partition("x")
        data = png_bytes(int(width), int(height), 7)
        self.send_response(200)
        self.send_header("content-type", "image/png")
        self.send_header("content-length", str(len(data)))
        self.end_headers()
        self.wfile.write(data)

    def log_message(self, format: str, *args: Any) -> None:
        pass


@contextmanager
def image_server() -> Iterator[str]:
    """A loopback HTTP server of PNGs; yields its base URL."""
    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), _PngHandler)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield f"http://127.0.0.1:{server.server_address[1]}"
    finally:
        server.shutdown()
        server.server_close()


@contextmanager
def render_servers(directories: Mapping[str, Path]) -> Iterator[dict[str, RenderServer]]:
    """One render server per model directory, started in parallel."""
    servers = {
        name: RenderServer(directory, served_name=name, limit_mm={"image": 8, "video": 0},
                           extra_args=RENDER_FLAGS)
        for name, directory in directories.items()
    }  # fmt: skip
    with ExitStack() as stack:
        errors: list[BaseException] = []

        def start(server: RenderServer) -> None:
            try:
                server.start()
            except BaseException as exc:  # reported below, on the main thread
                errors.append(exc)

        threads = [threading.Thread(target=start, args=(s,)) for s in servers.values()]
        for server, thread in zip(servers.values(), threads, strict=True):
            stack.callback(server.stop)
            thread.start()
        for thread in threads:
            thread.join()
        if errors:
            raise errors[0]
        yield servers
