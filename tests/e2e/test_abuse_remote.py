"""End to end, remote image URLs with ``SIDECAR_REMOTE_IMAGES=probe``: the sidecar is no SSRF proxy.

``test_remote_images`` proves the guarded fetcher module by module; these tests send the same
attacks through a running sidecar. Only one address is reachable: an image site on 127.0.0.1,
which the policy admits as an exception to "public addresses only" (``is_public_address``
decides everything else, unchanged). Host names come from a stub resolver. A tripwire on
``socket.connect`` fails the test if anything tries to reach an address other than 127.0.0.1.
"""

from __future__ import annotations

import asyncio
import socket
from collections.abc import AsyncIterator, Callable
from dataclasses import dataclass, field
from ipaddress import IPv4Address, IPv6Address, ip_address
from typing import Any

import aiohttp
import orjson
import pytest
from aiohttp import web
from prometheus_client import CollectorRegistry

from sidecar.images.addresses import is_public_address
from sidecar.serve.app import make_remote_prober
from sidecar.serve.server import RunningSidecar, running_sidecar
from sidecar.settings import Settings
from sidecar.standin import StandinServer
from tests.support.imaging import chat, image_bytes, image_url_part, messages
from tests.support.proxy_helpers import MESSAGES, expected, ledger_is_idle, post
from tests.support.sidecars import QWEN
from tests.support.waiting import eventually

LOOPBACK = IPv4Address("127.0.0.1")
MAX_BYTES = 64 << 10
TIMEOUT_SECONDS = 0.5


@pytest.fixture(autouse=True)
def only_loopback_connections(monkeypatch: pytest.MonkeyPatch) -> None:
    """Fail loudly, before any packet leaves, if anything connects beyond 127.0.0.1."""
    connect, connect_ex = socket.socket.connect, socket.socket.connect_ex

    def check(address: Any) -> None:
        if isinstance(address, tuple) and address[0] not in ("127.0.0.1", "localhost"):
            raise AssertionError(f"a test tried to connect to {address!r}")

    def guarded_connect(self: socket.socket, address: Any) -> None:
        check(address)
        connect(self, address)

    def guarded_connect_ex(self: socket.socket, address: Any) -> int:
        check(address)
        return connect_ex(self, address)

    monkeypatch.setattr(socket.socket, "connect", guarded_connect)
    monkeypatch.setattr(socket.socket, "connect_ex", guarded_connect_ex)


@dataclass
class ImageSite:
    """A loopback image server that records each request's path and Host header."""

    port: int = 0
    requests: list[tuple[str, str]] = field(default_factory=list)
    cancelled: list[str] = field(default_factory=list)

    def url(self, host: str, path: str) -> str:
        return f"http://{host}:{self.port}{path}"


PHOTO = image_bytes(1600, 1200)
LATE_HEADER = b"\xff\xd8" + (b"\xff\xe1\xff\xfe" + b"\x00" * 65532) * 40 + PHOTO[2:]


@pytest.fixture
async def image_site() -> AsyncIterator[ImageSite]:
    site = ImageSite()

    async def serve(request: web.Request) -> web.StreamResponse:
        site.requests.append((request.path, request.headers.get("Host", "")))
        name = request.match_info["name"]
        if name == "photo.jpg":
            return web.Response(body=PHOTO, content_type="image/jpeg")
        if name == "redirect":
            raise web.HTTPFound(request.query["to"])
        if name == "loop":
            raise web.HTTPFound("/loop")
        if name == "late-header.jpg":  # ignores Range: the whole 2.6 MB, header at the end
            return web.Response(body=LATE_HEADER, content_type="image/jpeg")
        if name == "slow.jpg":
            try:
                await asyncio.sleep(30)
            except asyncio.CancelledError:
                site.cancelled.append(name)
                raise
        return web.Response(status=404)

    app = web.Application()
    app.router.add_get("/{name}", serve)
    runner = web.AppRunner(app, access_log=None, handler_cancellation=True, shutdown_timeout=1)
    await runner.setup()
    await web.TCPSite(runner, "127.0.0.1", 0).start()
    site.port = int(runner.addresses[0][1])
    yield site
    await runner.cleanup()


