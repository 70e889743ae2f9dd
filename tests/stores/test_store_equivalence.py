"""MemoryStore, FileStore and PostgresStore are one store: a single state machine drives them.

Every rule runs the same operation on both backends and on a deliberately naive model (plain
dicts, footprint recomputed from scratch with JCS), and the invariant compares all three
after every step: store, change log, checkpoint base and footprint. The file store is also
closed and reopened from its directory (with and without `verify`), or abandoned while open
and its files reopened (what a killed process leaves: the log with the unused zeros of its
preallocation), so replaying the log must rebuild the same image. Its log extents are tiny,
so commits extend the log often.

A `FileStore` of a directory shared by processes (the epoch format, decision R173) runs
alongside too: reopened, taken over while its old handle is still open (whose next commit
is fenced, nothing of it visible), and converted to the single-process format and back;
every takeover must keep the checkpoint base and the change log exactly.

With a PostgreSQL server (`test_memory_file_and_postgres_agree`), a `PostgresStore` of a fresh
game runs alongside: closed and reopened, or taken over by a new handle while the old one is
still open (the old handle's next commit is fenced and writes nothing). Group commit is on
(R152): a neighbour game gets every projection too, committed at the same time, and the two
must travel in one statement and both equal the model; the fenced handle's late commit
shares a statement with a bystander game's, which lands while nothing of the fenced one
does.
"""

from __future__ import annotations

import asyncio
import inspect
import os
import shutil
import tempfile
import uuid
from json import loads
from pathlib import Path
from typing import Any

import pytest
from hypothesis import event, settings
from hypothesis import strategies as st
from hypothesis.stateful import RuleBasedStateMachine, invariant, rule, run_state_machine_as_test

from jfsm.errors import QuotaExceeded, StoreFenced
from jfsm.jcs import canonical_bytes, key_order
from jfsm.projection import Projection
from jfsm.stores import FileStore, MemoryStore

QUOTA = 2048


def done(result: Any) -> None:
    """Wait for a store call: a coroutine of the async protocol runs to its end here (on a
    loop of its own); a blocking store's call (today's `PostgresStore`) already has."""
    if inspect.isawaitable(result):
        asyncio.run(result)  # type: ignore[arg-type]


class SmallExtentStore(FileStore):
    extent_min = 256
    extent_max = 1024


# U+FF61 comes before U+1D11E by code point but after it in JCS (UTF-16) order: D834 < FF61.
KEYS = [
    "a",
    "B",
    "é",
    "𝄞",
    "\uff61",
    "😀.chunk",
    "jfGameStack.meta",
    "jfGameStack.chunk.1",
    "",
]

_TEXT = st.text(st.sampled_from('aé\n"\\\x00𝄞😀\uff61 '), max_size=6)
_SCALARS = (
    st.none()
    | st.booleans()
    | st.integers(-(2**53) + 1, 2**53 - 1)
    | st.floats(allow_nan=False, allow_infinity=False)
    | _TEXT
)
VALUES = st.recursive(
    _SCALARS,
    lambda inner: st.lists(inner, max_size=3) | st.dictionaries(_TEXT, inner, max_size=3),
    max_leaves=6,
)


def _log_of(store: dict[str, bytes], base: dict[str, bytes]) -> list[dict[str, Any]]:
    """The optimized change log, computed the slow obvious way."""
    log = []
    for key in sorted(set(store) | set(base), key=key_order):
        if store.get(key) == base.get(key):
            continue
        if key in store:
            log.append({"key": key, "op": "set", "value": loads(store[key])})
        else:
            log.append({"key": key, "op": "delete"})
    return log


def _footprint(store: dict[str, bytes], base: dict[str, bytes]) -> int:
    obj = {key: loads(raw) for key, raw in store.items()}
    return len(canonical_bytes(obj)) + len(canonical_bytes(_log_of(store, base)))


