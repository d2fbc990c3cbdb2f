"""Learn a remote image's size from its first bytes without becoming an SSRF proxy.

Used when ``SIDECAR_REMOTE_IMAGES=probe``. A probe is a short series of GETs carrying
``Range: bytes=0-N``. After each window the bytes go to a parser: ``images.probe.probe_bytes``
for images, ``video.probe.probe_video_prefix`` for videos (``probe_prefix``). On
``TruncatedImageError`` the window grows x4, up to ``max_bytes``. This module owns the fetch
loop and the gate; the gate's address and host rules are ``addresses``, and the DNS it asks
and pins is ``resolver``.

Invariants:

* **Every hop passes the same gate.** The first URL and each redirect target are checked for:
  an http(s) scheme, the allow-list, a host that is not a numeric IPv4 address in a legacy
  spelling (``2130706433``, ``0x7f.1``, ``127.1``), one DNS resolution per host, and every
  resolved address being public (``addresses.is_public_address``). aiohttp never follows
  redirects; we follow at most ``max_redirects`` ourselves.
* **Connections are pinned to the checked addresses.** Each probe owns a fresh ``TCPConnector``
  with its DNS cache off. Its resolver, ``resolver.PinnedResolver``, answers only with addresses
  the gate has already approved and raises for any other host, so it never falls back to DNS.
  The URL handed to aiohttp still carries the original host name. So the ``Host`` header is the
  original one, and for https aiohttp passes that same name as ``server_hostname``: SNI and
  certificate verification use the name the client wrote, while TCP goes to the checked address.
  A DNS answer that changes between the check and the connect (rebinding) cannot move the
  connection. The design is the same for both schemes. Rewriting the URL to the IP and passing
  ``server_hostname`` would also pin https, but it breaks the ``Host`` header for plain http.
  Because the connector is per probe, a pin never leaks into another probe.
* **Bounded time and bytes.** The whole probe, DNS included, runs under one ``asyncio.timeout``.
  The body is read incrementally and never past the current window. A server that ignores
  Range and answers 200 with a large body is cut off: the connection is closed, not drained.
* **No ambient authority.** No proxies from the environment, no cookies, no decompression
  (``Accept-Encoding: identity``).

Errors, all ``ImageError`` and therefore HTTP 400 naming the URL::

    ImageError
    ├── RemoteImageRefusedError   policy: scheme, allow-list, non-public address, redirects
    └── RemoteImageFetchError     the fetch failed: HTTP status, timeout, connection, size cap
"""

from __future__ import annotations

import asyncio
import contextlib
import ssl
from collections.abc import Callable
from dataclasses import dataclass
from ipaddress import ip_address
from typing import Generic, TypeVar

import aiohttp
from aiohttp import hdrs
from yarl import URL

from sidecar.errors import ImageError, TruncatedImageError
from sidecar.images.addresses import (
    AllowList,
    IPAddress,
    is_public_address,
    literal_address,
    normalise_host,
)
from sidecar.images.probe import ImageHeader, probe_bytes
from sidecar.images.resolver import PinnedResolver, Resolver, resolve_with_getaddrinfo
from sidecar.settings import VLLM_MAX_IMAGE_PIXELS

__all__ = [  # IPAddress, Resolver and the two defaults shape the prober's constructor
    "IPAddress",
    "RemoteImageFetchError",
    "RemoteImagePolicy",
    "RemoteImageProber",
    "RemoteImageRefusedError",
    "Resolver",
    "is_public_address",
    "resolve_with_getaddrinfo",
]

T = TypeVar("T")

_SCHEMES = frozenset({"http", "https"})
_REDIRECT_STATUSES = frozenset({301, 302, 303, 307, 308})
_WINDOW_GROWTH = 4
_URL_SHOWN_CHARS = 200
_USER_AGENT = "vlm-sidecar (image header probe)"


class RemoteImageRefusedError(ImageError):
    """Policy forbids fetching this URL: scheme, allow-list, address or redirects."""

    reason = "remote_image"


class RemoteImageFetchError(ImageError):
    """The image server could not give us the header: status, timeout, connection or size."""

    reason = "remote_image"


@dataclass(frozen=True, slots=True)
class RemoteImagePolicy:
    """What a probe may fetch, how much and for how long. Built from ``SIDECAR_REMOTE_IMAGE_*``."""

    allowed_domains: tuple[str, ...] = ()
    max_bytes: int = 1 << 20
    timeout_seconds: float = 5.0
    max_redirects: int = 3
    initial_window_bytes: int = 16 << 10
    max_image_pixels: int = VLLM_MAX_IMAGE_PIXELS


