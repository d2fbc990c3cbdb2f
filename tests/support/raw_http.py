"""HTTP/1.1 over a bare loopback socket, for tests that must control every byte and its timing.

aiohttp's client sends a whole request the way a polite client does; abuse tests need to send
half a header, trickle a body, or keep writing after the answer came, and to see exactly when
the server answers or hangs up.
"""

from __future__ import annotations

import asyncio
import contextlib
from dataclasses import dataclass
from typing import Any

import orjson
from multidict import CIMultiDict


@dataclass(frozen=True)
class RawReply:
    """One answer as it came off the wire."""

    status: int
    headers: CIMultiDict[str]
    body: bytes

    def json(self) -> Any:
        return orjson.loads(self.body)


class RawConnection:
    """One client connection to ``127.0.0.1:port``."""

    def __init__(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        self.reader = reader
        self.writer = writer
        self.sent_bytes = 0

    @classmethod
    async def open(cls, port: int) -> RawConnection:
        reader, writer = await asyncio.open_connection("127.0.0.1", port)
        return cls(reader, writer)

    async def send(self, data: bytes) -> None:
        self.writer.write(data)
        await self.writer.drain()
        self.sent_bytes += len(data)

    async def reply(self, timeout_seconds: float = 5.0) -> RawReply:
        """Read one answer: status line, headers and a Content-Length body."""
        async with asyncio.timeout(timeout_seconds):
            head = await self.reader.readuntil(b"\r\n\r\n")
            status_line, *lines = head.decode("latin-1").split("\r\n")
            headers: CIMultiDict[str] = CIMultiDict()
            for line in filter(None, lines):
                name, _, value = line.partition(":")
                headers.add(name.strip(), value.strip())
            length = int(headers.get("Content-Length", "0"))
            body = await self.reader.readexactly(length)
        return RawReply(int(status_line.split()[1]), headers, body)

    async def answer_waiting(self, wait_seconds: float) -> bool:
        """Whether the server has started an answer (or hung up) within ``wait_seconds``."""
        try:
            async with asyncio.timeout(wait_seconds):
                await self._wait_readable()
        except TimeoutError:
            return False
        return True

    async def _wait_readable(self) -> None:
        while not self.reader._buffer and not self.reader.at_eof():  # noqa: ASYNC110 - StreamReader has no public "data waiting" event
            await asyncio.sleep(0.005)

    async def closed_by_server(self, timeout_seconds: float) -> bool:
        """Whether the server closes the connection within ``timeout_seconds`` (data read and
        dropped on the way)."""
        try:
            async with asyncio.timeout(timeout_seconds):
                while await self.reader.read(65536):
                    pass
        except TimeoutError:
            return False
        except ConnectionResetError:
            return True
        return True

    async def close(self) -> None:
        self.writer.close()
        with contextlib.suppress(ConnectionResetError, BrokenPipeError):
            await self.writer.wait_closed()


def request_head(
    path: str, *, content_length: int | None = None, chunked: bool = False, **headers: str
) -> bytes:
    """A POST request line and headers; ``**headers`` use ``_`` for ``-``."""
    lines = [f"POST {path} HTTP/1.1", "Host: sidecar", "Content-Type: application/json"]
    if content_length is not None:
        lines.append(f"Content-Length: {content_length}")
    if chunked:
        lines.append("Transfer-Encoding: chunked")
    lines += [f"{name.replace('_', '-')}: {value}" for name, value in headers.items()]
    return ("\r\n".join(lines) + "\r\n\r\n").encode("latin-1")


def chunk(data: bytes) -> bytes:
    """One chunk of a chunked body."""
    return b"%x\r\n%s\r\n" % (len(data), data)
