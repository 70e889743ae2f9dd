"""Broken HTTP drivers (for `tests/suite/test_hostile.py`): the reference driver served over
HTTP with one guard left out.

```
python -m jfsm_conformance.examples.open_http [--hole HOLE[,HOLE...]] --http PORT
        [--token T] [--state DIR]
```

- `host` (the default): a request with any Host is answered, the hole DNS rebinding uses to
  reach a local service from a web page: JF-ERR-011.
- `slots`: a connection that never sends a request head is never closed (no
  `auth_timeout_seconds`, no budget of its own), so a local process without the token keeps
  as many sockets open as it likes: JF-ERR-017.
- `order`: the token is checked before anything else, so a request from a foreign Host
  without the token is answered 401, not 421 (every request is still refused): JF-ERR-019.
- `slots-last`: a slot is taken only once every other rule of the head has passed, so with
  every slot held a request with the wrong Content-Type is answered 415, not 503:
  JF-ERR-019.
- `close`: no hole, a choice: every answer says `Connection: close` and its connection
  closes (no keep-alive, which the spec allows). With `slots-last` it shows that the suite
  holds no slot it cannot keep: the held-slots probe is then not covered, never a 415
  blamed on the order.
"""

from __future__ import annotations

import dataclasses
import hmac
import sys
from typing import Any

import jfsm.driver.http

HOLES = ("host", "slots", "order", "slots-last", "close")
_SPEC_LIMITS = jfsm.driver.http.http_limits
_CHECK_HEAD = jfsm.driver.http._Connection._check_head
_RESPONSE = jfsm.driver.http.h11.Response


def _any_host(value: str) -> bool:
    return True


def _no_slot_guard() -> jfsm.driver.http.HttpLimits:
    limits = _SPEC_LIMITS()
    return dataclasses.replace(limits, auth_timeout=1e6, unauthenticated_connections=10**6)


def _token_first(self: Any, request: Any) -> bool:
    """The reference's checks of a request head, with the token's taken first."""
    auth = [value for name, value in request.headers if name.lower() == b"authorization"]
    given = auth[0] if len(auth) == 1 else b""
    if not (given[:7].lower() == b"bearer " and hmac.compare_digest(given[7:], self.token)):
        raise jfsm.driver.http._Refused(401, "missing or wrong bearer token")
    return bool(_CHECK_HEAD(self, request))


def _slot_last(self: Any, request: Any) -> bool:
    """The reference's checks of a request head, with the slot taken after all of them."""
    admit, admitted = self.admit, self.admitted
    self.admit = lambda: True
    try:
        scrape = bool(_CHECK_HEAD(self, request))
    finally:
        self.admit = admit
    if not admitted:
        self.admitted = False
        if not admit():
            raise jfsm.driver.http._Refused(503, "every connection slot is busy")
        self.admitted = True
    return scrape


def _closing_response(*args: Any, headers: Any = (), **kwargs: Any) -> Any:
    """An `h11.Response` that says `Connection: close` (h11 then closes after it)."""
    return _RESPONSE(*args, headers=[*headers, ("Connection", "close")], **kwargs)


def main(argv: list[str]) -> int:
    """Serve `jfsm driver ARGV...` with the guards `--hole` names (comma-separated) left
    out."""
    holes = ["host"]
    if argv[:1] == ["--hole"]:
        holes, argv = argv[1].split(","), argv[2:]
    for hole in holes:
        if hole not in HOLES:
            known = ", ".join(HOLES)
            print(f"open_http: --hole takes some of {known}, not {hole!r}", file=sys.stderr)
            return 2
    for hole in holes:
        if hole == "host":
            jfsm.driver.http._loopback_host = _any_host
        elif hole == "order":
            jfsm.driver.http._Connection._check_head = _token_first  # type: ignore[method-assign]
        elif hole == "slots-last":
            jfsm.driver.http._Connection._check_head = _slot_last  # type: ignore[method-assign]
        elif hole == "close":
            jfsm.driver.http.h11.Response = _closing_response  # type: ignore[misc,assignment]
        else:
            jfsm.driver.http.http_limits = _no_slot_guard  # type: ignore[assignment]
    from jfsm.cli import main as cli

    return cli(["driver", *argv])


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
