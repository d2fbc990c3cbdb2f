"""Human-readable sizes and counts, for messages, tables and logs."""

from __future__ import annotations

_BINARY_UNITS = ("B", "KiB", "MiB", "GiB", "TiB", "PiB")


def format_bytes(size_bytes: float, *, digits: int = 1) -> str:
    """``57344`` -> ``"56 KiB"``; ``78_512_128`` -> ``"74.9 MiB"`` (binary units)."""
    value = float(size_bytes)
    for unit in _BINARY_UNITS:
        if abs(value) < 1024 or unit == _BINARY_UNITS[-1]:
            if unit == "B" or value == int(value):
                return f"{value:,.0f} {unit}"
            return f"{value:,.{digits}f} {unit}"
        value /= 1024
    raise AssertionError("unreachable")  # pragma: no cover


def gib(size_bytes: float) -> float:
    """Bytes to GiB."""
    return size_bytes / 2**30


def mib(size_bytes: float) -> float:
    """Bytes to MiB."""
    return size_bytes / 2**20
