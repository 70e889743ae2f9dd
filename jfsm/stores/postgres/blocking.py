"""The PostgreSQL store for synchronous code: the native async `PostgresStore` driven from a
private event loop thread (`jfsm.private_loop`: one per process, started on first use, a
daemon, the loop `SyncGameEngine` runs on).

`BlockingPostgresStore.open(...)` takes the arguments of `PostgresStore.open`; its methods
are those of the store, blocking until the store's coroutine is done on the private loop.
The games of every `BlockingPostgresStore` of a process share that loop's pool. Errors are
the store's, raised in the caller's thread. Do not call it from a coroutine: it blocks the
caller's loop (await `PostgresStore` there).
"""

from __future__ import annotations

from collections.abc import Mapping
from types import TracebackType
from typing import Any

from jfsm.image import StoreImage
from jfsm.private_loop import private_loop, run, submit
from jfsm.projection import Projection
from jfsm.stores.postgres.store import PostgresStore

__all__ = ["BlockingPostgresStore", "private_loop", "run", "submit"]


class BlockingPostgresStore:
    """A `PostgresStore` with blocking methods (see the module docstring)."""

    durable = True

    def __init__(self, store: PostgresStore) -> None:
        self.store = store

    @classmethod
    def open(cls, conninfo: str, game_id: str, **kwargs: Any) -> BlockingPostgresStore:
        return cls(run(PostgresStore.open(conninfo, game_id, **kwargs)))

    @property
    def image(self) -> StoreImage:
        return self.store.image

    @property
    def game_id(self) -> str:
        return self.store.game_id

    @property
    def token(self) -> int:
        return self.store.token

    @property
    def seq(self) -> int:
        return self.store.seq

    @property
    def state(self) -> str:
        return self.store.state

    @property
    def created(self) -> bool:
        return self.store.created

    def confirm(self) -> None:
        run(self.store.confirm())

    def renew(self) -> bool:
        return run(self.store.renew())

    def commit(self, projection: Projection) -> None:
        run(self.store.commit(projection))

    def checkpoint(self) -> None:
        run(self.store.checkpoint())

    def seed(self, values: Mapping[str, bytes]) -> None:
        run(self.store.seed(values))

    def remove(self) -> None:
        run(self.store.remove())

    def close(self) -> None:
        run(self.store.close())

    def __enter__(self) -> BlockingPostgresStore:
        return self

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self.close()

    def __repr__(self) -> str:
        return f"Blocking{self.store!r}"
