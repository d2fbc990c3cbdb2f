"""advisor.repricing, advisor.records and advisor.candidates: a record priced under candidate
settings as the serving code prices it; lines read back; --set applied to the recorded base."""

from __future__ import annotations

from pathlib import Path

import orjson
import pytest

from sidecar.admission.decision import Decision, Reason
from sidecar.advisor.candidates import (
    candidate_settings,
    changed,
    field_for,
    parse_assignments,
    replay_notes,
)
from sidecar.advisor.records import RecordedCost, parse_lines, read_traffic_log
from sidecar.advisor.repricing import Candidate, with_settings
from sidecar.errors import ConfigurationError
from sidecar.settings import Settings
from tests.support.imaging import PROMPT
from tests.support.proxy_helpers import RULE, expected, text_tokens
from tests.support.sidecars import QWEN

BASE = Settings(model=QWEN)
PHOTO = (4032, 3024, "jpeg", "data")


def cost(*images: tuple[int | None, int | None, str | None, str], **fields: object) -> RecordedCost:
    values: dict[str, object] = {
        "text_tokens": 23,
        "text_exact": False,
        "output_tokens": 8,
        "output_requested": 8,
    } | fields
    return RecordedCost(images=images, **values)  # type: ignore[arg-type]


def test_an_admitted_request_costs_what_the_proxy_predicts() -> None:
    # The text tokens the proxy records for its request: the estimate for PROMPT.
    priced = Candidate(BASE).price(
        cost((1920, 1080, "jpeg", "data"), text_tokens=text_tokens(PROMPT))
    )
    assert priced.decision is Decision.ADMIT
    assert (priced.visual_tokens, priced.prompt_tokens, priced.kv_bytes) == expected(
        [(1920, 1080)], output_tokens=8
    )


def test_a_per_image_budget_downscales_and_counts_the_images_shrunk() -> None:
    settings = with_settings(BASE, max_image_tokens=1024, over_budget_action="downscale")
    priced = Candidate(settings).price(cost(PHOTO, (64, 64, "png", "data")))
    assert (priced.decision, priced.reason) == (Decision.DOWNSCALE, Reason.MAX_IMAGE_TOKENS)
    assert priced.downscaled_images == 1
    assert priced.image_tokens[0] <= 1024
    assert priced.image_tokens[1] == RULE.image_tokens(64, 64).tokens


@pytest.mark.parametrize(
    ("remote", "decision", "tokens"),
    [
        ("assume_max", Decision.ADMIT, 16384),
        ("probe", Decision.ADMIT, 391),
        ("reject", Decision.REJECT, None),
    ],
)
def test_url_images_follow_the_candidates_remote_policy(
    remote: str, decision: Decision, tokens: int | None
) -> None:
    priced = Candidate(with_settings(BASE, remote_images=remote)).price(
        cost((640, 480, "jpeg", "url"))
    )
    assert priced.decision is decision
    if tokens is None:
        assert priced.reason is Reason.INVALID_IMAGE
    else:
        assert priced.image_tokens == (tokens,)


def test_refusals_the_pricer_makes_are_made_again() -> None:
    small_decode = Candidate(with_settings(BASE, max_decode_pixels=1_000_000))
    assert small_decode.price(cost(PHOTO)).reason is Reason.INVALID_IMAGE
    assert Candidate(BASE).price(cost((4000, 10, "png", "data"))).reason is Reason.INVALID_IMAGE
    embeds = cost(media=(("embeds", 0, 0, True),))
    assert Candidate(BASE).price(embeds).reason is Reason.INVALID_BODY
    kwargs = cost(PHOTO, pixel_range=(None, 200_704))
    assert Candidate(BASE).price(kwargs).reason is Reason.INVALID_BODY
    trusted = Candidate(with_settings(BASE, trust_request_mm_kwargs=True)).price(kwargs)
    assert trusted.image_tokens == (
        RULE.with_pixel_range(None, 200_704).image_tokens(4032, 3024).tokens,
    )


def test_allowances_and_default_output_follow_the_candidate() -> None:
    settings = with_settings(
        BASE, video_tokens_per_item=100, audio_tokens_per_item=50, default_output_tokens=64
    )
    media = (("video", 999, 2, True), ("video", 300, 2, False), ("audio", 0, 0, True))
    priced = Candidate(settings).price(cost(media=media, output_requested=None))
    assert priced.visual_tokens == 100 + 300 + 50
    assert priced.prompt_tokens == 100 + 300 + 2 + 50 + 23
    assert priced.kv_bytes == expected([], image_tokens=[], media_tokens=452, output_tokens=64)[2]


def test_equal_costs_price_equally_and_images_are_priced_once() -> None:
    candidate = Candidate(BASE)
    assert candidate.price(cost(PHOTO)) == candidate.price(cost(PHOTO, text_tokens=23))
    assert candidate._image(0, PHOTO, candidate.vision) is candidate._image(
        0, PHOTO, candidate.vision
    )


def test_lines_are_read_oldest_file_first_and_bad_lines_are_counted(tmp_path: Path) -> None:
    def line(request_id: str, arrival: float) -> bytes:
        return orjson.dumps(
            {
                "id": request_id,
                "t": arrival,
                "route": "chat_completions",
                "model": QWEN,
                "decision": "admit",
                "reason": "within_budget",
                "wait": 0,
                "dur": 1,
                "held": 1,
            }
        )

    header = orjson.dumps({"kind": "settings", "settings": {"model": QWEN}})
    (tmp_path / "t.jsonl.1").write_bytes(b"\n".join([header, line("old", 5.0)]) + b"\n")
    (tmp_path / "t.jsonl").write_bytes(b"\n".join([header, line("new", 9.0), b'{"cut']))
    contents = read_traffic_log(tmp_path / "t.jsonl")
    assert [r.request_id for r in contents.records] == ["old", "new"]
    assert (contents.headers, contents.skipped_lines) == (2, 1)
    assert contents.records[0].cost is None
    assert parse_lines([b"", b"[1, 2]", b"{}"]).skipped_lines == 2


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
