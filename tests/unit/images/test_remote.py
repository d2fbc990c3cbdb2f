"""images.remote: URL image probing: Range windows, redirects, the address gate and pinning.

Every connection goes to an aiohttp test server on 127.0.0.1. Fake host names reach it through
a stub resolver. The ``connections`` fixture records each address aiohttp dials and fails the
test if one is not 127.0.0.1. Refusal cases map names to forbidden addresses and assert that
the server saw no request.
"""

from __future__ import annotations

import asyncio
import io
import shutil
import socket
import ssl
import subprocess
import time
from collections.abc import AsyncIterator, Awaitable, Callable
from dataclasses import dataclass, field
from ipaddress import IPv4Address, IPv6Address, ip_address
from pathlib import Path
from typing import Any

import aiohappyeyeballs
import pytest
from aiohttp import web
from PIL import Image
from pytest_aiohttp import AiohttpServer
from yarl import URL

from sidecar.errors import ConfigurationError, NotAnImageError, TruncatedImageError
from sidecar.images.addresses import is_public_address
from sidecar.images.remote import (
    RemoteImageFetchError,
    RemoteImagePolicy,
    RemoteImageProber,
    RemoteImageRefusedError,
)
from tests.support.imaging import image_bytes

LOOPBACK = ip_address("127.0.0.1")
UNSPECIFIED = "0.0.0.0"  # noqa: S104  # an address to refuse, never one to bind
NOT_LISTED = "not in SIDECAR_REMOTE_IMAGE_ALLOWED_DOMAINS"
KIB = 1024
MIB = 1024 * KIB
BIG_BODY_BYTES = 64 * MIB


def only_loopback(ip: IPv4Address | IPv6Address) -> bool:
    return ip == LOOPBACK


def jpeg_with_metadata_before_sof(width: int, height: int, metadata_bytes: int) -> bytes:
    """A valid JPEG whose EXIF and XMP segments push SOF ``metadata_bytes`` into the file."""
    exif = Image.Exif()
    exif[0x0112] = 1  # orientation: as stored
    exif[0x010E] = "x" * 60_000  # ImageDescription, to make a large EXIF block
    buf = io.BytesIO()
    Image.new("RGB", (width, height), (10, 120, 200)).save(buf, "JPEG", exif=exif.tobytes())
    jpeg = buf.getvalue()
    padding = b""
    while len(padding) + 60_000 < metadata_bytes:
        body = b"http://ns.adobe.com/xap/1.0/\x00" + b" " * (60_000 - 29)
        padding += b"\xff\xe1" + (len(body) + 2).to_bytes(2) + body
    return jpeg[:2] + padding + jpeg[2:]


PNG = image_bytes(640, 480, "PNG")
EXIF_JPEG = jpeg_with_metadata_before_sof(320, 200, 100_000)


@dataclass
class Site:
    """The one test server: what it was asked and how much it sent."""

    port: int = 0
    requests: list[tuple[str, str | None, str | None]] = field(default_factory=list)
    streamed_bytes: int = 0
    stream_finished: bool = False
    stream_ended: asyncio.Event = field(default_factory=asyncio.Event)

    def url(self, host: str, path: str, **query: str) -> str:
        return str(URL.build(scheme="http", host=host, port=self.port, path=path, query=query))

    @property
    def paths(self) -> list[str]:
        return [path for path, _, _ in self.requests]

    @property
    def ranges(self) -> list[str | None]:
        return [r for _, r, _ in self.requests]


def ranged(body: bytes, request: web.Request) -> web.Response:
    """Serve ``bytes=0-N`` like a file server: 206 with Content-Range."""
    header = request.headers.get("Range", "")
    if not header.startswith("bytes=0-"):
        return web.Response(body=body)
    end = min(int(header.removeprefix("bytes=0-")), len(body) - 1)
    return web.Response(
        status=206,
        body=body[: end + 1],
        headers={"Content-Range": f"bytes 0-{end}/{len(body)}"},
    )