class StubResolver:
    """Host names the tests use, and the addresses an attacker would make them resolve to."""

    ANSWERS: dict[str, list[str]] = {  # noqa: RUF012 - read-only test data
        "images.test": ["127.0.0.1"],
        "metadata.test": ["169.254.169.254"],
        "private.test": ["10.0.0.5"],
        "loopback6.test": ["::1"],
        "mapped.test": ["::ffff:127.0.0.1"],
        "linklocal6.test": ["fe80::1"],
        "mixed.test": ["127.0.0.1", "10.0.0.1"],
        "nat64.test": ["64:ff9b::a00:1"],  # NAT64 of 10.0.0.1
    }

    def __init__(self) -> None:
        self.calls: list[str] = []
        self.rebinds = 0

    async def __call__(self, host: str, port: int) -> list[str]:
        self.calls.append(host)
        if host == "rebind.test":  # first a harmless answer, then the metadata service
            self.rebinds += 1
            return ["127.0.0.1"] if self.rebinds == 1 else ["169.254.169.254"]
        return self.ANSWERS.get(host, [])


def site_or_public(ip: IPv4Address | IPv6Address) -> bool:
    """The real policy, plus the one loopback address the image site listens on."""
    return ip == LOOPBACK or is_public_address(ip)


@dataclass
class Probing:
    sidecar: RunningSidecar
    resolver: StubResolver


@pytest.fixture
async def probing(standin: StandinServer) -> AsyncIterator[Probing]:
    settings = Settings(
        model=QWEN,
        upstream_url=standin.url,
        listen_host="127.0.0.1",
        port=0,
        metrics_port=0,
        remote_images="probe",
        remote_image_max_bytes=MAX_BYTES,
        remote_image_timeout_seconds=TIMEOUT_SECONDS,
        engine_poll_seconds=0,
    )
    resolver = StubResolver()
    prober = make_remote_prober(settings, resolver=resolver, address_allowed=site_or_public)
    async with running_sidecar(settings, registry=CollectorRegistry(), remote_prober=prober) as s:
        yield Probing(s, resolver)


def assert_refused(reply: Any, says: str) -> None:
    assert reply.status == 400, reply.body
    error = reply.json()["error"]
    assert (error["code"], error["type"]) == (400, "BadRequestError")
    assert error["message"].startswith("image 1 of 1: remote image ")
    assert says in error["message"]


FORBIDDEN = {
    "metadata-ipv4": ("http://169.254.169.254/latest/meta-data/", "non-public address"),
    "metadata-ipv6": ("http://[fd00:ec2::254]/latest/meta-data/", "non-public address"),
    "metadata-by-name": ("http://metadata.test/latest/meta-data/", "non-public address"),
    "loopback-other-than-the-site": ("http://127.0.0.2/x.jpg", "non-public address"),
    "loopback-ipv6": ("http://[::1]/x.jpg", "non-public address"),
    "loopback-ipv6-by-name": ("http://loopback6.test/x.jpg", "non-public address"),
    "ipv4-mapped-loopback": ("http://[::ffff:127.0.0.1]/x.jpg", "non-public address"),
    "ipv4-mapped-by-name": ("http://mapped.test/x.jpg", "non-public address"),
    "ipv4-mapped-private": ("http://[::ffff:10.0.0.1]/x.jpg", "non-public address"),
    "nat64-private-by-name": ("http://nat64.test/x.jpg", "non-public address"),
    "private-10": ("http://10.0.0.5/x.jpg", "non-public address"),
    "private-172": ("http://172.16.0.1/x.jpg", "non-public address"),
    "private-192": ("http://192.168.1.1/x.jpg", "non-public address"),
    "private-by-name": ("http://private.test/x.jpg", "non-public address"),
    "carrier-grade-nat": ("http://100.64.0.1/x.jpg", "non-public address"),
    "link-local-ipv4": ("http://169.254.1.1/x.jpg", "non-public address"),
    "link-local-ipv6-by-name": ("http://linklocal6.test/x.jpg", "non-public address"),
    "unspecified": ("http://0.0.0.0/x.jpg", "non-public address"),
    "any-answer-private": ("http://mixed.test/x.jpg", "non-public address (10.0.0.1)"),
    "decimal-ipv4": ("http://2130706433/x.jpg", "not written as a dotted quad"),
    "hex-ipv4": ("http://0x7f.1/x.jpg", "not written as a dotted quad"),
    "short-ipv4": ("http://127.1/x.jpg", "not written as a dotted quad"),
    "file-scheme": ("file:///etc/passwd", "not scheme 'file'"),
    "ftp-scheme": ("ftp://images.test/x.jpg", "not scheme 'ftp'"),
    "gopher-scheme": ("gopher://images.test:70/_GET", "not scheme 'gopher'"),
    "no-host": ("http:///x.jpg", "no host"),
    "unresolvable": ("http://nowhere.test/x.jpg", "does not resolve"),
}


