"""DNS for the remote image probe: the resolver its gate asks, and the one aiohttp connects by.

The gate resolves each host once (``resolve_with_getaddrinfo`` or an injected ``Resolver``),
checks every address, and pins the approved ones in the probe's ``PinnedResolver``.

Invariants:

* ``PinnedResolver`` answers aiohttp only with addresses the gate has already approved and
  raises ``OSError`` for any other host, so it never falls back to DNS: a DNS answer that
  changes between the check and the connect (rebinding) cannot move the connection.
* Each probe owns its own ``PinnedResolver`` (and connector), so a pin never leaks into
  another probe.
"""

from __future__ import annotations

import asyncio
import socket
from collections.abc import Awaitable, Callable

from aiohttp.abc import AbstractResolver, ResolveResult

from sidecar.images.addresses import IPAddress, normalise_host

Resolver = Callable[[str, int], Awaitable[list[str]]]


async def resolve_with_getaddrinfo(host: str, port: int) -> list[str]:
    """The system resolver: every TCP address of ``host``, in the order returned."""
    infos = await asyncio.get_running_loop().getaddrinfo(host, port, type=socket.SOCK_STREAM)
    return list(dict.fromkeys(str(info[4][0]) for info in infos))


class PinnedResolver(AbstractResolver):
    """Answers aiohttp only with addresses the gate approved; unknown hosts fail."""

    def __init__(self) -> None:
        self.addresses: dict[str, list[IPAddress]] = {}

    async def resolve(
        self, host: str, port: int = 0, family: socket.AddressFamily = socket.AF_INET
    ) -> list[ResolveResult]:
        """The pinned addresses of ``host`` in ``family``; ``OSError`` where there are none."""
        pinned = self.addresses.get(normalise_host(host))
        if pinned is None:
            raise OSError(f"{host} was not resolved by the probe's gate")
        results: list[ResolveResult] = [
            {
                "hostname": host,
                "host": str(ip),
                "port": port,
                "family": socket.AF_INET6 if ip.version == 6 else socket.AF_INET,
                "proto": 0,
                "flags": socket.AI_NUMERICHOST,
            }
            for ip in pinned
        ]
        if family != socket.AF_UNSPEC:
            results = [r for r in results if r["family"] == family]
        if not results:
            raise OSError(f"{host} has no pinned address of family {family!r}")
        return results

    async def close(self) -> None:
        """Nothing to release."""
