"""vision.mllama: Llama 3.2 Vision puts one token in the prompt and its image tiles in the
cross-attention layers' KV cache.

Every size against transformers' own processor: ``tests/oracle/test_vision_oracle_families.py``.
"""

from __future__ import annotations

from sidecar.profiles import load_profile
from sidecar.profiles.kv_geometry import AttentionKind

MLLAMA = "meta-llama/Llama-3.2-11B-Vision-Instruct"


def test_mllama_profile_caches_images_in_its_cross_attention_layers() -> None:
    profile = load_profile(MLLAMA)
    groups = {group.kind: group.num_layers for group in profile.kv.layer_groups}
    assert groups == {AttentionKind.FULL: 32, AttentionKind.CROSS: 8}
    cost = profile.vision.image_tokens(640, 480)
    assert (cost.prompt_tokens, cost.cross_attention_tokens) == (1, 2 * 1601)
    assert profile.vision.max_image_tokens().cross_attention_tokens == 4 * 1601