def make_app(site: Site) -> web.Application:
    routes = web.RouteTableDef()

    @web.middleware
    async def record(
        request: web.Request, handler: Callable[[web.Request], Awaitable[web.StreamResponse]]
    ) -> web.StreamResponse:
        site.requests.append((request.path, request.headers.get("Range"), request.host))
        return await handler(request)

    @routes.get("/img.png")
    async def img_png(request: web.Request) -> web.Response:
        return ranged(PNG, request)

    @routes.get("/exif.jpg")
    async def exif_jpg(request: web.Request) -> web.Response:
        return ranged(EXIF_JPEG, request)

    @routes.get("/exif-no-range.jpg")
    async def exif_no_range(request: web.Request) -> web.Response:
        return web.Response(body=EXIF_JPEG)

    @routes.get("/tiny.png")
    async def tiny(request: web.Request) -> web.Response:
        return ranged(PNG[:12], request)

    @routes.get("/page.html")
    async def page(request: web.Request) -> web.Response:
        return ranged(b"<!doctype html><title>not an image</title>" * 10, request)

    @routes.get("/endless.png")
    async def endless(request: web.Request) -> web.StreamResponse:
        resp = web.StreamResponse(headers={"Content-Length": str(len(PNG) + BIG_BODY_BYTES)})
        try:
            await resp.prepare(request)
            await resp.write(PNG)
            chunk = bytes(64 * KIB)
            while site.streamed_bytes < BIG_BODY_BYTES:
                await resp.write(chunk)
                site.streamed_bytes += len(chunk)
            site.stream_finished = True
        finally:
            site.stream_ended.set()
        return resp

    @routes.get("/slow-headers.png")
    async def slow_headers(request: web.Request) -> web.Response:
        await asyncio.sleep(10)
        return ranged(PNG, request)

    @routes.get("/trickle.jpg")
    async def trickle(request: web.Request) -> web.StreamResponse:
        resp = web.StreamResponse()
        await resp.prepare(request)
        for offset in range(len(EXIF_JPEG)):
            await resp.write(EXIF_JPEG[offset : offset + 1])
            await asyncio.sleep(0.05)
        return resp

    @routes.get("/status/{code}")
    async def status(request: web.Request) -> web.Response:
        return web.Response(status=int(request.match_info["code"]), text="nope")

    @routes.get("/redirect-without-location")
    async def no_location(request: web.Request) -> web.Response:
        return web.Response(status=302)

    @routes.get("/range-without-content-range.png")
    async def range_without_content_range(request: web.Request) -> web.Response:
        return web.Response(status=206, body=PNG[:100])

    @routes.get("/wrong-range.png")
    async def wrong_range(request: web.Request) -> web.Response:
        return web.Response(
            status=206, body=PNG[100:200], headers={"Content-Range": f"bytes 100-199/{len(PNG)}"}
        )

    @routes.get("/redirect")
    async def redirect(request: web.Request) -> web.Response:
        return web.Response(status=302, headers={"Location": request.query["to"]})

    @routes.get("/chain/{n}")
    async def chain(request: web.Request) -> web.Response:
        n = int(request.match_info["n"])
        location = "/img.png" if n == 0 else f"/chain/{n - 1}"
        return web.Response(status=307, headers={"Location": location})

    @routes.get("/loop")
    async def loop(request: web.Request) -> web.Response:
        return web.Response(status=301, headers={"Location": "/loop"})

    app = web.Application(middlewares=[record])
    app.add_routes(routes)
    return app


@pytest.fixture
async def site(aiohttp_server: AiohttpServer) -> Site:
    site = Site()
    server = await aiohttp_server(make_app(site))
    assert server.port is not None
    site.port = server.port
    return site