class StoreEquivalence(RuleBasedStateMachine):
    #: conninfo of a migrated PostgreSQL database: adds a PostgresStore to the comparison.
    postgres: str | None = None

    def __init__(self) -> None:
        super().__init__()
        self.directory = tempfile.mkdtemp(prefix="jfsm-eq-")
        self.memory = MemoryStore(quota=QUOTA)
        self.file = SmallExtentStore.open_sync(self.directory, quota=QUOTA)
        # on a memory file system where there is one: what is judged is the format
        memory = "/dev/shm" if os.access("/dev/shm", os.W_OK) else None
        self.shared_root = tempfile.mkdtemp(prefix="jfsm-eq-shared-", dir=memory)
        self.shared = self._open_shared()
        self.model: dict[str, bytes] = {}
        self.model_base: dict[str, bytes] = {}
        self.pg: Any = None
        self.neighbour: Any = None
        self.bystander: Any = None
        if self.postgres is not None:
            from jfsm.stores.postgres.blocking import BlockingPostgresStore

            self.game = "eq-" + uuid.uuid4().hex
            self.pg = BlockingPostgresStore.open(self.postgres, self.game, quota=QUOTA)
            self.neighbour = BlockingPostgresStore.open(
                self.postgres, self.game + "-n", quota=QUOTA
            )
            self.bystander = BlockingPostgresStore.open(self.postgres, self.game + "-b")
            self.bystanding = 0

    def _open_shared(self, takeover: bool = False) -> FileStore:
        return FileStore.open_shared(
            Path(self.shared_root) / "store",
            game="g",
            root=self.shared_root,
            owner="eq",
            takeover=takeover,
            quota=QUOTA,
        )

    def stores(self) -> list[Any]:
        return [self.memory, self.file, self.shared]

    def postgres_stores(self) -> list[Any]:
        return [self.pg, self.neighbour] if self.pg is not None else []

    def teardown(self) -> None:
        done(self.file.close())
        shutil.rmtree(self.directory, ignore_errors=True)
        done(self.shared.close())
        shutil.rmtree(self.shared_root, ignore_errors=True)
        for store in [*self.postgres_stores(), self.bystander]:
            if store is not None:
                store.close()

    def _together(self, *calls: Any) -> list[Any]:
        """PostgreSQL stores' commits started at once on their loop; their outcomes (an
        exception or None) and how many statements the pool sent for them."""
        from jfsm.stores.postgres.blocking import run
        from jfsm.stores.postgres.group import grouped

        group = grouped(self.pg.store._pool)
        before = group.batches

        async def both() -> list[Any]:
            return await asyncio.gather(*calls, return_exceptions=True)

        outcomes = run(both())
        return [*outcomes, group.batches - before]

    def _commit(self, projection: Projection) -> None:
        post = dict(self.model)
        for key in projection.deletes:
            post.pop(key, None)
        post.update(projection.sets)
        would_be = _footprint(post, self.model_base)
        outcomes: list[dict[str, Any] | None] = []
        for store in self.stores():
            try:
                done(store.commit(projection))
                outcomes.append(None)
            except QuotaExceeded as exc:
                outcomes.append(exc.details)
        if self.pg is not None:  # the game and its neighbour in one statement (R152)
            *pg, statements = self._together(
                *(store.store.commit(projection) for store in self.postgres_stores())
            )
            for outcome in pg:
                assert outcome is None or isinstance(outcome, QuotaExceeded), outcome
                outcomes.append(None if outcome is None else outcome.details)
            sent = outcomes[0] is None and not projection.is_empty()
            assert statements == (1 if sent else 0)
            if statements:
                event("postgres: two games in one statement")
        assert all(outcome == outcomes[0] for outcome in outcomes)
        if would_be <= QUOTA:
            assert outcomes[0] is None
            self.model = post
        else:
            event("quota refused")
            assert outcomes[0] == {
                "current": _footprint(self.model, self.model_base),
                "would_be": would_be,
                "quota": QUOTA,
            }

    @rule(
        sets=st.dictionaries(st.sampled_from(KEYS), VALUES, max_size=3),
        deletes=st.lists(st.sampled_from(KEYS), max_size=3),
    )
    def commit(self, sets: dict[str, Any], deletes: list[str]) -> None:
        self._commit(Projection.of(sets, [k for k in deletes if k not in sets]))

    @rule(key=st.sampled_from(KEYS), size=st.sampled_from([300, 700, 1200, 2100]))
    def commit_large(self, key: str, size: int) -> None:
        self._commit(Projection.of({key: "𝄞" * (size // 4)}))

    @rule()
    def checkpoint(self) -> None:
        for store in self.stores() + self.postgres_stores():
            done(store.checkpoint())
        self.model_base = dict(self.model)

    @rule(verify=st.booleans())
    def reopen(self, verify: bool) -> None:
        done(self.file.close())
        self.file = SmallExtentStore.open_sync(self.directory, quota=QUOTA, verify=verify)
        done(self.shared.close())
        self.shared = self._open_shared()
        if self.pg is not None:
            assert self.postgres is not None
            self.pg.close()
            self.pg = type(self.pg).open(self.postgres, self.game, quota=QUOTA)
            self.neighbour.close()
            self.neighbour = type(self.pg).open(self.postgres, self.game + "-n", quota=QUOTA)

    @rule(verify=st.booleans())
    def reopen_abandoned(self, verify: bool) -> None:
        """Reopen a copy of the files taken while the store was open."""
        copy = tempfile.mkdtemp(prefix="jfsm-eq-")
        shutil.copytree(self.directory, copy, dirs_exist_ok=True)
        for log in Path(copy).glob("log.*.jfl"):
            data = log.read_bytes()
            event("abandoned: zeros after the records" if data.endswith(b"\x00") else "abandoned")
        done(self.file.close())
        shutil.rmtree(self.directory, ignore_errors=True)
        self.directory = copy
        self.file = SmallExtentStore.open_sync(self.directory, quota=QUOTA, verify=verify)
        # the shared store's abandoned handle: a new epoch takes over while it is open
        old, self.shared = self.shared, self._open_shared(takeover=True)
        try:
            old.commit_sync(Projection.of({}, ["a"]))
            raise AssertionError("a superseded epoch's handle wrote")
        except StoreFenced:
            event("shared directory: the old epoch's handle is fenced")
        old.close_sync()
        if self.pg is not None:
            # PostgreSQL's abandoned handle: a new owner takes over while it is still open.
            assert self.postgres is not None
            old = self.pg
            self.pg = type(old).open(self.postgres, self.game, quota=QUOTA, takeover=True)
            # its late commit shares a statement with a bystander's: that one lands alone
            self.bystanding += 1
            fenced, landed, statements = self._together(
                old.store.commit(Projection.of({}, ["a"])),
                self.bystander.store.commit(Projection.of({"n": self.bystanding})),
            )
            assert isinstance(fenced, StoreFenced) and landed is None and statements == 1
            assert self.bystander.image.get("n") == self.bystanding
            from jfsm.stores.postgres.store import read_image

            assert read_image(self.postgres, self.game + "-b").get("n") == self.bystanding
            event("postgres: the old handle is fenced, its statement's other member lands")
            try:
                old.checkpoint()
                raise AssertionError("a fenced handle wrote")
            except StoreFenced:
                pass
            old.close()

    @rule()
    def convert_shared(self) -> None:
        """The shared store opened by a process of one (converted to its format) and shared
        again (converted back): the same image both times."""
        done(self.shared.close())
        with FileStore.open_sync(Path(self.shared_root) / "store", quota=QUOTA) as plain:
            assert plain.image.values_bytes() == self.model
            assert plain.image.base_bytes() == self.model_base
        self.shared = self._open_shared()

    @invariant()
    def stores_agree(self) -> None:
        for store in self.postgres_stores():
            pg = store.image
            assert pg.values_bytes() == self.model
            assert pg.base_bytes() == self.model_base
            assert pg.change_log() == _log_of(self.model, self.model_base)
            assert pg.footprint() == self.memory.image.footprint()
        shared = self.shared.image
        assert shared.values_bytes() == self.model
        assert shared.base_bytes() == self.model_base
        assert shared.change_log() == _log_of(self.model, self.model_base)
        assert shared.footprint() == self.memory.image.footprint()
        mem, fil = self.memory.image, self.file.image
        assert fil.values_bytes() == mem.values_bytes() == self.model
        assert fil.base_bytes() == mem.base_bytes() == self.model_base
        assert fil.store_json() == mem.store_json()
        assert fil.change_log() == mem.change_log() == _log_of(self.model, self.model_base)
        recomputed = len(canonical_bytes(mem.store_json())) + len(canonical_bytes(mem.change_log()))
        assert fil.footprint() == mem.footprint() == recomputed


StoreEquivalence.TestCase.settings = settings(
    max_examples=150, stateful_step_count=40, deadline=None
)
TestStoreEquivalence = pytest.mark.slow(
    pytest.mark.req(
        "JF-QUOTA-001",
        "JF-QUOTA-003",
        "JF-QUOTA-004",
        "JF-QUOTA-005",
        "JF-QUOTA-006",
        "JF-QUOTA-007",
        "JF-QUOTA-008",
        "JF-ATOM-001",
    )(StoreEquivalence.TestCase)
)


@pytest.mark.slow
@pytest.mark.req(
    "JF-STORE-015", "JF-STORE-013", "JF-ATOM-001", "JF-QUOTA-001", "JF-STORE-050", "JF-STORE-051"
)
def test_memory_file_and_postgres_agree(pg_target: str) -> None:
    """The same machine with a PostgresStore alongside (a real server, see pg_fixtures),
    directly and through PgBouncer in transaction pooling mode, group commit on."""

    class WithPostgres(StoreEquivalence):
        postgres = pg_target

    run_state_machine_as_test(
        WithPostgres, settings=settings(max_examples=20, stateful_step_count=25, deadline=None)
    )
