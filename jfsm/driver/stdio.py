"""The driver protocol over stdin/stdout: JSON lines, answered concurrently.

Input is read in chunks of at most 1 MiB and split at newlines, so memory stays bounded
whatever arrives: a line longer than the spec's `message_max_bytes` is answered with an
`invalid_input` error (id null) as soon as it crosses the limit, and the rest of it is
discarded up to the next newline (JF-ERR-009). Every other non-blank line gets exactly one
reply, in whatever order the messages finish (JF-ERR-008); at most 1024 are in flight, and
reading waits while they are. The server stops at EOF or after
answering `shutdown`, then closes the driver. Stdin may be a pipe, a socket, a terminal, a
regular file (`jfsm driver < requests.jsonl`) or a device (`< /dev/null`); the last two are
read in a thread.
"""

from __future__ import annotations

import asyncio
import inspect
import os
import stat
import sys
from collections.abc import Awaitable, Callable, Coroutine, Mapping
from typing import Any, BinaryIO, Protocol

from jfsm.driver.wire import Refusal, decode, encode, refusal_reply
from jfsm.spec import constants

__all__ = ["LineSplitter", "MessageHandler", "serve_stdio"]

CHUNK = 1 << 20
IN_FLIGHT = 1024  # messages answered concurrently; reading waits beyond (backpressure)


class MessageHandler(Protocol):
    """What a transport serves: `handle` answers one message, `close` ends (a coroutine,
    or a plain method for a handler with nothing to wait for)."""

    def handle(self, message: Mapping[str, Any]) -> Awaitable[dict[str, Any]]: ...

    def close(self) -> Awaitable[None] | None: ...


async def close_handler(driver: MessageHandler) -> None:
    """Close `driver`, awaiting its `close` when that is a coroutine."""
    closed = driver.close()
    if inspect.isawaitable(closed):
        await closed


class LineSplitter:
    """Split a byte stream into lines of at most `limit` bytes (pure; no I/O).

    `feed(chunk)` returns the events it completes: `bytes` for a line (without its newline),
    `Refusal` for a line that crossed the limit (its remaining bytes up to the next newline
    are dropped). `end()` returns the last line if the stream did not end with a newline.
    """

    def __init__(self, limit: int) -> None:
        self.limit = limit
        self._buffer = bytearray()
        self._discarding = False

    def feed(self, chunk: bytes) -> list[bytes | Refusal]:
        events: list[bytes | Refusal] = []
        start = 0
        while start <= len(chunk):
            newline = chunk.find(b"\n", start)
            end = len(chunk) if newline < 0 else newline
            if not self._discarding:
                if len(self._buffer) + (end - start) > self.limit:
                    self._buffer.clear()
                    self._discarding = True
                    events.append(
                        Refusal(
                            f"line exceeds the limit of {self.limit} bytes; discarded up to "
                            "the next newline"
                        )
                    )
                else:
                    self._buffer += chunk[start:end]
            if newline < 0:
                break
            if not self._discarding:
                events.append(bytes(self._buffer))
            self._buffer.clear()
            self._discarding = False
            start = newline + 1
        return events

    def end(self) -> bytes | None:
        line = None if self._discarding or not self._buffer else bytes(self._buffer)
        self._buffer.clear()
        return line


async def _chunks(stdin: Any) -> Callable[[], Coroutine[Any, Any, bytes]]:
    """How to read the next chunk of `stdin` (b"" at EOF) without blocking the loop: a pipe,
    socket or terminal through the loop's pipe transport; anything else, which the event
    loop cannot watch (a regular file: `jfsm driver < requests.jsonl`; a device such as
    `/dev/null`), by reads in a thread."""
    fd = stdin.fileno()
    mode = os.fstat(fd).st_mode
    if stat.S_ISFIFO(mode) or stat.S_ISSOCK(mode) or (stat.S_ISCHR(mode) and os.isatty(fd)):
        reader = asyncio.StreamReader(limit=2 * CHUNK)
        loop = asyncio.get_running_loop()
        await loop.connect_read_pipe(lambda: asyncio.StreamReaderProtocol(reader), stdin)
        return lambda: reader.read(CHUNK)
    return lambda: asyncio.to_thread(os.read, fd, CHUNK)


async def serve_stdio(
    driver: MessageHandler,
    *,
    stdin: Any = None,
    stdout: BinaryIO | None = None,
) -> None:
    """Serve JSON lines on stdin/stdout until EOF or `shutdown`; messages run concurrently."""
    read = await _chunks(stdin if stdin is not None else sys.stdin)
    out = stdout if stdout is not None else sys.stdout.buffer
    out_lock = asyncio.Lock()
    tasks: set[asyncio.Task[None]] = set()
    stop = asyncio.Event()

    async def write(reply: dict[str, Any]) -> None:
        data = encode(reply) + b"\n"
        async with out_lock:
            out.write(data)
            out.flush()

    async def answer(line: bytes) -> None:
        message = decode(line)
        if isinstance(message, Refusal):
            await write(refusal_reply(message))
            return
        reply = await driver.handle(message)
        if isinstance(message, dict) and message.get("op") == "shutdown" and reply.get("ok"):
            stop.set()
        await write(reply)

    slots = asyncio.Semaphore(IN_FLIGHT)

    async def dispatch(event: bytes | Refusal) -> None:
        job: Callable[[], Awaitable[None]]
        if isinstance(event, Refusal):
            job = lambda: write(refusal_reply(event))  # noqa: E731
        elif event.strip():
            job = lambda: answer(event)  # noqa: E731
        else:
            return
        await slots.acquire()

        async def run() -> None:
            try:
                await job()
            finally:
                slots.release()

        task = asyncio.create_task(run())
        tasks.add(task)
        task.add_done_callback(tasks.discard)

    splitter = LineSplitter(constants().message_max_bytes)
    stopped = asyncio.create_task(stop.wait())
    try:
        while not stop.is_set():
            reading = asyncio.create_task(read())
            await asyncio.wait({reading, stopped}, return_when=asyncio.FIRST_COMPLETED)
            if not reading.done():
                reading.cancel()
                break
            chunk = reading.result()
            if not chunk:
                last = splitter.end()
                if last is not None:
                    await dispatch(last)
                break
            for event in splitter.feed(chunk):
                await dispatch(event)
        while tasks:
            await asyncio.gather(*list(tasks), return_exceptions=True)
    finally:
        stopped.cancel()
        await close_handler(driver)