@pytest.fixture(autouse=True)
def connections(monkeypatch: pytest.MonkeyPatch) -> list[str]:
    """Every address aiohttp dials; anything but 127.0.0.1 fails the test before a packet."""
    dialled: list[str] = []
    real = aiohappyeyeballs.start_connection

    async def guarded(addr_infos: list[Any], *args: Any, **kwargs: Any) -> socket.socket:
        addresses = [str(info[4][0]) for info in addr_infos]
        dialled.extend(addresses)
        assert set(addresses) <= {"127.0.0.1"}, f"tried to connect to {addresses}"
        return await real(addr_infos, *args, **kwargs)

    monkeypatch.setattr(aiohappyeyeballs, "start_connection", guarded)
    return dialled


class StubResolver:
    """Maps fake names to chosen addresses and records every lookup."""

    def __init__(self, table: dict[str, list[str]]) -> None:
        self.table = table
        self.calls: list[tuple[str, int]] = []

    async def __call__(self, host: str, port: int) -> list[str]:
        self.calls.append((host, port))
        if host not in self.table:
            raise socket.gaierror(socket.EAI_NONAME, "Name or service not known")
        return list(self.table[host])


class RebindingResolver(StubResolver):
    """Answers 127.0.0.1 the first time a name is asked, then 10.0.0.1."""

    async def __call__(self, host: str, port: int) -> list[str]:
        answer = await super().__call__(host, port)
        return answer if len(self.calls) == 1 else ["10.0.0.1"]


LOCAL_NAMES = {n: ["127.0.0.1"] for n in ("images.test", "cdn.images.test", "other.test")}


@pytest.fixture
async def make_prober() -> AsyncIterator[Callable[..., RemoteImageProber]]:
    probers: list[RemoteImageProber] = []

    def make(
        resolver: StubResolver | None = None,
        *,
        address_allowed: Callable[[IPv4Address | IPv6Address], bool] = only_loopback,
        **policy: Any,
    ) -> RemoteImageProber:
        prober = RemoteImageProber(
            RemoteImagePolicy(**policy),
            resolver=resolver or StubResolver(LOCAL_NAMES),
            address_allowed=address_allowed,
        )
        probers.append(prober)
        return prober

    yield make
    for prober in probers:
        await prober.close()


# --- Range windows ----------------------------------------------------------------------------


async def test_probe_reads_header_from_first_range_window_when_server_honours_range(
    site: Site, make_prober: Callable[..., RemoteImageProber]
) -> None:
    header = await make_prober().probe(site.url("images.test", "/img.png"))
    assert (header.width_px, header.height_px) == (640, 480)
    assert site.requests == [("/img.png", "bytes=0-16383", f"images.test:{site.port}")]


async def test_probe_stops_reading_after_window_when_server_ignores_range(
    site: Site, make_prober: Callable[..., RemoteImageProber]
) -> None:
    header = await make_prober().probe(site.url("images.test", "/endless.png"))
    assert (header.width_px, header.height_px) == (640, 480)
    await asyncio.wait_for(site.stream_ended.wait(), timeout=2)  # we closed, not drained
    assert not site.stream_finished
    assert site.streamed_bytes < BIG_BODY_BYTES // 4  # window + socket buffers, ~4 MiB


async def test_probe_widens_range_window_when_exif_block_precedes_sof(
    site: Site, make_prober: Callable[..., RemoteImageProber]
) -> None:
    header = await make_prober().probe(site.url("images.test", "/exif.jpg"))
    assert (header.width_px, header.height_px) == (320, 200)
    assert site.ranges == ["bytes=0-16383", "bytes=0-65535", "bytes=0-262143"]


async def test_probe_keeps_reading_one_response_when_server_ignores_range_and_header_is_late(
    site: Site, make_prober: Callable[..., RemoteImageProber]
) -> None:
    header = await make_prober().probe(site.url("images.test", "/exif-no-range.jpg"))
    assert (header.width_px, header.height_px) == (320, 200)
    assert site.paths == ["/exif-no-range.jpg"]


@pytest.mark.parametrize("path", ["/exif.jpg", "/exif-no-range.jpg"], ids=["206", "200"])
async def test_probe_refuses_when_header_is_past_max_bytes(
    site: Site, make_prober: Callable[..., RemoteImageProber], path: str
) -> None:
    prober = make_prober(max_bytes=64 * KIB)
    with pytest.raises(RemoteImageFetchError, match="header not found in the first 65536 bytes"):
        await prober.probe(site.url("images.test", path))


