"""advisor.candidates: ``--set`` applied to the recorded settings (or the environment's), each
bad variable named, and the notes on what a replay cannot model."""

from __future__ import annotations

import pytest

from sidecar.advisor.candidates import (
    candidate_settings,
    changed,
    field_for,
    parse_assignments,
    replay_notes,
)
from sidecar.advisor.repricing import with_settings
from sidecar.errors import ConfigurationError
from sidecar.settings import Settings
from tests.support.sidecars import QWEN

BASE = Settings(model=QWEN)


def test_set_applies_to_the_recorded_settings() -> None:
    changes = parse_assignments(
        ["SIDECAR_MAX_PIXELS=1003520", "SIDECAR_MAX_IMAGE_TOKENS=", "SIDECAR_BLOCK_SIZE=32"]
    )
    assert changes == {"max_pixels": "1003520", "max_image_tokens": None, "block_size_tokens": "32"}
    recorded = {"model": QWEN, "max_image_tokens": 4096, "kv_budget_bytes": 1000}
    settings = candidate_settings(recorded, changes, model=None)
    assert (settings.max_pixels, settings.max_image_tokens, settings.kv_budget_bytes) == (
        1_003_520,
        None,
        1000,
    )
    base = candidate_settings(recorded, {}, model=None)
    assert set(changed(base, settings)) == {
        "SIDECAR_MAX_PIXELS",
        "SIDECAR_MAX_IMAGE_TOKENS",
        "SIDECAR_BLOCK_SIZE_TOKENS",
    }


def test_without_a_header_the_environment_and_the_recorded_model_are_the_base(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.delenv("SIDECAR_MODEL", raising=False)
    monkeypatch.setenv("SIDECAR_MAX_IMAGE_TOKENS", "512")
    settings = candidate_settings(None, {}, model=QWEN)
    assert (settings.model, settings.max_image_tokens) == (QWEN, 512)


@pytest.mark.parametrize(
    ("assignments", "message"),
    [(["SIDECAR_NOPE=1"], "not a SIDECAR_"), (["MAX_PIXELS"], "expected SIDECAR_NAME=VALUE")],
)
def test_bad_assignments_name_the_problem(assignments: list[str], message: str) -> None:
    with pytest.raises(ConfigurationError, match=message):
        parse_assignments(assignments)


def test_an_invalid_candidate_value_names_the_variable() -> None:
    with pytest.raises(ConfigurationError, match="SIDECAR_MAX_PIXELS"):
        candidate_settings({"model": QWEN}, {"max_pixels": "lots"}, model=None)
    assert field_for("SIDECAR_BLOCK_SIZE_TOKENS") == "block_size_tokens"


def test_notes_say_what_the_replay_cannot_model() -> None:
    notes = replay_notes(with_settings(BASE, kv_budget_bytes="auto"), {"text_chars_per_token": 2})
    text = " ".join(notes)
    assert "saturation gate" in text
    assert "auto" in text
    assert "text tokens are replayed as recorded" in text


def test_notes_say_how_prompt_and_output_are_bounded_without_a_prompt_budget() -> None:
    notes = " ".join(replay_notes(BASE, {}))
    assert "prompt budget: the model's context length" in notes
    assert "output tokens are cut" in notes
    assert "prompt budget" not in " ".join(
        replay_notes(with_settings(BASE, max_request_prompt_tokens=4096), {})
    )


def test_field_for_reads_every_setting_by_its_variable() -> None:
    for field in Settings.model_fields:
        assert field_for(Settings.env_name(field)) == field
    assert field_for("SIDECAR_BLOCK_SIZE") == "block_size_tokens"  # the former name
