"""One exception hierarchy with stable string codes.

Every error the engine raises is a `JfsmError`. Its `code` is stable and is used verbatim on
the conformance driver protocol; `state` says what the affected thing is in *after* the
error (errors never leave a half-applied change behind, so this is the state before the
call unless the error says otherwise). `details` carries the numbers a caller needs to act
(for example the bytes of a refused quota preflight).

```
JfsmError
├── InvalidInput          invalid_input
├── QuotaExceeded         quota_exceeded
├── CompressionPending    compression_pending   (retryable)
├── InvalidTransition     invalid_transition
│   └── BlockingCallInLoop invalid_transition (a RuntimeError too: await the async API)
├── StoreLocked           store_locked
│   └── StoreFenced       store_fenced
├── StoreCorrupted        store_corrupted
│   └── StoreHistoryLost  store_history_lost  (the database lost acknowledged writes)
├── StoreUnavailable      store_unavailable     (retryable)
│   └── StoreUnusable     store_unavailable     (not retryable: fix the setup)
└── TransportError        transport_error       (retryable)
```
"""

from __future__ import annotations

from typing import Any, ClassVar

__all__ = [
    "ERROR_CODES",
    "BlockingCallInLoop",
    "CompressionPending",
    "InvalidInput",
    "InvalidTransition",
    "JfsmError",
    "QuotaExceeded",
    "StoreCorrupted",
    "StoreFenced",
    "StoreHistoryLost",
    "StoreLocked",
    "StoreUnavailable",
    "StoreUnusable",
    "TransportError",
]


class JfsmError(Exception):
    """Base of every jfsm error; `code` is the stable protocol code."""

    code: ClassVar[str] = "error"
    retryable: ClassVar[bool] = False

    def __init__(self, message: str, *, state: str | None = None, **details: Any) -> None:
        super().__init__(message)
        self.message = message
        self.state = state
        self.details: dict[str, Any] = details

    def to_json(self) -> dict[str, Any]:
        """The error as the driver protocol carries it."""
        out: dict[str, Any] = {"code": self.code, "message": self.message}
        if self.retryable:
            out["retryable"] = True
        if self.state is not None:
            out["state"] = self.state
        if self.details:
            out["details"] = self.details
        return out


class InvalidInput(JfsmError):
    """The call's arguments are not acceptable (bad text, unknown id, reserved key...)."""

    code = "invalid_input"


class QuotaExceeded(JfsmError):
    """The change would take the footprint over the quota; nothing was written.

    `details` holds `current`, `would_be` and `quota`, all in bytes.
    """

    code = "quota_exceeded"


class CompressionPending(JfsmError):
    """A forced compression is still owed; the generation was refused. Retry later.

    `details["cause"]` names the failure outcome that kept it pending.
    """

    code = "compression_pending"
    retryable = True


class InvalidTransition(JfsmError):
    """The event is not allowed in the machine's current state; the state is unchanged."""

    code = "invalid_transition"


class BlockingCallInLoop(InvalidTransition, RuntimeError):
    """A blocking call (`SyncGameEngine`'s methods, `PostgresStore.open_sync`) was made from
    a running event loop, which it would stall; nothing ran. The message names the async
    call to await instead (decision R162)."""


class StoreLocked(JfsmError):
    """Another writer holds the store's lock (for the file store: an `flock` on its directory,
    which deleting files cannot defeat; `details["directory"]` names it), or, in a shared
    store, another owner's lease is live or a concurrent open of the game won
    (`details["game"]`, `details["owner"]`)."""

    code = "store_locked"


class StoreFenced(StoreLocked):
    """This store's ownership was taken over by a newer owner (a higher fencing token): the
    commit or checkpoint was refused with its own check (inside its transaction; by its place
    in its epoch's log) and nothing of it is visible to any reader. Close the store;
    reopening it is refused with `store_locked` while the new owner lives."""

    code = "store_fenced"


class StoreCorrupted(JfsmError):
    """The durable store is damaged outside its tail, a live file is missing, or a file no
    run of the store's protocol leaves is there; `details` names the file (and the byte
    offset when the damage has one). Nothing was changed: restore or remove the file."""

    code = "store_corrupted"


class StoreHistoryLost(StoreCorrupted):
    """The database lacks writes this process saw acknowledged (a failover promoted a node
    without them, a restore, a primary that came back and was followed): nothing was
    written, and every later write of this process to that database is refused, so no round
    number is written a second time. `details` says what was behind what. Not retryable: an
    operator restores the lost writes or accepts the loss, clears the database's mark
    (`jfsm pg-migrate URL --clear-history-lost`) and restarts the workers."""

    code = "store_history_lost"


class StoreUnavailable(JfsmError):
    """The store could not be opened, read or written (an I/O failure: permission denied,
    a read-only or full file system, a name too long, not a directory; `details` holds
    `errno` and `errno_name`), or is closed or broken; nothing of the change was written.
    Retry once the store is back (reopen a broken store)."""

    code = "store_unavailable"
    retryable = True


class StoreUnusable(StoreUnavailable):
    """The store cannot be used until an operator acts: wrong credentials, a missing
    database or role, a malformed connection string, a schema that is missing or of another
    version. Same code as `StoreUnavailable`, but not retryable: retrying changes nothing."""

    retryable = False


class TransportError(JfsmError):
    """compress.v2 could not be reached or answered outside its contract."""

    code = "transport_error"
    retryable = True


ERROR_CODES: tuple[str, ...] = tuple(
    cls.code
    for cls in (
        InvalidInput,
        QuotaExceeded,
        CompressionPending,
        InvalidTransition,
        StoreLocked,
        StoreCorrupted,
        StoreUnavailable,
        TransportError,
        StoreFenced,
        StoreHistoryLost,
    )
)
