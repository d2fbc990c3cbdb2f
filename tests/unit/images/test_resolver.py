"""images.resolver: the system resolver, and the pinned resolver that lets a probe connect only
to the addresses its gate approved (whatever DNS answers later)."""

from __future__ import annotations

import socket
from ipaddress import ip_address

import pytest

from sidecar.images.resolver import PinnedResolver, resolve_with_getaddrinfo


async def test_system_resolver_returns_each_address_once() -> None:
    assert await resolve_with_getaddrinfo("127.0.0.1", 80) == ["127.0.0.1"]


async def test_pinned_resolver_answers_only_for_approved_hosts_and_families() -> None:
    pins = PinnedResolver()
    pins.addresses["images.test"] = [ip_address("127.0.0.1"), ip_address("::1")]
    answers = await pins.resolve("Images.Test.", 8080, family=socket.AF_UNSPEC)
    assert [(a["host"], a["port"]) for a in answers] == [("127.0.0.1", 8080), ("::1", 8080)]
    assert [a["host"] for a in await pins.resolve("images.test", 80, socket.AF_INET6)] == ["::1"]
    with pytest.raises(OSError, match="not resolved by the probe's gate"):
        await pins.resolve("evil.test", 80, socket.AF_UNSPEC)
    pins.addresses["v4.test"] = [ip_address("127.0.0.1")]
    with pytest.raises(OSError, match="no pinned address of family"):
        await pins.resolve("v4.test", 80, socket.AF_INET6)
    await pins.close()
