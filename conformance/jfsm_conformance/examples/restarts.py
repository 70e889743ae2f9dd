"""Drivers that declare `durableRestart` and break what it promises (decisions R140, R141):
each must end in exit 1 under the right requirement, never in exit 2.

- `lease_outlives` (a command, `LEASE_OUTLIVES`): the reference driver on a state directory
  that several processes share (`jfsm driver --state {state} --shared`) with no `--owner`,
  so every process is a new owner; restarted, it finds its own games leased by its killed
  predecessor for the lease's length and answers `store_locked`: JF-ERR-018.
- `forgets_on_restart` (a factory): the reference over memory stores, declaring
  `durableRestart`; its answer to the protocol's `restart` op forgets every game: JF-ATOM-004.
  It has no `restart()` method, so in process the suite sends it the op, as it does over
  HTTP:

```
jfsm conformance --driver python:jfsm_conformance.examples.restarts:forgets_on_restart
python -m jfsm_conformance.examples.restarts forgets_on_restart --http 0 --token T
jfsm conformance --driver "stdio:python -m jfsm.cli driver --state {state} --shared"
```
"""

from __future__ import annotations

import argparse
import os
import shlex
import sys
from typing import Any

from jfsm_conformance.examples.broken import BrokenDriver

__all__ = ["LEASE_OUTLIVES", "forgets_on_restart", "main"]

LEASE_OUTLIVES = (
    f"stdio:{shlex.quote(sys.executable)} -m jfsm.cli driver --state {{state}} --shared"
)


class _ForgetsOnRestart(BrokenDriver):
    """Declares `durableRestart`; `restart` starts over with a new, empty reference."""

    def __init__(self) -> None:
        super().__init__()
        self.hello_args: dict[str, Any] = {}

    async def bend_hello(self, message: dict[str, Any]) -> dict[str, Any]:
        self.hello_args = dict(message.get("args") or {})
        reply = await self.inner.handle(message)
        if reply.get("ok"):
            reply["result"]["capabilities"]["durableRestart"] = True
        return reply

    async def bend_restart(self, message: dict[str, Any]) -> dict[str, Any]:
        from jfsm.driver import reference_driver

        await self.inner.close()
        self.inner = reference_driver()
        await self.call("hello", self.hello_args)
        return {"id": message.get("id"), "ok": True, "result": {}}


def forgets_on_restart() -> BrokenDriver:
    return _ForgetsOnRestart()


def main(argv: list[str] | None = None) -> int:
    """Serve `forgets_on_restart` over HTTP on 127.0.0.1 (its URL on stderr's first line)."""
    parser = argparse.ArgumentParser(prog="python -m jfsm_conformance.examples.restarts")
    parser.add_argument("factory", choices=["forgets_on_restart"])
    parser.add_argument("--http", type=int, required=True, metavar="PORT")
    parser.add_argument("--token", help="bearer token (default: $JFSM_DRIVER_TOKEN)")
    args = parser.parse_args(argv)
    from jfsm.driver import serve_http

    token = args.token or os.environ.get("JFSM_DRIVER_TOKEN") or None
    driver: Any = forgets_on_restart()  # its handle takes the dict the server decodes
    serve_http(driver, args.http, token=token)
    return 0


if __name__ == "__main__":
    sys.exit(main())
