"""Broken drivers that wait without bound or trust what compress.v2 sends, one bound each
(for `tests/suite/test_waits.py`, and for trying the suite out):

```
jfsm conformance --driver python:jfsm_conformance.examples.waits:no_deadline
```

- `no_deadline`: declares `deadlineOverride` but keeps its own 120 s attempt deadline, so a
  hanging service holds the generation: JF-CALL-014.
- `no_size_cap`: reads a reply body of any size: JF-CALL-006.
- `trusts_identifiers`: accepts a reply whose `callId` or `error.code` is out of the reply
  schema's bounds: JF-CALL-013.
"""

from __future__ import annotations

import asyncio
import json
from typing import Any

from jfsm.driver import ReferenceDriver
from jfsm.transport import (
    _CAUGHT,
    HttpCompressor,
    Reply,
    _Buffer,
    _check_head,
    classify_exception,
)

__all__ = ["no_deadline", "no_size_cap", "trusts_identifiers"]


class _TrustsIdentifiers(HttpCompressor):
    """The reference transport with a lenient reply parser: any JSON with the right fields."""

    async def _send(self, body: bytes, key: str) -> Reply:
        buffer = _Buffer(self.max_response_bytes)
        try:
            async with asyncio.timeout(self.timeout):
                async with self._client.stream(
                    "POST", self.url, content=body, headers=self._headers(key)
                ) as response:
                    _check_head(response, buffer.cap)
                    async for chunk in response.aiter_bytes():
                        buffer.add(chunk)
        except _CAUGHT as exc:
            raise classify_exception(exc) from exc
        doc: Any = json.loads(bytes(buffer.data))
        if doc.get("ok"):
            return Reply(ok=True, call_id=str(doc.get("callId")), summary=doc["summary"])
        return Reply(ok=False, call_id=doc.get("callId"), error_code=str(doc["error"]["code"]))


def no_deadline() -> ReferenceDriver:
    return ReferenceDriver(compressor_factory=lambda url, **kw: HttpCompressor(url, backoff=0.0))


def no_size_cap() -> ReferenceDriver:
    return ReferenceDriver(
        compressor_factory=lambda url, **kw: HttpCompressor(
            url, backoff=0.0, max_response_bytes=1 << 31, **kw
        )
    )


def trusts_identifiers() -> ReferenceDriver:
    return ReferenceDriver(
        compressor_factory=lambda url, **kw: _TrustsIdentifiers(url, backoff=0.0, **kw)
    )
