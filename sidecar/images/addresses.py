"""Which hosts and addresses a remote image probe may reach.

The policy half of the probe's gate, pure and synchronous: ``is_public_address`` for every
address a host resolves to, ``literal_address`` for a host written as an IP, and
``AllowList`` for ``SIDECAR_REMOTE_IMAGE_ALLOWED_DOMAINS``.

Invariants:

* An address is public only if it is reachable on the internet and wraps no local IPv4
  address: IPv4-mapped, 6to4, Teredo, NAT64 and IPv4-compatible forms are judged by the IPv4
  addresses they deliver to; cloud metadata and host-agent endpoints, carrier-grade NAT,
  IETF protocol space and local-use NAT64 are refused even where ``ipaddress`` calls them
  global; a scoped IPv6 address is never public.
* A host that is a numeric IPv4 address in a legacy spelling (``2130706433``, ``0x7f.1``,
  ``127.1``) is refused, not resolved: browsers and resolvers read those as addresses. Only a
  dotted quad or an IPv6 literal names an address.
* Host names are compared lower-case and without a trailing dot; allow-list domains are
  IDNA-encoded, as yarl gives a URL's host.
"""

from __future__ import annotations

import string
from collections.abc import Sequence
from dataclasses import dataclass
from ipaddress import IPv4Address, IPv6Address, ip_address, ip_network

from yarl import URL

from sidecar.errors import ConfigurationError

IPAddress = IPv4Address | IPv6Address

# Cloud metadata and host-agent endpoints. Some of these count as global in ``ipaddress``.
_METADATA_ADDRESSES = frozenset(
    ip_address(a)
    for a in ("169.254.169.254", "fd00:ec2::254", "100.100.100.200", "168.63.129.16", "192.0.0.192")
)
# 192.0.0.0/24 is IETF protocol space that older Pythons call global; 64:ff9b:1::/48 is
# local-use NAT64, which may translate to private IPv4.
_FORBIDDEN_NETWORKS = (
    ip_network("100.64.0.0/10"),
    ip_network("192.0.0.0/24"),
    ip_network("64:ff9b:1::/48"),
)
_NAT64 = ip_network("64:ff9b::/96")
_IPV4_COMPATIBLE = ip_network("::/96")


def is_public_address(ip: IPAddress) -> bool:
    """Whether ``ip`` is reachable on the internet and wraps no local IPv4 address."""
    if ip in _METADATA_ADDRESSES or any(ip in net for net in _FORBIDDEN_NETWORKS):
        return False
    if isinstance(ip, IPv6Address):
        if ip.scope_id is not None:
            return False
        embedded = _embedded_ipv4(ip)
        if embedded is not None:
            return all(is_public_address(v4) for v4 in embedded)
        if ip.is_site_local:
            return False
    return ip.is_global and not (
        ip.is_private
        or ip.is_loopback
        or ip.is_link_local
        or ip.is_multicast
        or ip.is_reserved
        or ip.is_unspecified
    )


def _embedded_ipv4(ip: IPv6Address) -> tuple[IPv4Address, ...] | None:
    """The IPv4 addresses that an IPv6 transition form delivers to, if it is one."""
    if ip.ipv4_mapped is not None:
        return (ip.ipv4_mapped,)
    if ip.sixtofour is not None:
        return (ip.sixtofour,)
    if ip.teredo is not None:
        return ip.teredo
    if ip in _NAT64 or (ip in _IPV4_COMPATIBLE and int(ip) > 1):
        return (IPv4Address(int(ip) & 0xFFFFFFFF),)
    return None


def normalise_host(host: str) -> str:
    """``host`` lower-case, without a trailing dot."""
    return host.rstrip(".").lower()


def literal_address(host: str) -> IPAddress | None:
    """The address a literal-IP host names; ValueError for legacy numeric IPv4 spellings."""
    if ":" in host:
        try:
            return ip_address(host)
        except ValueError:
            raise ValueError(f"host {host} is not a valid IPv6 address") from None
    if _ends_in_number(host):
        try:
            return IPv4Address(host)
        except ValueError:
            raise ValueError(
                f"host {host} is a numeric address not written as a dotted quad; "
                "write it as four decimal numbers, for example 192.0.2.1"
            ) from None
    return None


def _ends_in_number(host: str) -> bool:
    """WHATWG URL's test for a host that browsers parse as an IPv4 number."""
    last = host.rsplit(".", 1)[-1]
    if last.isascii() and last.isdigit():
        return True
    return last[:2] == "0x" and all(c in string.hexdigits for c in last[2:])


@dataclass(frozen=True, slots=True)
class AllowList:
    """``SIDECAR_REMOTE_IMAGE_ALLOWED_DOMAINS``: literal addresses and domain suffixes."""

    ips: frozenset[IPAddress] = frozenset()
    domains: tuple[str, ...] = ()

    @classmethod
    def parse(cls, entries: Sequence[str]) -> AllowList:
        """Split entries into literal addresses and IDNA-encoded domain suffixes."""
        ips: set[IPAddress] = set()
        domains: list[str] = []
        for entry in entries:
            cleaned = entry.strip().removeprefix("*.").strip(".").lower()
            try:
                ips.add(ip_address(cleaned.strip("[]")))
                continue
            except ValueError:
                pass
            try:
                raw = URL.build(scheme="http", host=cleaned).raw_host
            except ValueError:
                raw = None
            if not raw or _ends_in_number(raw):
                raise ConfigurationError(
                    f"SIDECAR_REMOTE_IMAGE_ALLOWED_DOMAINS entry {entry!r} is not a host name"
                )
            domains.append(raw)
        return cls(frozenset(ips), tuple(domains))

    def allows(self, host: str, literal: IPAddress | None) -> bool:
        """Whether the normalised ``host`` (``literal`` if it is an IP) may be fetched.

        An empty list allows every host; a literal address must be listed itself.
        """
        if not (self.ips or self.domains):
            return True
        if literal is not None:
            return literal in self.ips
        return any(host == d or host.endswith("." + d) for d in self.domains)
