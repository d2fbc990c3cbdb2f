"""body.lax_values: JSON values read as vLLM's pydantic request models read them."""

from __future__ import annotations

from typing import Any

import pytest
from pydantic import BaseModel, ValidationError

from sidecar.body.lax_values import is_token_ids, lax_bool, lax_int


class _VllmFields(BaseModel):
    """Fields typed as vLLM's request models type them (``max_tokens: int | None``, ``stream:
    bool | None``, a completions ``prompt``), so the tests compare with pydantic itself."""

    number: int | None = None
    flag: bool | None = None
    prompt: list[int] | list[list[int]] | str | list[str] | None = None


def _pydantic_reads(field: str, value: Any) -> Any:
    """What pydantic makes of ``value`` in ``field``; None where it refuses it."""
    try:
        return getattr(_VllmFields.model_validate({field: value}), field)
    except ValidationError:
        return None


INT_VALUES: list[Any] = [7, 7.0, "7", " 7 ", "+7", "-1", "7.0", True, False, 7.5, "7.5", "seven"]
INT_VALUES += ["", [], {}, None, float("nan"), float("inf"), "1e3", "0x10", "1_000"]


@pytest.mark.parametrize("value", INT_VALUES, ids=repr)
def test_lax_int_reads_what_an_int_field_reads(value: Any) -> None:
    assert lax_int(value) == _pydantic_reads("number", value)


BOOL_VALUES: list[Any] = [True, False, "true", "false", "yes", "no", "on", "off", "y", "n"]
BOOL_VALUES += ["1", "0", 1, 0, 1.0, 0.0, 2, "maybe", "", [], "TRUE", " true "]


@pytest.mark.parametrize("value", BOOL_VALUES, ids=repr)
def test_lax_bool_reads_what_a_bool_field_reads(value: Any) -> None:
    assert lax_bool(value, None) == _pydantic_reads("flag", value)


def test_lax_bool_falls_back_to_the_default_when_absent_or_refused() -> None:
    assert lax_bool(None, True) is True
    assert lax_bool("maybe", False) is False


# Lists pydantic's union accepts (where it refuses one, vLLM answers 400 whatever the sidecar
# made of it, so only accepted lists are compared).
PROMPTS: list[list[Any]] = [[1, 2], [1, "2"], ["1", 2], [True, 0], [1.0, 2], ["1", "2"], ["a"]]
PROMPTS += [[], [" 3", "x"], [False], [[1, "2"]]]


@pytest.mark.parametrize("value", PROMPTS, ids=repr)
def test_is_token_ids_takes_a_list_as_the_prompt_union_does(value: list[Any]) -> None:
    read = _pydantic_reads("prompt", value)
    assert isinstance(read, list)
    assert is_token_ids(value) == all(isinstance(v, int) for v in read)