async def test_probe_reports_truncated_image_when_file_ends_before_header(
    site: Site, make_prober: Callable[..., RemoteImageProber]
) -> None:
    url = site.url("images.test", "/tiny.png")
    with pytest.raises(TruncatedImageError, match=f"remote image {url}: "):
        await make_prober().probe(url)


async def test_probe_passes_on_probe_errors_naming_the_url_when_bytes_are_not_an_image(
    site: Site, make_prober: Callable[..., RemoteImageProber]
) -> None:
    url = site.url("images.test", "/page.html")
    with pytest.raises(NotAnImageError, match=f"remote image {url}: ") as caught:
        await make_prober().probe(url)
    assert caught.value.param == "image_url"


# --- Fetch failures ---------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("path", "reason"),
    [
        ("/status/404", "answered HTTP 404"),
        ("/status/500", "answered HTTP 500"),
        ("/status/204", "answered HTTP 204"),
        ("/redirect-without-location", "HTTP 302 without a Location"),
        ("/wrong-range.png", "range that does not start at byte 0"),
        ("/range-without-content-range.png", "range that does not start at byte 0"),
    ],
    ids=["404", "500", "204", "redirect-without-location", "range-not-at-zero", "no-content-range"],
)
async def test_probe_raises_fetch_error_naming_url_when_server_misbehaves(
    site: Site, make_prober: Callable[..., RemoteImageProber], path: str, reason: str
) -> None:
    url = site.url("images.test", path)
    with pytest.raises(RemoteImageFetchError, match=reason) as caught:
        await make_prober().probe(url)
    assert caught.value.message.startswith(f"remote image {url}: ")
    assert caught.value.status == 400
    assert caught.value.param == "image_url"


async def test_probe_raises_fetch_error_when_nothing_listens(
    make_prober: Callable[..., RemoteImageProber],
) -> None:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port = sock.getsockname()[1]
    with pytest.raises(RemoteImageFetchError, match=f"could not connect to images.test:{port}"):
        await make_prober().probe(f"http://images.test:{port}/img.png")


@pytest.mark.parametrize(
    ("answer", "error", "reason"),
    [
        (None, RemoteImageFetchError, r"host odd\.test does not resolve \(.*not known\)"),
        ([], RemoteImageFetchError, r"host odd\.test does not resolve$"),
        (["not-an-ip"], RemoteImageRefusedError, "resolves to something that is not an IP"),
    ],
    ids=["unknown-name", "empty-answer", "garbage-answer"],
)
async def test_probe_raises_clear_error_when_host_does_not_resolve_to_addresses(
    site: Site,
    make_prober: Callable[..., RemoteImageProber],
    answer: list[str] | None,
    error: type[Exception],
    reason: str,
) -> None:
    resolver = StubResolver({} if answer is None else {"odd.test": answer})
    with pytest.raises(error, match=reason):
        await make_prober(resolver).probe(site.url("odd.test", "/img.png"))
    assert site.requests == []


