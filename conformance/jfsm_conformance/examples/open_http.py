"""Broken HTTP drivers (for `tests/suite/test_hostile.py`): the reference driver served over
HTTP with one guard left out.

```
python -m jfsm_conformance.examples.open_http [--hole HOLE] --http PORT [--token T]
        [--state DIR]
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
"""

from __future__ import annotations

import dataclasses
import hmac
import sys
from typing import Any

import jfsm.driver.http

HOLES = ("host", "slots", "order", "slots-last")
_SPEC_LIMITS = jfsm.driver.http.http_limits
_CHECK_HEAD = jfsm.driver.http._Connection._check_head


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


def main(argv: list[str]) -> int:
    """Serve `jfsm driver ARGV...` with the guard `--hole` names left out."""
    hole = "host"
    if argv[:1] == ["--hole"]:
        hole, argv = argv[1], argv[2:]
    if hole not in HOLES:
        print(f"open_http: --hole takes one of {', '.join(HOLES)}, not {hole!r}", file=sys.stderr)
        return 2
    if hole == "host":
        jfsm.driver.http._loopback_host = _any_host
    elif hole == "order":
        jfsm.driver.http._Connection._check_head = _token_first  # type: ignore[method-assign]
    elif hole == "slots-last":
        jfsm.driver.http._Connection._check_head = _slot_last  # type: ignore[method-assign]
    else:
        jfsm.driver.http.http_limits = _no_slot_guard  # type: ignore[assignment]
    from jfsm.cli import main as cli

    return cli(["driver", *argv])


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
