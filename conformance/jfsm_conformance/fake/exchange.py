"""One exchange with the fake compress.v2, however it travelled: the request its core sees,
the response it gives, and the fixed facts of the endpoint (loopback, path, size cap)."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

__all__ = ["LOOPBACK", "MAX_REQUEST_BYTES", "PATH", "RESET", "FakeRequest", "FakeResponse"]

LOOPBACK = "127.0.0.1"
PATH = "/v2/compress"
MAX_REQUEST_BYTES = 32 * 1024 * 1024


@dataclass
class FakeRequest:
    """One HTTP request as the fake's core sees it: `body` is None when it was not read
    (no valid `Content-Length`, or one past `MAX_REQUEST_BYTES`)."""

    method: str
    path: str
    headers: list[tuple[str, str]]
    body: bytes | None
    parsed: Any = None  # the body, parsed, once the checks got that far

    def header(self, name: str) -> str | None:
        """The first value of header `name` (case-insensitive), or None."""
        found = self.header_all(name)
        return found[0] if found else None

    def header_all(self, name: str) -> list[str]:
        """Every value of header `name` (case-insensitive), in order."""
        return [v for k, v in self.headers if k.lower() == name.lower()]


@dataclass(frozen=True)
class FakeResponse:
    """What the core answers: a status and body (`chunked` hides the length), or `reset`
    (drop the connection, sending nothing)."""

    status: int = 200
    body: bytes = b""
    headers: tuple[tuple[str, str], ...] = ()
    chunked: bool = False
    reset: bool = False


RESET = FakeResponse(status=0, reset=True)