async def raw_server(reply: bytes) -> asyncio.Server:
    """A TCP server on 127.0.0.1 that reads one request head, sends ``reply`` and hangs up."""

    async def serve(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        await reader.readuntil(b"\r\n\r\n")
        writer.write(reply)
        await writer.drain()
        writer.close()
        await writer.wait_closed()

    return await asyncio.start_server(serve, "127.0.0.1", 0)


@pytest.mark.parametrize(
    ("reply", "reason"),
    [
        (b"", "the server closed the connection before answering"),
        (b"SPDY/9 banana\r\n\r\n", r"the fetch failed \(\w+\)"),
    ],
    ids=["hang-up", "not-http"],
)
async def test_probe_raises_fetch_error_when_server_breaks_http(
    make_prober: Callable[..., RemoteImageProber], reply: bytes, reason: str
) -> None:
    server = await raw_server(reply)
    port = server.sockets[0].getsockname()[1]
    try:
        with pytest.raises(RemoteImageFetchError, match=reason):
            await make_prober().probe(f"http://images.test:{port}/img.png")
    finally:
        server.close()
        await server.wait_closed()


@pytest.mark.parametrize(
    "path", ["/slow-headers.png", "/trickle.jpg"], ids=["slow-headers", "trickling-body"]
)
async def test_probe_times_out_within_budget_when_server_is_slow(
    site: Site, make_prober: Callable[..., RemoteImageProber], path: str
) -> None:
    prober = make_prober(timeout_seconds=0.3)
    started = time.monotonic()
    with pytest.raises(RemoteImageFetchError, match=r"no header within 0\.3 s \(timeout\)"):
        await prober.probe(site.url("images.test", path))
    assert time.monotonic() - started < 0.3 + 0.5


async def test_probe_truncates_long_urls_in_messages(
    site: Site, make_prober: Callable[..., RemoteImageProber]
) -> None:
    url = site.url("images.test", "/status/404", pad="p" * 1000)
    with pytest.raises(RemoteImageFetchError) as caught:
        await make_prober().probe(url)
    assert url[:150] in caught.value.message
    assert "…" in caught.value.message
    assert len(caught.value.message) < 300


# --- The gate: schemes, allow-list, addresses, spellings --------------------------------------


@pytest.mark.parametrize(
    "url",
    [
        "ftp://images.test/img.png",
        "file:///etc/passwd",
        "gopher://images.test:70/_GET",
        "data:image/png;base64,iVBORw0KGgo=",
        "javascript:alert(1)",
        "/relative/img.png",
    ],
    ids=["ftp", "file", "gopher", "data", "javascript", "no-scheme"],
)
async def test_probe_refuses_non_http_schemes(
    make_prober: Callable[..., RemoteImageProber], url: str
) -> None:
    resolver = StubResolver(LOCAL_NAMES)
    with pytest.raises(RemoteImageRefusedError, match="only http and https URLs can be fetched"):
        await make_prober(resolver).probe(url)
    assert resolver.calls == []


@pytest.mark.parametrize(
    "url",
    ["http://[::1", "http:///img.png", "http://[1:2:3]/img.png"],
    ids=["broken-ipv6-literal", "no-host", "bad-ipv6-address"],
)
async def test_probe_refuses_urls_it_cannot_parse(
    make_prober: Callable[..., RemoteImageProber], url: str
) -> None:
    reasons = r"not a valid URL|has no host|not a valid IPv6 address"
    with pytest.raises(RemoteImageRefusedError, match=reasons):
        await make_prober().probe(url)


@pytest.mark.parametrize(
    ("allowed", "host", "admitted"),
    [
        (("images.test",), "images.test", True),
        (("images.test",), "cdn.images.test", True),
        (("IMAGES.test.",), "cdn.images.test", True),
        (("*.images.test",), "cdn.images.test", True),
        (("other.test", "images.test"), "images.test", True),
        (("cdn.images.test",), "images.test", False),
        (("images.test",), "badimages.test", False),
        (("images.test",), "images.test.other.test", False),
        (("127.0.0.1",), "127.0.0.1", True),
        (("images.test",), "127.0.0.1", False),
        (("10.0.0.1",), "127.0.0.1", False),
    ],
    ids=[
        "exact",
        "subdomain",
        "entry-case-and-trailing-dot",
        "wildcard-entry",
        "second-entry",
        "parent-of-entry",
        "shared-suffix-not-a-label",
        "entry-as-prefix",
        "literal-ip-entry",
        "literal-ip-not-listed",
        "other-literal-ip-listed",
    ],
)
async def test_probe_applies_allow_list_to_host_and_subdomains(
    site: Site,
    make_prober: Callable[..., RemoteImageProber],
    allowed: tuple[str, ...],
    host: str,
    admitted: bool,
) -> None:
    resolver = StubResolver({n: ["127.0.0.1"] for n in ("images.test", "cdn.images.test")})
    resolver.table |= {"badimages.test": ["127.0.0.1"], "images.test.other.test": ["127.0.0.1"]}
    prober = make_prober(resolver, allowed_domains=allowed)
    url = site.url(host, "/img.png")
    if admitted:
        assert (await prober.probe(url)).width_px == 640
    else:
        with pytest.raises(RemoteImageRefusedError, match=NOT_LISTED):
            await prober.probe(url)
        assert (site.requests, resolver.calls) == ([], [])


@pytest.mark.parametrize("entry", ["", "1.2.3", "0.0.1", "0x7f.1", "a b"], ids=str)
def test_prober_rejects_allow_list_entries_that_are_not_host_names(entry: str) -> None:
    with pytest.raises(ConfigurationError, match="ALLOWED_DOMAINS entry"):
        RemoteImageProber(RemoteImagePolicy(allowed_domains=(entry,)))


FORBIDDEN = [
    "127.0.0.1",
    "10.0.0.1",
    "192.168.1.1",
    "172.16.0.1",
    "169.254.169.254",
    "100.64.0.1",
    "100.100.100.200",
    UNSPECIFIED,
    "::1",
    "fe80::1",
    "fd00::1",
    "fd00:ec2::254",
    "::ffff:127.0.0.1",
    "2002:7f00:1::",
]


@pytest.mark.parametrize("address", FORBIDDEN, ids=FORBIDDEN)
async def test_probe_refuses_before_connecting_when_name_resolves_to_forbidden_address(
    site: Site, make_prober: Callable[..., RemoteImageProber], connections: list[str], address: str
) -> None:
    prober = make_prober(StubResolver({"evil.test": [address]}), address_allowed=is_public_address)
    with pytest.raises(RemoteImageRefusedError, match="resolves to a non-public address") as e:
        await prober.probe(site.url("evil.test", "/img.png"))
    assert f"({ip_address(address)})" in e.value.message
    assert (site.requests, connections) == ([], [])


async def test_probe_refuses_when_any_resolved_address_is_forbidden(
    site: Site, make_prober: Callable[..., RemoteImageProber], connections: list[str]
) -> None:
    resolver = StubResolver({"evil.test": ["8.8.8.8", "10.0.0.1"]})
    with pytest.raises(RemoteImageRefusedError, match=r"\(10\.0\.0\.1\)"):
        await make_prober(resolver, address_allowed=is_public_address).probe(
            site.url("evil.test", "/img.png")
        )
    assert (site.requests, connections) == ([], [])


@pytest.mark.parametrize("address", FORBIDDEN, ids=FORBIDDEN)
async def test_probe_refuses_literal_forbidden_addresses_before_connecting(
    site: Site, make_prober: Callable[..., RemoteImageProber], connections: list[str], address: str
) -> None:
    resolver = StubResolver({})
    host = f"[{address}]" if ":" in address else address
    with pytest.raises(RemoteImageRefusedError, match="non-public address"):
        await make_prober(resolver, address_allowed=is_public_address).probe(
            f"http://{host}:{site.port}/img.png"
        )
    assert (site.requests, connections, resolver.calls) == ([], [], [])


async def test_probe_uses_system_resolver_by_default_and_refuses_localhost(
    site: Site, connections: list[str]
) -> None:
    prober = RemoteImageProber(RemoteImagePolicy())
    with pytest.raises(RemoteImageRefusedError, match="localhost resolves to a non-public"):
        await prober.probe(site.url("localhost", "/img.png"))
    assert (site.requests, connections) == ([], [])


@pytest.mark.parametrize(
    "host",
    ["2130706433", "0x7f.1", "0x7f000001", "0177.0.0.1", "127.1", "127.0.0.1.1", "1.0x0.0.1"],
    ids=["decimal", "hex-short", "hex", "octal", "short", "five-parts", "hex-part"],
)
async def test_probe_refuses_numeric_hosts_not_written_as_dotted_quads(
    site: Site, make_prober: Callable[..., RemoteImageProber], connections: list[str], host: str
) -> None:
    resolver = StubResolver({host: ["127.0.0.1"]})
    with pytest.raises(RemoteImageRefusedError, match="not written as a dotted quad"):
        await make_prober(resolver).probe(f"http://{host}:{site.port}/img.png")
    assert (site.requests, connections, resolver.calls) == ([], [], [])


async def test_probe_fetches_literal_dotted_quad_that_policy_allows(
    site: Site, make_prober: Callable[..., RemoteImageProber], connections: list[str]
) -> None:
    resolver = StubResolver({})
    header = await make_prober(resolver).probe(f"http://127.0.0.1:{site.port}/img.png")
    assert header.width_px == 640
    assert (connections, resolver.calls) == (["127.0.0.1"], [])


# --- Redirects --------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("location", "final_host"),
    [("http://cdn.images.test:{port}/img.png", "cdn.images.test"), ("/img.png", "images.test")],
    ids=["absolute-to-allowed-subdomain", "relative"],
)
async def test_probe_follows_redirect_to_allowed_host(
    site: Site, make_prober: Callable[..., RemoteImageProber], location: str, final_host: str
) -> None:
    prober = make_prober(allowed_domains=("images.test",))
    target = location.format(port=site.port)
    header = await prober.probe(site.url("images.test", "/redirect", to=target))
    assert header.width_px == 640
    assert site.requests[-1] == ("/img.png", "bytes=0-16383", f"{final_host}:{site.port}")