@pytest.mark.parametrize(("url", "says"), FORBIDDEN.values(), ids=FORBIDDEN.keys())
async def test_proxy_refuses_a_url_image_before_connecting_when_it_leads_somewhere_forbidden(
    probing: Probing,
    standin: StandinServer,
    session: aiohttp.ClientSession,
    image_site: ImageSite,
    url: str,
    says: str,
) -> None:
    reply = await post(session, probing.sidecar, chat(image_url_part(url)))
    assert_refused(reply, says)
    assert image_site.requests == []
    assert standin.requests == []
    assert ledger_is_idle(probing.sidecar)


async def test_proxy_refuses_a_forbidden_url_image_on_messages_in_anthropics_shape(
    probing: Probing, standin: StandinServer, session: aiohttp.ClientSession
) -> None:
    block = {"type": "image", "source": {"type": "url", "url": "http://169.254.169.254/"}}
    reply = await post(session, probing.sidecar, messages(block), MESSAGES)
    assert reply.status == 400
    error = reply.json()
    assert error["type"] == "error"
    assert error["error"]["type"] == "invalid_request_error"
    assert "non-public address" in error["error"]["message"]
    assert standin.requests == []


REDIRECTS: dict[str, tuple[Callable[[ImageSite], str], str]] = {
    "to-metadata": (lambda site: "http://169.254.169.254/latest/meta-data/", "non-public"),
    "to-metadata-by-name": (lambda site: "http://metadata.test/", "non-public"),
    "to-ipv4-mapped": (lambda site: "http://[::ffff:10.0.0.1]/", "non-public"),
    "to-file": (lambda site: "file:///etc/passwd", "not scheme 'file'"),
    "to-decimal-ip": (lambda site: "http://2130706433/", "dotted quad"),
    "in-a-loop": (lambda site: site.url("images.test", "/loop"), "more than 3 redirects"),
}


@pytest.mark.parametrize(("target", "says"), REDIRECTS.values(), ids=REDIRECTS.keys())
async def test_proxy_refuses_a_url_image_whose_redirect_leads_somewhere_forbidden(
    probing: Probing,
    standin: StandinServer,
    session: aiohttp.ClientSession,
    image_site: ImageSite,
    target: Callable[[ImageSite], str],
    says: str,
) -> None:
    query = aiohttp.helpers.quote(target(image_site), safe="")
    url = image_site.url("images.test", f"/redirect?to={query}")
    reply = await post(session, probing.sidecar, chat(image_url_part(url)))
    assert_refused(reply, says)
    assert "redirected to" in reply.json()["error"]["message"]
    assert {path for path, _ in image_site.requests} <= {"/redirect", "/loop"}
    assert standin.requests == []
    assert ledger_is_idle(probing.sidecar)