class RemoteImageProber:
    """Probes remote image URLs under one policy; safe to share across concurrent requests."""

    def __init__(
        self,
        policy: RemoteImagePolicy,
        *,
        resolver: Resolver | None = None,
        address_allowed: Callable[[IPAddress], bool] = is_public_address,
        ssl_context: ssl.SSLContext | None = None,
    ) -> None:
        """``address_allowed`` is for tests only; ``ssl_context`` None means system trust."""
        self.policy = policy
        self._allow_list = AllowList.parse(policy.allowed_domains)
        self._resolve = resolver or resolve_with_getaddrinfo
        self._address_allowed = address_allowed
        self._ssl: ssl.SSLContext | bool = ssl_context if ssl_context is not None else True
        self._closed = False
        # Wraps each fetch; the serving app makes it a trace span (images come before observe).
        self.fetch_span: Callable[[], contextlib.AbstractContextManager[object]] = (
            contextlib.nullcontext
        )

    async def probe(self, url: str) -> ImageHeader:
        """The image header at ``url``, fetching no more than ``policy.max_bytes``."""
        return await self.probe_prefix(url, self._image_header)

    async def probe_prefix(
        self, url: str, parse: Callable[[bytes], T], *, noun: str = "image"
    ) -> T:
        """``parse`` of the shortest prefix of ``url`` it accepts, under the same policy.

        ``parse`` raises ``TruncatedImageError`` to ask for a longer prefix; any exception that
        is not an ``ImageError`` ends the probe and propagates unchanged. ``noun`` names the
        media in messages (``remote video <url>: ...``).
        """
        if self._closed:
            raise RuntimeError("RemoteImageProber is closed")
        pins = PinnedResolver()
        connector = aiohttp.TCPConnector(resolver=pins, use_dns_cache=False, ssl=self._ssl)
        async with aiohttp.ClientSession(
            connector=connector,
            cookie_jar=aiohttp.DummyCookieJar(),
            auto_decompress=False,
            trust_env=False,
            timeout=aiohttp.ClientTimeout(),  # no aiohttp deadlines: the probe has one of its own
        ) as session:
            run = _ProbeRun(self, session, pins, url, parse, noun)
            try:
                with self.fetch_span():
                    async with asyncio.timeout(self.policy.timeout_seconds):
                        return await run.probe()
            except TimeoutError:
                raise run.fetch_error(
                    f"no header within {self.policy.timeout_seconds:g} s (timeout)"
                ) from None

    async def close(self) -> None:
        """Refuse further probes; connections belong to each probe and are already closed."""
        self._closed = True

    def _image_header(self, data: bytes) -> ImageHeader:
        return probe_bytes(data, max_image_pixels=self.policy.max_image_pixels)