ON_LIST = ("images.test",)


@pytest.mark.parametrize(
    ("location", "allowed", "reason"),
    [
        ("http://evil.test:{port}/img.png", (), r"evil\.test resolves to a non-public address"),
        ("http://169.254.169.254/latest/", (), r"non-public address \(169\.254\.169\.254\)"),
        ("http://[::ffff:10.0.0.1]:{port}/img.png", (), r"non-public address \(::ffff:a00:1\)"),
        ("http://2130706433:{port}/img.png", (), "not written as a dotted quad"),
        ("http://other.test:{port}/img.png", ON_LIST, NOT_LISTED),
        ("http://evil.test:{port}/img.png", ON_LIST, NOT_LISTED),
        ("file:///etc/passwd", ON_LIST, "only http and https"),
        ("http://[::1", ON_LIST, "redirect to an invalid URL"),
    ],
    ids=[
        "name-to-private",
        "metadata-literal",
        "mapped-v6-literal",
        "decimal-ip",
        "off-list",
        "off-list-and-private",
        "file",
        "unparsable",
    ],
)
async def test_probe_refuses_redirect_to_forbidden_target(
    site: Site,
    make_prober: Callable[..., RemoteImageProber],
    connections: list[str],
    location: str,
    allowed: tuple[str, ...],
    reason: str,
) -> None:
    resolver = StubResolver(LOCAL_NAMES | {"evil.test": ["10.0.0.1"]})
    prober = make_prober(resolver, allowed_domains=allowed)
    url = site.url("images.test", "/redirect", to=location.format(port=site.port))
    with pytest.raises(RemoteImageRefusedError, match=reason) as caught:
        await prober.probe(url)
    assert site.paths == ["/redirect"]
    assert connections == ["127.0.0.1"]
    assert resolver.calls == [("images.test", site.port)] + (
        [("evil.test", site.port)] if allowed == () and "evil" in location else []
    )
    if "invalid" not in reason:
        assert "(redirected to " in caught.value.message


