"""text.template_overhead: a model directory's template framing, learned once at start-up."""

from __future__ import annotations

import shutil
from pathlib import Path

from sidecar.text.template_overhead import learned_overhead
from sidecar.text.text_estimate import FAMILY_OVERHEADS
from tests.support.qwen_models import ensure_model


def test_with_the_tokenizer_it_is_the_familys_built_in_framing() -> None:
    assert learned_overhead(ensure_model("qwen3-vl-8b"), 3.0) == FAMILY_OVERHEADS["qwen3_vl"]


def test_without_a_tokenizer_it_is_estimated_and_generous(tmp_path: Path) -> None:
    shutil.copy(ensure_model("qwen3-vl-8b") / "chat_template.jinja", tmp_path)
    learned = learned_overhead(tmp_path, 3.0)
    exact = FAMILY_OVERHEADS["qwen3_vl"]
    assert learned is not None
    assert learned.fixed_tokens >= exact.fixed_tokens
    assert learned.per_message_tokens >= exact.per_message_tokens
    assert learned.tools_tokens >= exact.tools_tokens


def test_no_template_or_one_that_refuses_the_probes_gives_nothing(tmp_path: Path) -> None:
    assert learned_overhead(tmp_path, 3.0) is None
    (tmp_path / "chat_template.jinja").write_text("{{ raise_exception('no') }}")
    assert learned_overhead(tmp_path, 3.0) is None
