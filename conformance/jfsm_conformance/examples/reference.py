"""The reference engine configured for speed under the suite: no backoff between retries.

```
jfsm conformance --driver python:jfsm_conformance.examples.reference:durable_without_backoff
```

The reference engine waits 0.5 s, then 1 s, between transport retries of compress.v2
(`jfsm.transport.HttpCompressor`). The suite scripts transport failures on purpose and does
not judge the backoff (JF-CALL-008 is verified by the engine's own tests), so on an idle
machine most of the standard profile's wall time is spent in those sleeps. This factory is
the durable reference driver with `backoff=0`: the same implementation, the same verdicts,
without the waiting.
"""

from __future__ import annotations

import atexit
import shutil
import tempfile

from jfsm.driver import ReferenceDriver
from jfsm.transport import HttpCompressor

__all__ = ["durable_without_backoff"]


def durable_without_backoff() -> ReferenceDriver:
    """The durable reference driver (file stores in a fresh temporary directory, removed
    when the process exits) whose compressor retries transport failures at once."""
    state = tempfile.mkdtemp(prefix="jfsm-driver-")
    atexit.register(shutil.rmtree, state, True)
    return ReferenceDriver(
        state,
        compressor_factory=lambda url, **kw: HttpCompressor(url, backoff=0.0, **kw),
        crash_injection=True,
    )
