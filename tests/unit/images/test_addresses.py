"""images.addresses: which addresses a URL image may be fetched from (public ones only), in
every notation that hides a private one (IPv4-mapped, 6to4, Teredo, NAT64).

The policy applied to real fetches: ``test_remote.py``; end to end:
``tests/e2e/test_abuse_remote.py``.
"""

from __future__ import annotations

from ipaddress import ip_address

import pytest

from sidecar.images.addresses import is_public_address

UNSPECIFIED = "0.0.0.0"  # noqa: S104  # an address to refuse, never one to bind

ADDRESS_TABLE = [
    ("8.8.8.8", True),
    ("1.1.1.1", True),
    ("2001:4860:4860::8888", True),
    ("::ffff:8.8.8.8", True),
    ("2002:808:808::", True),
    ("64:ff9b::808:808", True),
    ("127.0.0.1", False),
    ("127.255.255.254", False),
    ("10.0.0.1", False),
    ("172.16.0.1", False),
    ("172.31.255.255", False),
    ("192.168.1.1", False),
    ("169.254.169.254", False),
    ("169.254.1.1", False),
    ("100.64.0.1", False),
    ("100.127.255.255", False),
    ("100.100.100.200", False),
    ("168.63.129.16", False),
    ("192.0.0.192", False),
    (UNSPECIFIED, False),
    ("0.1.2.3", False),
    ("224.0.0.1", False),
    ("239.255.255.250", False),
    ("240.0.0.1", False),
    ("255.255.255.255", False),
    ("192.0.2.1", False),
    ("198.18.0.1", False),
    ("::", False),
    ("::1", False),
    ("fe80::1", False),
    ("fe80::1%eth0", False),
    ("fec0::1", False),
    ("fd00::1", False),
    ("fc00::1", False),
    ("fd00:ec2::254", False),
    ("ff02::1", False),
    ("2001:db8::1", False),
    ("::ffff:127.0.0.1", False),
    ("::ffff:10.0.0.1", False),
    ("::ffff:169.254.169.254", False),
    ("::127.0.0.1", False),
    ("2002:7f00:1::", False),
    ("2002:a00:1::", False),
    ("2001:0:4136:e378:8000:63bf:80ff:fffe", False),
    ("64:ff9b::7f00:1", False),
    ("64:ff9b:1::a00:1", False),
]


@pytest.mark.parametrize(("address", "public"), ADDRESS_TABLE, ids=[a for a, _ in ADDRESS_TABLE])
def test_is_public_address_classifies_address(address: str, public: bool) -> None:
    assert is_public_address(ip_address(address)) is public