@pytest.mark.parametrize(
    ("path", "admitted"),
    [("/chain/3", False), ("/chain/2", True), ("/loop", False)],
    ids=["four-hops", "three-hops", "loop"],
)
async def test_probe_caps_redirects(
    site: Site, make_prober: Callable[..., RemoteImageProber], path: str, admitted: bool
) -> None:
    prober = make_prober(max_redirects=3)
    url = site.url("images.test", path)
    if admitted:
        assert (await prober.probe(url)).width_px == 640
        assert len(site.requests) == 4
    else:
        with pytest.raises(RemoteImageRefusedError, match="more than 3 redirects"):
            await prober.probe(url)
        assert len(site.requests) == 4


# --- Pinning ----------------------------------------------------------------------------------


async def test_probe_resolves_each_host_once_and_connects_to_pinned_address_despite_rebinding(
    site: Site, make_prober: Callable[..., RemoteImageProber], connections: list[str]
) -> None:
    resolver = RebindingResolver(LOCAL_NAMES)
    url = site.url("images.test", "/redirect", to="/exif.jpg")
    header = await make_prober(resolver).probe(url)
    assert (header.width_px, header.height_px) == (320, 200)
    assert resolver.calls == [("images.test", site.port)]
    assert site.paths == ["/redirect", "/exif.jpg", "/exif.jpg", "/exif.jpg"]
    assert {host for _, _, host in site.requests} == {f"images.test:{site.port}"}
    assert connections
    assert set(connections) == {"127.0.0.1"}


