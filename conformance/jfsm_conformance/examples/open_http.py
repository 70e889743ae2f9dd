"""A broken HTTP driver (for `tests/suite/test_hostile.py`): the reference driver
served over HTTP, except that a request with any Host is answered, the hole DNS rebinding
uses to reach a local service from a web page: JF-ERR-011.

```
python -m jfsm_conformance.examples.open_http --http PORT [--token T] [--state DIR]
```
"""

from __future__ import annotations

import sys

import jfsm.driver.http


def _any_host(value: str) -> bool:
    return True


def main(argv: list[str]) -> int:
    """Serve `jfsm driver ARGV...` with the Host check left out."""
    jfsm.driver.http._loopback_host = _any_host
    from jfsm.cli import main as cli

    return cli(["driver", *argv])


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