class _ProbeRun(Generic[T]):
    """The state of one probe: where it started, where it is, and how much it may read."""

    def __init__(
        self,
        prober: RemoteImageProber,
        session: aiohttp.ClientSession,
        pins: PinnedResolver,
        url: str,
        parse: Callable[[bytes], T],
        noun: str,
    ) -> None:
        self.prober = prober
        self.parse = parse
        self.noun = noun
        self.policy = prober.policy
        self.session = session
        self.pins = pins
        self.original = url
        self.redirected_to: URL | None = None
        self.window = min(self.policy.initial_window_bytes, self.policy.max_bytes)

    def _where(self, reason: str) -> str:
        hop = ""
        if self.redirected_to is not None:
            hop = f" (redirected to {_shown(str(self.redirected_to))})"
        return f"remote {self.noun} {_shown(self.original)}{hop}: {reason}"

    def refused(self, reason: str) -> RemoteImageRefusedError:
        return RemoteImageRefusedError(self._where(reason))

    def fetch_error(self, reason: str) -> RemoteImageFetchError:
        return RemoteImageFetchError(self._where(reason))

    async def probe(self) -> T:
        try:
            url = URL(self.original)
        except (ValueError, TypeError):
            raise self.refused("not a valid URL") from None
        redirects = 0
        while True:
            await self._gate(url)
            headers = {
                hdrs.RANGE: f"bytes=0-{self.window - 1}",
                hdrs.ACCEPT_ENCODING: "identity",
                hdrs.USER_AGENT: _USER_AGENT,
            }
            try:
                async with self.session.get(url, headers=headers, allow_redirects=False) as resp:
                    if resp.status in _REDIRECT_STATUSES:
                        redirects += 1
                        if redirects > self.policy.max_redirects:
                            raise self.refused(f"more than {self.policy.max_redirects} redirects")
                        url = self.redirected_to = self._redirect_target(url, resp)
                        continue
                    header = await self._read(resp)
            except aiohttp.ClientError as exc:
                raise self.fetch_error(_describe_client_error(exc)) from None
            if header is not None:
                return header

    async def _gate(self, url: URL) -> None:
        """Refuse ``url`` unless its scheme, host and every address of the host are allowed."""
        if url.scheme not in _SCHEMES:
            shown = url.scheme or "none"
            raise self.refused(f"only http and https URLs can be fetched, not scheme {shown!r}")
        if not url.raw_host:
            raise self.refused("the URL has no host")
        host = normalise_host(url.raw_host)
        try:
            literal = literal_address(host)
        except ValueError as exc:
            raise self.refused(str(exc)) from None
        if not self.prober._allow_list.allows(host, literal):
            raise self.refused(f"host {host} is not in SIDECAR_REMOTE_IMAGE_ALLOWED_DOMAINS")
        if literal is not None:
            addresses = [literal]
        elif host in self.pins.addresses:
            addresses = self.pins.addresses[host]
        else:
            addresses = await self._resolve(host, url.port or 0)
        for ip in addresses:
            if not self.prober._address_allowed(ip):
                raise self.refused(f"host {host} resolves to a non-public address ({ip})")
        if literal is None:
            self.pins.addresses[host] = addresses

    async def _resolve(self, host: str, port: int) -> list[IPAddress]:
        try:
            answers = await self.prober._resolve(host, port)
        except OSError as exc:
            raise self.fetch_error(f"host {host} does not resolve ({exc})") from None
        if not answers:
            raise self.fetch_error(f"host {host} does not resolve")
        try:
            return [ip_address(a) for a in answers]
        except ValueError:
            raise self.refused(f"host {host} resolves to something that is not an IP") from None

    def _redirect_target(self, url: URL, resp: aiohttp.ClientResponse) -> URL:
        location = resp.headers.get(hdrs.LOCATION)
        if not location:
            raise self.fetch_error(f"the server answered HTTP {resp.status} without a Location")
        try:
            return url.join(URL(location)).with_fragment(None)
        except (ValueError, TypeError):
            raise self.refused(f"redirect to an invalid URL {_shown(location)}") from None

    async def _read(self, resp: aiohttp.ClientResponse) -> T | None:
        """The header, or None when the window has grown and must be asked for again."""
        if resp.status not in (200, 206):
            raise self.fetch_error(f"the image server answered HTTP {resp.status}")
        total: int | None = None
        if resp.status == 206:
            first, total = _content_range(resp.headers.get(hdrs.CONTENT_RANGE))
            if first != 0:
                raise self.fetch_error("the server answered a range that does not start at byte 0")
        data = bytearray()
        while True:
            data += await _read_up_to(resp.content, self.window - len(data))
            if resp.status == 206:
                complete = len(data) < self.window or (total is not None and len(data) >= total)
            else:
                complete = len(data) < self.window or resp.content.at_eof()
            try:
                return self.parse(bytes(data))
            except TruncatedImageError as exc:
                if complete:
                    raise TruncatedImageError(self._where(exc.message)) from None
                if self.window >= self.policy.max_bytes:
                    resp.close()
                    raise self.fetch_error(
                        f"header not found in the first {self.policy.max_bytes} bytes"
                    ) from None
            except ImageError as exc:
                raise type(exc)(self._where(exc.message), param=exc.param) from None
            self.window = min(self.window * _WINDOW_GROWTH, self.policy.max_bytes)
            if resp.status == 206:
                return None


async def _read_up_to(stream: aiohttp.StreamReader, n: int) -> bytes:
    """At most ``n`` bytes; fewer only at the end of the body."""
    parts: list[bytes] = []
    got = 0
    while got < n:
        chunk = await stream.read(n - got)
        if not chunk:
            break
        parts.append(chunk)
        got += len(chunk)
    return b"".join(parts)


def _content_range(header: str | None) -> tuple[int | None, int | None]:
    """First byte and full length from ``bytes FIRST-LAST/LENGTH``; None where unknown."""
    unit, _, spec = (header or "").strip().partition(" ")
    span, _, length = spec.partition("/")
    first = span.partition("-")[0]
    if unit.lower() != "bytes" or not first.isdigit():
        return None, None
    return int(first), int(length) if length.isdigit() else None


def _describe_client_error(exc: aiohttp.ClientError) -> str:
    if isinstance(exc, aiohttp.ClientConnectorCertificateError):
        return f"TLS certificate verification failed for {exc.host}"
    if isinstance(exc, aiohttp.ClientConnectorError):
        return f"could not connect to {exc.host}:{exc.port} ({exc.strerror or exc.os_error})"
    if isinstance(exc, aiohttp.ServerDisconnectedError):
        return "the server closed the connection before answering"
    return f"the fetch failed ({type(exc).__name__})"


def _shown(url: str) -> str:
    if len(url) <= _URL_SHOWN_CHARS:
        return url
    return url[: _URL_SHOWN_CHARS - 1] + "…"