async def test_probe_pins_per_probe_so_a_later_probe_resolves_again(
    site: Site, make_prober: Callable[..., RemoteImageProber]
) -> None:
    resolver = RebindingResolver(LOCAL_NAMES)
    prober = make_prober(resolver)
    await prober.probe(site.url("images.test", "/img.png"))
    with pytest.raises(RemoteImageRefusedError, match=r"\(10\.0\.0\.1\)"):
        await prober.probe(site.url("images.test", "/img.png"))
    assert len(site.requests) == 1


@pytest.fixture(scope="module")
def tls_files(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, Path]:
    openssl = shutil.which("openssl")
    if openssl is None:  # pragma: no cover  # openssl ships with every CI image we use
        pytest.skip("the openssl command is needed to make a test certificate")
    folder = tmp_path_factory.mktemp("tls")
    cert, key = folder / "cert.pem", folder / "key.pem"
    subprocess.run(  # noqa: S603  # fixed arguments, no shell
        [openssl, "req", "-x509", "-newkey", "ec", "-pkeyopt", "ec_paramgen_curve:prime256v1",
         "-nodes", "-days", "1", "-subj", "/CN=images.test", "-addext",
         "subjectAltName=DNS:images.test", "-keyout", str(key), "-out", str(cert)],
        check=True,
        capture_output=True,
    )  # fmt: skip
    return cert, key


@pytest.mark.parametrize(
    ("host", "verified"), [("images.test", True), ("other.test", False)], ids=["match", "mismatch"]
)
async def test_probe_verifies_tls_against_url_host_while_connecting_to_pinned_address(
    aiohttp_server: AiohttpServer,
    tls_files: tuple[Path, Path],
    connections: list[str],
    host: str,
    verified: bool,
) -> None:
    cert, key = tls_files
    server_ctx = ssl.create_default_context(ssl.Purpose.CLIENT_AUTH)
    server_ctx.load_cert_chain(cert, key)
    site = Site()
    server = await aiohttp_server(make_app(site), ssl=server_ctx)
    client_ctx = ssl.create_default_context(cafile=str(cert))
    prober = RemoteImageProber(
        RemoteImagePolicy(),
        resolver=StubResolver(LOCAL_NAMES),
        address_allowed=only_loopback,
        ssl_context=client_ctx,
    )
    url = f"https://{host}:{server.port}/img.png"
    if verified:
        assert (await prober.probe(url)).width_px == 640
        assert site.requests == [("/img.png", "bytes=0-16383", f"{host}:{server.port}")]
    else:
        with pytest.raises(RemoteImageFetchError, match="TLS certificate verification failed"):
            await prober.probe(url)
        assert site.requests == []
    assert connections == ["127.0.0.1"]


async def test_prober_refuses_to_probe_after_close(
    site: Site, make_prober: Callable[..., RemoteImageProber]
) -> None:
    prober = make_prober()
    await prober.close()
    with pytest.raises(RuntimeError, match="closed"):
        await prober.probe(site.url("images.test", "/img.png"))
