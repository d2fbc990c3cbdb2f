"""serve.rewrite: fields the sidecar adds to a body it forwards, every other byte kept when it can.

The image rewrite itself runs end to end (``tests/e2e/test_proxy_budgets.py``).
"""

from __future__ import annotations

import orjson
import pytest

from sidecar.serve.rewrite import (
    merge_top_level_object,
    with_processor_max_pixels,
    with_stream_usage,
)


def test_merge_top_level_object_inserts_a_new_key_and_keeps_every_other_byte() -> None:
    body = b'{"model" : "m",\n "stream": true}'
    merged = merge_top_level_object(body, "stream_options", {"include_usage": True})
    assert merged == b'{"stream_options":{"include_usage":true},"model" : "m",\n "stream": true}'


@pytest.mark.parametrize("body", [b"{}", b"  { }  "], ids=["empty", "spaced"])
def test_merge_top_level_object_adds_no_comma_to_an_empty_object(body: bytes) -> None:
    merged = merge_top_level_object(body, "k", {"a": 1})
    assert orjson.loads(merged) == {"k": {"a": 1}}


@pytest.mark.parametrize(
    ("current", "expected"),
    [
        ({"include_usage": False, "continuous_usage_stats": True},
         {"include_usage": True, "continuous_usage_stats": True}),
        (None, {"include_usage": True}),
        ("not an object", {"include_usage": True}),
    ],
    ids=["merged", "null", "not-an-object"],
)  # fmt: skip
def test_merge_top_level_object_updates_an_existing_key(
    current: object, expected: dict[str, object]
) -> None:
    body = orjson.dumps({"model": "m", "stream_options": current})
    merged = orjson.loads(merge_top_level_object(body, "stream_options", {"include_usage": True}))
    assert merged == {"model": "m", "stream_options": expected}


def test_merge_top_level_object_keeps_an_integer_past_64_bits_as_sent() -> None:
    # Rewriting parses the whole body; orjson alone would send 1e+20 where the client sent
    # the integer.
    body = b'{"seed": 100000000000000000000, "stream_options": {}, "stream": true}'
    merged = merge_top_level_object(body, "stream_options", {"include_usage": True})
    assert b'"seed":100000000000000000000' in merged


def test_with_stream_usage_and_max_pixels_name_vllms_fields() -> None:
    body = b'{"model": "m"}'
    assert orjson.loads(with_stream_usage(body))["stream_options"] == {"include_usage": True}
    kwargs = orjson.loads(with_processor_max_pixels(body, 1_003_520))["mm_processor_kwargs"]
    assert kwargs == {"max_pixels": 1_003_520}


def test_with_stream_usage_keeps_continuous_usage_off_as_the_client_had_it() -> None:
    # vLLM counts continuous_usage_stats only with include_usage: forcing the one would turn
    # on the other, and every chunk the client gets would carry usage it did not ask for.
    body = b'{"model": "m", "stream": true, "stream_options": {"continuous_usage_stats": true}}'
    options = orjson.loads(with_stream_usage(body))["stream_options"]
    assert options == {"include_usage": True, "continuous_usage_stats": False}