async def test_proxy_follows_a_redirect_to_an_allowed_host_and_prices_the_image(
    probing: Probing, session: aiohttp.ClientSession, image_site: ImageSite
) -> None:
    target = aiohttp.helpers.quote(image_site.url("images.test", "/photo.jpg"), safe="")
    url = image_site.url("images.test", f"/redirect?to={target}")
    reply = await post(session, probing.sidecar, chat(image_url_part(url)))
    assert reply.status == 200, reply.body
    assert reply.prediction == expected([(1600, 1200)])
    assert [path for path, _ in image_site.requests] == ["/redirect", "/photo.jpg"]


async def test_proxy_connects_to_the_first_answer_when_dns_rebinds_to_the_metadata_service(
    probing: Probing, session: aiohttp.ClientSession, image_site: ImageSite
) -> None:
    # The redirect comes back to the same name: a second lookup would now say 169.254.169.254.
    target = aiohttp.helpers.quote(image_site.url("rebind.test", "/photo.jpg"), safe="")
    url = image_site.url("rebind.test", f"/redirect?to={target}")
    reply = await post(session, probing.sidecar, chat(image_url_part(url)))
    assert reply.status == 200, reply.body
    assert probing.resolver.calls == ["rebind.test"]  # resolved once, pinned for every hop
    assert [host for _, host in image_site.requests] == [f"rebind.test:{image_site.port}"] * 2
    # A new request resolves afresh, meets the metadata address, and is refused.
    reply = await post(session, probing.sidecar, chat(image_url_part(url)))
    assert_refused(reply, "non-public address (169.254.169.254)")
    assert len(image_site.requests) == 2


async def test_proxy_stops_reading_a_url_image_at_the_byte_cap(
    probing: Probing, standin: StandinServer, session: aiohttp.ClientSession, image_site: ImageSite
) -> None:
    url = image_site.url("images.test", "/late-header.jpg")
    reply = await post(session, probing.sidecar, chat(image_url_part(url)))
    assert_refused(reply, f"header not found in the first {MAX_BYTES} bytes")
    assert standin.requests == []
    assert ledger_is_idle(probing.sidecar)


async def test_proxy_gives_up_on_a_slow_image_server_within_the_remote_timeout(
    probing: Probing, standin: StandinServer, session: aiohttp.ClientSession, image_site: ImageSite
) -> None:
    loop = asyncio.get_running_loop()
    started = loop.time()
    reply = await post(
        session, probing.sidecar, chat(image_url_part(image_site.url("images.test", "/slow.jpg")))
    )
    assert TIMEOUT_SECONDS <= loop.time() - started < TIMEOUT_SECONDS + 1.0
    assert_refused(reply, "timeout")
    await eventually(lambda: image_site.cancelled == ["slow.jpg"])  # the fetch was closed
    assert standin.requests == []
    assert ledger_is_idle(probing.sidecar)


async def test_proxy_cancels_the_image_fetch_when_the_client_leaves_during_the_probe(
    probing: Probing, standin: StandinServer, session: aiohttp.ClientSession, image_site: ImageSite
) -> None:
    body = chat(image_url_part(image_site.url("images.test", "/slow.jpg")))
    client = asyncio.create_task(post(session, probing.sidecar, body))
    await eventually(lambda: len(image_site.requests) == 1)
    client.cancel()
    await eventually(lambda: image_site.cancelled == ["slow.jpg"], timeout_seconds=1)
    assert standin.requests == []
    assert ledger_is_idle(probing.sidecar)


def test_stub_resolver_answers_are_all_forbidden_by_the_real_policy() -> None:
    answers = [a for name, v in StubResolver.ANSWERS.items() if name != "images.test" for a in v]
    assert [a for a in answers if is_public_address(ip_address(a))] == []
    assert orjson.dumps(answers)  # plain data, nothing resolved for real
