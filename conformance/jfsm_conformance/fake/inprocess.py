"""The fake compress.v2 in process: an `httpx` transport (sync and async) that serves an
`answer` function with no socket. A `reset` raises `httpx.ReadError`; a blocking answer
(`delay`, `hold`) blocks a worker thread (async) or the caller (sync).
"""

from __future__ import annotations

import asyncio

import httpx

from jfsm_conformance.fake.exchange import MAX_REQUEST_BYTES, FakeRequest, FakeResponse
from jfsm_conformance.fake.http import Answer

__all__ = ["InProcess"]


def _request_of(request: httpx.Request, content: bytes) -> FakeRequest:
    length = request.headers.get("content-length")
    size = int(length) if length is not None and length.isdigit() else None
    body = content[:size] if size is not None and size <= MAX_REQUEST_BYTES else None
    path = request.url.raw_path.decode("ascii")
    return FakeRequest(request.method, path, request.headers.multi_items(), body)


def _response_of(answer: FakeResponse) -> httpx.Response:
    if answer.reset:
        raise httpx.ReadError("connection reset by the fake")
    headers = [("Content-Type", "application/json"), *answer.headers]
    if answer.chunked:
        headers.append(("Transfer-Encoding", "chunked"))
        return httpx.Response(answer.status, headers=headers, stream=httpx.ByteStream(answer.body))
    return httpx.Response(answer.status, headers=headers, content=answer.body)


class InProcess(httpx.BaseTransport, httpx.AsyncBaseTransport):
    """Serves `answer` to httpx clients, sync or async, as if over HTTP."""

    def __init__(self, answer: Answer) -> None:
        self.answer = answer

    def handle_request(self, request: httpx.Request) -> httpx.Response:
        return _response_of(self.answer(_request_of(request, request.read())))

    async def handle_async_request(self, request: httpx.Request) -> httpx.Response:
        content = await request.aread()
        return _response_of(await asyncio.to_thread(self.answer, _request_of(request, content)))
