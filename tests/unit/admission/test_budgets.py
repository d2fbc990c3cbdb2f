"""admission.budgets: the operator's limits from the settings, and one engine's share."""

from __future__ import annotations

from sidecar.admission.budgets import Budgets, BudgetsInForce
from sidecar.profiles import load_profile
from sidecar.settings import Settings
from tests.support.sidecars import QWEN

PROFILE = load_profile(QWEN)


def test_budgets_from_settings_are_unlimited_by_default_but_the_context() -> None:
    budgets = Budgets.from_settings(Settings(model=QWEN), PROFILE)
    assert budgets == Budgets(max_request_prompt_tokens=PROFILE.max_position_embeddings)


def test_budgets_from_settings_carry_every_limit_set() -> None:
    settings = Settings(
        model=QWEN,
        max_images_per_request=4,
        max_image_pixels=1_000_000,
        max_image_tokens=1280,
        max_request_visual_tokens=4096,
        max_request_prompt_tokens=8192,
        max_request_kv_bytes="1GiB",
        kv_budget_bytes="8GiB",
        data_parallel_size=2,
        over_budget_action="downscale",
        downscale_method="processor_kwargs",
    )
    assert Budgets.from_settings(settings, PROFILE) == Budgets(
        max_images_per_request=4,
        max_image_pixels=1_000_000,
        max_image_tokens=1280,
        max_request_visual_tokens=4096,
        max_request_prompt_tokens=8192,
        max_request_kv_bytes=2**30,
        kv_budget_bytes=8 * 2**30,
        kv_budget_engines=2,
        downscale=True,
        downscale_with_processor_kwargs=True,
    )


def test_budgets_keep_an_auto_budget_off_until_vllms_pool_is_read() -> None:
    budgets = Budgets.from_settings(Settings(model=QWEN, kv_budget_bytes="auto:0.9"), PROFILE)
    assert budgets.kv_budget_bytes == 0


def test_budgets_give_each_data_parallel_engine_an_equal_share() -> None:
    assert Budgets(kv_budget_bytes=10, kv_budget_engines=3).kv_budget_bytes_per_engine == 3
    assert Budgets(kv_budget_bytes=10).kv_budget_bytes_per_engine == 10
    assert Budgets(kv_budget_bytes=10, kv_budget_engines=0).kv_budget_bytes_per_engine == 10


def test_budgets_in_force_hold_the_current_set_whole() -> None:
    first, second = Budgets(max_image_pixels=1), Budgets(max_image_pixels=2)
    in_force = BudgetsInForce(first)
    seen = in_force.current
    in_force.current = second
    assert (seen, in_force.current) == (first, second)
