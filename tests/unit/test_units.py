"""units: sizes in binary units for messages, tables and logs."""

from __future__ import annotations

import pytest

from sidecar.units import format_bytes, gib, mib


@pytest.mark.parametrize(
    ("size_bytes", "text"),
    [
        (0, "0 B"),
        (1_023, "1,023 B"),
        (1_024, "1 KiB"),
        (1_536, "1.5 KiB"),
        (57_344, "56 KiB"),
        (78_512_128, "74.9 MiB"),
        (3 * 2**30, "3 GiB"),
        (2**60, "1,024 PiB"),
        (-2_048, "-2 KiB"),
    ],
    ids=["zero", "under-a-kib", "one-kib", "half", "qwen-per-token", "brief", "gib", "top", "neg"],
)
def test_format_bytes_picks_the_largest_binary_unit_under_1024(size_bytes: int, text: str) -> None:
    assert format_bytes(size_bytes) == text


def test_format_bytes_shows_the_digits_asked_for_unless_the_value_is_whole() -> None:
    assert format_bytes(1_234_567, digits=3) == "1.177 MiB"
    assert format_bytes(5 * 2**20, digits=3) == "5 MiB"


def test_gib_and_mib_convert_bytes() -> None:
    assert (gib(3 * 2**30), mib(3 * 2**20), gib(2**29)) == (3.0, 3.0, 0.5)
