"""settings: what each ``SIDECAR_*`` variable reads as, and what stops start-up."""

from __future__ import annotations

import os

import pytest
from pydantic import ValidationError

from sidecar.settings import Mode, OverBudgetAction, Settings, parse_objective_priorities

MODEL = "Qwen/Qwen2.5-VL-7B-Instruct"


@pytest.fixture(autouse=True)
def _no_sidecar_environment(monkeypatch: pytest.MonkeyPatch) -> None:
    """Only what a test sets: a developer's own ``SIDECAR_*`` variables must not leak in."""
    for name in list(os.environ):
        if name.startswith("SIDECAR_"):
            monkeypatch.delenv(name)
    monkeypatch.setenv("SIDECAR_MODEL", MODEL)


def test_settings_defaults_enforce_with_no_budget_and_reject_what_they_cannot_price() -> None:
    settings = Settings()
    assert settings.model == MODEL
    assert settings.mode is Mode.ENFORCE
    assert settings.over_budget_action is OverBudgetAction.REJECT
    assert settings.kv_budget_bytes == 0
    assert settings.kv_budget_auto_fraction() is None
    assert (settings.admin_routes, settings.unknown_routes) == ("reject", "reject")


def test_settings_read_sizes_with_binary_units(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("SIDECAR_MAX_BODY_BYTES", "512MiB")
    monkeypatch.setenv("SIDECAR_KV_BUDGET_BYTES", "2GiB")
    settings = Settings()
    assert settings.max_body_bytes == 512 * 2**20
    assert settings.kv_budget_bytes == 2 * 2**30


@pytest.mark.parametrize(
    ("value", "fraction"),
    [("auto", 1.0), ("auto:0.9", 0.9), ("auto:.5", 0.5), ("auto:1", 1.0)],
    ids=["whole-pool", "ninety-percent", "no-leading-zero", "one"],
)
def test_settings_auto_budget_takes_a_fraction_of_vllms_pool(
    monkeypatch: pytest.MonkeyPatch, value: str, fraction: float
) -> None:
    monkeypatch.setenv("SIDECAR_KV_BUDGET_BYTES", value)
    assert Settings().kv_budget_auto_fraction() == fraction


@pytest.mark.parametrize("value", ["auto:1.5", "auto:", "automatic", "lots"])
def test_settings_refuse_an_auto_budget_outside_the_pool(
    monkeypatch: pytest.MonkeyPatch, value: str
) -> None:
    monkeypatch.setenv("SIDECAR_KV_BUDGET_BYTES", value)
    with pytest.raises(ValidationError, match="kv_budget_bytes"):
        Settings()


def test_settings_split_comma_separated_lists(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("SIDECAR_REMOTE_IMAGE_ALLOWED_DOMAINS", " Images.Example.com, ,cdn.test ")
    monkeypatch.setenv("SIDECAR_PIPELINE_LAYER_PARTITION", "13, 15")
    settings = Settings()
    assert settings.remote_image_allowed_domains == ["images.example.com", "cdn.test"]
    assert settings.pipeline_layer_partition == (13, 15)


def test_settings_read_an_empty_list_as_unset(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("SIDECAR_REMOTE_IMAGE_ALLOWED_DOMAINS", "")
    monkeypatch.setenv("SIDECAR_PIPELINE_LAYER_PARTITION", " ")
    settings = Settings()
    assert settings.remote_image_allowed_domains == []
    assert settings.pipeline_layer_partition == ()


def test_settings_still_read_the_block_size_name_from_before_it_carried_its_unit(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setenv("SIDECAR_BLOCK_SIZE", "32")
    assert Settings().block_size_tokens == 32
    monkeypatch.setenv("SIDECAR_BLOCK_SIZE_TOKENS", "64")
    assert Settings().block_size_tokens == 64


def test_settings_env_name_gives_the_variable_an_operator_sets() -> None:
    assert Settings.env_name("max_body_bytes") == "SIDECAR_MAX_BODY_BYTES"
    assert Settings.env_name("block_size_tokens") == "SIDECAR_BLOCK_SIZE_TOKENS"
    for field in Settings.model_fields:
        assert Settings.env_name(field).startswith("SIDECAR_")


@pytest.mark.parametrize(
    ("variable", "value"),
    [
        ("SIDECAR_PORT", "70000"),
        ("SIDECAR_MODE", "observe"),
        ("SIDECAR_SATURATION_KV_USAGE", "0"),
        ("SIDECAR_DOWNSCALE_JPEG_QUALITY", "101"),
        ("SIDECAR_MAX_IMAGE_PIXELS", "-1"),
        ("SIDECAR_MAX_BODY_BYTES", "12 parsecs"),
    ],
    ids=["port", "mode", "saturation", "jpeg-quality", "pixels", "size"],
)
def test_settings_refuse_an_invalid_value_naming_the_field(
    monkeypatch: pytest.MonkeyPatch, variable: str, value: str
) -> None:
    monkeypatch.setenv(variable, value)
    field = variable.removeprefix("SIDECAR_").lower()
    with pytest.raises(ValidationError, match=field):
        Settings()


def test_settings_require_a_model(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("SIDECAR_MODEL")
    with pytest.raises(ValidationError, match="model"):
        Settings()


def test_settings_are_frozen_and_built_directly_in_code() -> None:
    settings = Settings(model="some/model", kv_budget_bytes="auto:0.5")
    assert settings.kv_budget_auto_fraction() == 0.5
    with pytest.raises(ValidationError, match="frozen"):
        settings.model = "other/model"  # type: ignore[misc]


def test_settings_ignore_variables_they_do_not_define(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("SIDECAR_NO_SUCH_SETTING", "1")
    assert Settings().model == MODEL


def test_parse_objective_priorities_reads_the_mapping_and_names_a_bad_item() -> None:
    assert parse_objective_priorities(" chat=10, default=0,batch=-1,") == {
        "chat": 10, "default": 0, "batch": -1,
    }  # fmt: skip
    assert parse_objective_priorities("") == {}
    with pytest.raises(ValueError, match="'batch'"):
        parse_objective_priorities("chat=10,batch")
    with pytest.raises(ValueError, match="'=3'"):
        parse_objective_priorities("=3")


def test_settings_refuse_an_objective_mapping_they_cannot_read(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setenv("SIDECAR_OBJECTIVE_PRIORITIES", "chat=10,batch")
    with pytest.raises(ValidationError, match="objective_priorities"):
        Settings()


@pytest.mark.parametrize(
    ("trust", "method", "trusted"),
    [(False, "resize", False), (True, "resize", True), (False, "processor_kwargs", True)],
    ids=["refused-as-vllm-does", "vllm-trusts-them", "downscaling-through-them"],
)
def test_settings_trust_a_requests_mm_kwargs_when_vllm_does_or_downscaling_needs_them(
    trust: bool, method: str, trusted: bool
) -> None:
    settings = Settings(trust_request_mm_kwargs=trust, downscale_method=method)
    assert settings.trusts_request_mm_kwargs is trusted
