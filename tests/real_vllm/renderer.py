"""The renderer tier: vLLM 0.33.0's GPU-less ``vllm launch render`` as an exact token oracle.

    with RenderServer(model_dir("tiny-qwen2.5-vl")) as render:
        render.render("/v1/chat/completions", body)  # {"token_ids": [...], ...}

``vllm launch render`` runs vLLM's own request parsing, chat templating, media loading and
multimodal processing (the HF processor, so image placeholders are expanded to their real
counts), then answers ``POST /v1/chat/completions/render``, ``/v1/completions/render``,
``/v1/responses/render`` and ``/v1/messages/render`` with the prompt token ids, without an
engine, weights or KV cache. It needs ``.tools/vllm-render`` (``install.py render``): the
official ``vllm==0.33.0`` wheel with ``--no-deps`` on the CPU build of torch 2.13.0 (its
metadata asks for torch 2.14.0 and a CUDA kernel stack the render path never imports).

Flags, and why:

* ``VLLM_TARGET_DEVICE=cpu``: there is no GPU; CUDA platform detection would fail.
* ``--max-model-len 8192``, ``--limit-mm-per-prompt``, ``--served-model-name``: the same
  as ``engine.py`` so rendered and served requests meet the same limits and model name.
* No ``--dtype`` or KV flags: nothing is allocated. The tiny model's weights are not read,
  only its config, tokenizer and processor files.

``.venv/bin/python -m tests.real_vllm.renderer [model-name]`` starts it, renders one request per
route with an image, prints the token counts, and stops.
"""

from __future__ import annotations

import json
import sys
import urllib.error
import urllib.request
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

from tests.real_vllm.engine import ROOT, ManagedServer, free_port

VLLM_RENDER = ROOT / ".tools" / "vllm-render"


class RenderServer(ManagedServer):
    """``vllm launch render <model_dir>`` from ``.tools/vllm-render``."""

    def __init__(
        self,
        model_dir: Path,
        *,
        port: int | None = None,
        served_name: str | None = None,
        max_model_len: int = 8192,
        limit_mm: Mapping[str, int] | None = None,
        extra_args: Sequence[str] = (),
    ) -> None:
        port = port or free_port()
        self.model_dir = Path(model_dir)
        self.served_name = served_name or self.model_dir.name
        limits = dict(limit_mm) if limit_mm is not None else {"image": 4, "video": 0}
        argv = [
            str(VLLM_RENDER / "bin" / "vllm"), "launch", "render", str(self.model_dir),
            "--host", "127.0.0.1", "--port", str(port),
            "--served-model-name", self.served_name,
            "--max-model-len", str(max_model_len),
            "--limit-mm-per-prompt", json.dumps(limits),
            *extra_args,
        ]  # fmt: skip
        super().__init__(argv, port=port, log_name=f"render-{self.served_name}")

    def render(self, route: str, body: Mapping[str, Any]) -> tuple[int, Any]:
        """POST ``body`` to ``<route>/render``; return (status, parsed JSON)."""
        request = urllib.request.Request(  # noqa: S310
            f"{self.base_url}{route}/render",
            data=json.dumps(body).encode(),
            headers={"content-type": "application/json"},
        )
        try:
            with urllib.request.urlopen(request, timeout=120) as reply:  # noqa: S310
                return reply.status, json.loads(reply.read())
        except urllib.error.HTTPError as error:
            return error.code, json.loads(error.read() or b"null")


def token_ids(route: str, payload: Any) -> list[int] | None:
    """The prompt token ids in a render answer (chat/messages: one object; completions: list)."""
    if isinstance(payload, list):
        payload = payload[0] if payload else None
    if not isinstance(payload, dict):
        return None
    for key in ("token_ids", "prompt_token_ids"):
        ids = payload.get(key)
        if isinstance(ids, list):
            return [int(i) for i in ids]
    return None


def main(argv: list[str]) -> int:
    from tests.real_vllm.cases import anthropic_image, data_uri, image_part
    from tests.real_vllm.models import ensure_built

    name = argv[0] if argv else "tiny-qwen2.5-vl"
    directory = ensure_built(name)
    with RenderServer(directory) as server:
        model = server.served_name
        print(
            f"render server ready in {server.startup_seconds:.1f} s, "
            f"RSS {server.rss_bytes() / 2**30:.2f} GiB"
        )
        examples: list[tuple[str, dict[str, Any]]] = [
            ("/v1/chat/completions", {"model": model, "messages": [{"role": "user", "content": [
                image_part(640, 480), {"type": "text", "text": "What is in this picture?"}]}]}),
            ("/v1/completions", {"model": model, "prompt": "Once upon a time"}),
            ("/v1/responses", {"model": model, "input": [{"role": "user", "content": [
                {"type": "input_text", "text": "What is this?"},
                {"type": "input_image", "image_url": data_uri(640, 480, 8)}]}]}),
            ("/v1/messages", {"model": model, "max_tokens": 4, "messages": [
                {"role": "user", "content": [anthropic_image(640, 480, 10),
                                             {"type": "text", "text": "Describe."}]}]}),
        ]  # fmt: skip
        for route, body in examples:
            status, payload = server.render(route, body)
            ids = token_ids(route, payload)
            summary = len(ids) if ids is not None else json.dumps(payload)[:400]
            print(f"{route}/render -> {status}: {summary} tokens")
    return 0


if __name__ == "__main__":
    raise SystemExit(main(sys.argv[1:]))
