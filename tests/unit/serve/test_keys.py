"""serve.keys: the engine view's context is vLLM's ``max_model_len`` once read."""

from __future__ import annotations

from sidecar.engine import EngineFacts
from sidecar.profiles import load_profile
from sidecar.serve.keys import EngineView
from tests.support.sidecars import QWEN

PROFILE = load_profile(QWEN)


def test_engine_view_context_is_the_models_until_vllm_reports_its_own() -> None:
    view = EngineView(PROFILE.kv, PROFILE.max_position_embeddings)
    assert view.context_tokens == PROFILE.max_position_embeddings == 128_000
    view.facts = EngineFacts(num_gpu_blocks=100)  # a round that gave no max_model_len
    assert view.context_tokens == PROFILE.max_position_embeddings
    view.facts = EngineFacts(max_model_len=32_768)
    assert view.context_tokens == 32_768
