"""body.body_json: bodies read as vLLM's server reads them, integers past 64 bits whole."""

from __future__ import annotations

import json
from typing import Any

import orjson
import pytest
from hypothesis import given
from hypothesis import strategies as st

from sidecar.body import body_json

LONG = [2**64, 10**20, -(2**63) - 1, 7260890133883185 * 10**17]


@pytest.mark.parametrize("number", LONG, ids=str)
def test_loads_keeps_an_integer_orjson_would_read_as_a_float(number: int) -> None:
    data = b'{"tools": [{"input_schema": {"maximum": %d}}]}' % number
    assert isinstance(orjson.loads(data)["tools"][0]["input_schema"]["maximum"], float)
    assert body_json.loads(data) == json.loads(data)
    assert body_json.loads(data)["tools"][0]["input_schema"]["maximum"] == number


@pytest.mark.parametrize("number", [2**64 - 1, -(2**63), 10**19, 0], ids=str)
def test_loads_reads_integers_within_64_bits_as_orjson_does(number: int) -> None:
    assert body_json.loads(b"[%d]" % number) == [number]


def test_loads_reads_a_long_run_of_digits_in_a_string_the_same_either_way() -> None:
    data = b'{"content": "order 123456789012345678901234, 1.000000000000000000001"}'
    assert body_json.loads(data) == orjson.loads(data)


def test_loads_refuses_what_orjson_refuses() -> None:
    with pytest.raises(orjson.JSONDecodeError):
        body_json.loads(b'{"a": NaN, "b": 100000000000000000000}')


def test_loads_falls_back_to_orjson_past_the_interpreters_limits() -> None:
    deep = b"[" * 1010 + b"100000000000000000000" + b"]" * 1010
    value = body_json.loads(deep)  # the standard library's recursion limit, not a crash
    for _ in range(1010):
        value = value[0]
    assert value == 1e20


JSON_VALUES = st.recursive(
    st.none()
    | st.booleans()
    | st.integers()
    | st.floats(allow_nan=False, allow_infinity=False)
    | st.text(),
    lambda children: st.lists(children) | st.dictionaries(st.text(), children),
    max_leaves=20,
)


@given(JSON_VALUES)
def test_loads_and_dumps_agree_with_the_standard_library(value: Any) -> None:
    written = body_json.dumps(value)
    assert json.loads(written) == value
    assert body_json.loads(written) == json.loads(written)
