"""Each ownership rule of a shared store, on both shared backends, with a test that fails when
that rule alone is broken (issue 30, item 4; machine `spec/machines/store_ownership.json`).

The rules: **acquire** (a plain open is refused while another owner's lease lives), **renew**
(an idle owner's renewals keep its game; a superseded owner's renewal extends no lease),
**release** (close ends the lease at once), **take over** (a new token, the old owner
fenced), **expire** (a dead owner's lease runs out), **fence a write** (refused, nothing of
it written, not half of it) and **fence a read** (a superseded owner's check fails).

Each rule is one `check_*` function over a backend (the shared directory's `FileStore`, or
`PostgresStore` on the tests' own server), run once as it is (`test_<rule>`) and once per
mutant that breaks that rule alone (`test_the_rule_test_fails_when_its_rule_is_broken`): the
mutants replace one statement or one method of the reference, as a broken implementation
would, and the check must then fail. A dead owner is a real process that takes the game and
exits without closing it.
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import subprocess
import sys
import textwrap
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest
from pg_fixtures import game_id

from jfsm.errors import StoreFenced, StoreLocked
from jfsm.image import QUOTA_BYTES
from jfsm.projection import Projection
from jfsm.stores.file import ownership
from jfsm.stores.file import store as file_store
from jfsm.stores.file.directory import read_contents
from jfsm.stores.file.lease import LeaseRecord
from jfsm.stores.file.ownership import Epoch
from jfsm.stores.file.store import FileStore
from jfsm_conformance.examples.broken_owners import extend_any_lease

LONG = 30.0  # seconds: a lease that cannot run out during a check
SHORT = 1.0  # seconds: a dead owner's lease, waited out
RENEWED = 3.0  # seconds: the lease an idle owner keeps by renewing it every RENEWED / 6


class FileBackend:
    """Handles of one game of a shared state directory (`FileStore.open_shared`)."""

    name = "directory"

    def __init__(self, root: Path, lease: float) -> None:
        self.root, self.lease = root, lease
        self.folder = root / "g"
        self.folder.mkdir(parents=True)

    def open(self, owner: str, takeover: bool = False) -> Any:
        return FileStore.open_shared(
            self.folder / "store",
            game="g",
            lease_folder=self.folder,
            root=self.root,
            owner=owner,
            takeover=takeover,
            lease_seconds=self.lease,
        )

    def commit(self, handle: Any, *keys: str) -> None:
        handle.commit_sync(Projection.of(dict.fromkeys(keys, 1)))

    def confirm(self, handle: Any) -> None:
        asyncio.run(handle.confirm())

    def renew(self, handle: Any) -> bool:
        return bool(handle.renew_sync())

    def close(self, handle: Any) -> None:
        handle.close_sync()

    def keys_now(self) -> list[str]:
        """The store as its files hold it now, read without any lock."""
        store = self.folder / "store"
        names = os.listdir(store)
        contents = read_contents(
            str(store), names, lambda p: Path(p).read_bytes(), quota=QUOTA_BYTES
        )
        return sorted(contents.image.keys())

    def dead_owner(self, owner: str) -> None:
        _run_dead(
            f"""
            from jfsm.stores.file.store import FileStore
            s = FileStore.open_shared({str(self.folder / "store")!r}, game="g",
                lease_folder={str(self.folder)!r}, root={str(self.root)!r}, owner={owner!r},
                lease_seconds={self.lease})
            s.commit_sync(Projection.of({{"dead": 1}}))
            """
        )


class PgBackend:
    """Handles of one game of the PostgreSQL store (blocking facade, one private loop)."""

    name = "postgres"

    def __init__(self, url: str, lease: float) -> None:
        self.url, self.lease, self.game = url, lease, game_id()

    def open(self, owner: str, takeover: bool = False) -> Any:
        from jfsm.stores.postgres.blocking import BlockingPostgresStore

        return BlockingPostgresStore.open(
            self.url, self.game, owner=owner, takeover=takeover, lease_seconds=self.lease
        )

    def commit(self, handle: Any, *keys: str) -> None:
        handle.commit(Projection.of(dict.fromkeys(keys, 1)))

    def confirm(self, handle: Any) -> None:
        handle.confirm()

    def renew(self, handle: Any) -> bool:
        return bool(handle.renew())

    def close(self, handle: Any) -> None:
        handle.close()

    def keys_now(self) -> list[str]:
        from jfsm.stores.postgres.store import read_image

        return sorted(read_image(self.url, self.game).keys())

    def dead_owner(self, owner: str) -> None:
        _run_dead(
            f"""
            from jfsm.stores.postgres.blocking import BlockingPostgresStore
            s = BlockingPostgresStore.open({self.url!r}, {self.game!r}, owner={owner!r},
                lease_seconds={self.lease})
            s.commit(Projection.of({{"dead": 1}}))
            """
        )


def _run_dead(body: str) -> None:
    """Run `body` in a process that then exits without closing anything (a dead owner)."""
    script = "import os\nfrom jfsm.projection import Projection\n" + textwrap.dedent(body)
    script += "\nos._exit(0)\n"
    done = subprocess.run([sys.executable, "-c", script], capture_output=True, timeout=60)
    assert done.returncode == 0, done.stderr.decode()[-2000:]


# -- the rules ---------------------------------------------------------------------------------
def check_acquire(b: Any) -> None:
    a = b.open("a")
    b.commit(a, "k1")
    with pytest.raises(StoreLocked):
        b.open("b")
    b.commit(a, "k2")  # the refused open changed no owner
    assert b.keys_now() == ["k1", "k2"]
    b.close(a)


def check_renew_keeps(b: Any) -> None:
    a = b.open("a")
    until = time.monotonic() + 1.5 * b.lease
    while time.monotonic() < until:
        assert b.renew(a), "the owner's renewal found its lease gone"
        time.sleep(b.lease / 6)
    with pytest.raises(StoreLocked):  # idle past its first lease, but renewed: still owned
        b.open("b")
    b.close(a)


def check_renew_only_own(b: Any) -> None:
    a = b.open("a")
    taker = b.open("b", takeover=True)
    b.close(taker)  # released: nobody owns the game
    assert b.renew(a) is False, "a superseded owner's renewal succeeded"
    c = b.open("c")  # at once: the renewal extended no lease
    b.close(c)
    b.close(a)


def check_release(b: Any) -> None:
    a = b.open("a")
    b.commit(a, "k1")
    b.close(a)
    c = b.open("c")  # at once, its lease being long: close ended it
    assert b.keys_now() == ["k1"]
    b.close(c)


def check_takeover(b: Any) -> None:
    a = b.open("a")
    b.commit(a, "k1")
    taker = b.open("b", takeover=True)
    assert taker.token > a.token
    with pytest.raises(StoreFenced):
        b.commit(a, "k2")
    b.commit(taker, "k3")
    assert b.keys_now() == ["k1", "k3"]
    b.close(taker)
    b.close(a)


def check_expire(b: Any) -> None:
    b.dead_owner("dead")  # took the game with a lease of b.lease seconds, then died
    deadline = time.monotonic() + 4 * b.lease + 5
    while True:
        try:
            c = b.open("c")
            break
        except StoreLocked:
            assert time.monotonic() < deadline, "a dead owner's lease never ran out"
            time.sleep(0.1)
    assert b.keys_now() == ["dead"]
    b.close(c)


def check_fence_write(b: Any) -> None:
    a = b.open("a")
    b.commit(a, "k1")
    taker = b.open("b", takeover=True)
    with pytest.raises(StoreFenced):
        b.commit(a, "x1", "x2", "x3", "x4")
    assert b.keys_now() == ["k1"]  # nothing of it, not half of it
    with pytest.raises(StoreFenced):
        b.commit(a, "x5")
    assert b.keys_now() == ["k1"]
    b.close(taker)
    b.close(a)


def check_fence_read(b: Any) -> None:
    a = b.open("a")
    b.confirm(a)  # the owner's read is served
    taker = b.open("b", takeover=True)
    b.commit(taker, "k")
    with pytest.raises(StoreFenced):
        b.confirm(a)
    b.close(taker)
    b.close(a)


# rule -> (its check, the lease length it runs with)
RULES: dict[str, tuple[Callable[[Any], None], float]] = {
    "acquire": (check_acquire, LONG),
    "renew-keeps": (check_renew_keeps, RENEWED),
    "renew-only-own": (check_renew_only_own, LONG),
    "release": (check_release, LONG),
    "takeover": (check_takeover, LONG),
    "expire": (check_expire, SHORT),
    "fence-write": (check_fence_write, LONG),
    "fence-read": (check_fence_read, LONG),
}


# -- the mutants: each breaks one rule, as a broken implementation would ----------------------
def _takeover_as(forced: bool, open_fn: Callable[..., Any]) -> Callable[..., Any]:
    def bent(*args: Any, **kwargs: Any) -> Any:
        return open_fn(*args, **{**kwargs, "takeover": forced})

    return bent


def _end_without_ending(epoch: Epoch) -> None:
    """A release that closes the log and leaves the lease as it was."""
    if not epoch.closed:
        epoch.closed = True
        os.close(epoch._fd)


def _half_then_refuse(commit: Callable[..., Any], reopen: Callable[[Any], Any]) -> Any:
    """A commit that, refused as fenced, takes the game back and writes half its keys."""

    def bent(self: Any, projection: Projection) -> Any:
        try:
            return commit(self, projection)
        except StoreFenced:
            keys = sorted(projection.sets)[: max(1, len(projection.sets) // 2)]
            back = reopen(self)
            commit(back, Projection.encoded({k: projection.sets[k] for k in keys}))
            raise

    return bent


def file_mutants(mp: pytest.MonkeyPatch, backend: FileBackend) -> dict[str, Callable[[], None]]:
    reopen = lambda _store: backend.open("half", takeover=True)  # noqa: E731
    return {
        "acquire: a plain open takes the game": lambda: mp.setattr(
            file_store, "take", _takeover_as(True, ownership.take)
        ),
        "renew-keeps: a renewal that renews nothing": lambda: mp.setattr(
            Epoch, "renew", lambda self: True
        ),
        "renew-only-own: a renewal that extends any lease": lambda: mp.setattr(
            Epoch, "renew", extend_any_lease
        ),
        "release: close leaves the lease": lambda: mp.setattr(
            Epoch, "release", _end_without_ending
        ),
        "takeover: a takeover is a plain open": lambda: mp.setattr(
            file_store, "take", _takeover_as(False, ownership.take)
        ),
        "expire: a lease never runs out": lambda: mp.setattr(
            LeaseRecord, "live", lambda self: self.until > 0
        ),
        "fence-write: a write without its token check": lambda: mp.setattr(
            Epoch, "_check_position", lambda self, length, continued=False: None
        ),
        "fence-write: a fenced write lands half of it": lambda: mp.setattr(
            FileStore, "commit_sync", _half_then_refuse(FileStore.commit_sync, reopen)
        ),
        "fence-read: a read without its check": lambda: mp.setattr(
            Epoch, "check", lambda self: None
        ),
    }


def pg_mutants(mp: pytest.MonkeyPatch, backend: PgBackend) -> dict[str, Callable[[], None]]:
    from jfsm.stores.postgres import fencing, group, pool, store
    from jfsm.stores.postgres.store import PostgresStore

    untokened = " AND token = %(token)s"
    uncounted = " AND seq = %(seq)s"  # the read's check of the write count (R181) too
    assert untokened in fencing.CONFIRM and uncounted in fencing.CONFIRM
    untokened_group = " AND g.token = m.token"  # each member's check (R152), twice
    assert group.GROUP_COMMIT.count(untokened_group) == 2
    unowned_renewal = (" AND g.token = o.token", " AND g.token = l.token")
    assert all(check in fencing.RENEW for check in unowned_renewal)

    async def never_expires(conn: Any, game: str, who: str, **kw: Any) -> Any:
        row = await (
            await conn.execute(
                "SELECT owner, lease_until FROM jfsm_game WHERE game_id = %s", (game,)
            )
        ).fetchone()
        if row is not None and row[1] is not None and row[0] != who and not kw["takeover"]:
            raise StoreLocked(f"game {game!r} is owned by {row[0]}", game=game, owner=row[0])
        return await fencing.take_ownership(conn, game, who, **kw)

    async def reopen(_store: Any) -> Any:
        return await PostgresStore.open(
            backend.url, backend.game, owner="half", takeover=True, lease_seconds=backend.lease
        )

    original = PostgresStore.commit

    async def half(self: Any, projection: Projection) -> None:
        try:
            await original(self, projection)
        except StoreFenced:
            keys = sorted(projection.sets)[: max(1, len(projection.sets) // 2)]
            back = await reopen(self)
            await original(back, Projection.encoded({k: projection.sets[k] for k in keys}))
            raise

    return {
        "acquire: a plain open takes the game": lambda: mp.setattr(
            store, "take_ownership", _takeover_as(True, fencing.take_ownership)
        ),
        "renew-keeps: a renewal that renews nothing": lambda: mp.setattr(
            pool,
            "RENEW",
            fencing.RENEW.replace(
                "clock_timestamp() + make_interval(secs => %(lease)s)", "g.lease_until"
            ),
        ),
        "renew-only-own: a renewal that extends any lease": lambda: mp.setattr(
            pool,
            "RENEW",
            fencing.RENEW.replace(unowned_renewal[0], "")
            .replace(unowned_renewal[1], "")
            .replace("RETURNING g.game_id, g.token", "RETURNING g.game_id, l.token"),
        ),
        "release: close leaves the lease": lambda: mp.setattr(
            store, "RELEASE", "SELECT %(game)s::text, %(token)s::bigint"
        ),
        "takeover: a takeover is a plain open": lambda: mp.setattr(
            store, "take_ownership", _takeover_as(False, fencing.take_ownership)
        ),
        "expire: a lease never runs out": lambda: mp.setattr(
            store, "take_ownership", never_expires
        ),
        "fence-write: a write without its token check": lambda: mp.setattr(
            group, "GROUP_COMMIT", group.GROUP_COMMIT.replace(untokened_group, "")
        ),
        "fence-write: a fenced write lands half of it": lambda: mp.setattr(
            PostgresStore, "commit", half
        ),
        "fence-read: a read without its check": lambda: mp.setattr(
            store, "CONFIRM", fencing.CONFIRM.replace(untokened, "").replace(uncounted, "")
        ),
    }


MUTANTS = [
    "acquire: a plain open takes the game",
    "renew-keeps: a renewal that renews nothing",
    "renew-only-own: a renewal that extends any lease",
    "release: close leaves the lease",
    "takeover: a takeover is a plain open",
    "expire: a lease never runs out",
    "fence-write: a write without its token check",
    "fence-write: a fenced write lands half of it",
    "fence-read: a read without its check",
]


@pytest.fixture(params=["directory", "postgres"])
def backend(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[Callable[[float], Any]]:
    """A factory of fresh backends (a new game each), by lease length."""
    if request.param == "directory":
        yield lambda lease: FileBackend(tmp_path / f"root-{lease:g}-{time.monotonic_ns()}", lease)
        return
    url = request.getfixturevalue("pg_database")
    yield lambda lease: PgBackend(url, lease)
    from jfsm.stores.postgres.blocking import run
    from jfsm.stores.postgres.store import close_pools

    with contextlib.suppress(Exception):
        run(close_pools())


@pytest.mark.req("JF-STORE-010", "JF-STORE-011")
def test_acquire(backend: Callable[[float], Any]) -> None:
    check_acquire(backend(LONG))


@pytest.mark.slow
@pytest.mark.req("JF-STORE-011")
def test_renew_keeps_an_idle_owners_game(backend: Callable[[float], Any]) -> None:
    check_renew_keeps(backend(RENEWED))


@pytest.mark.req("JF-STORE-031")
def test_renew_extends_only_its_own_lease(backend: Callable[[float], Any]) -> None:
    check_renew_only_own(backend(LONG))


@pytest.mark.req("JF-STORE-010")
def test_release(backend: Callable[[float], Any]) -> None:
    check_release(backend(LONG))


@pytest.mark.req("JF-STORE-012")
def test_takeover(backend: Callable[[float], Any]) -> None:
    check_takeover(backend(LONG))


@pytest.mark.req("JF-STORE-012", "JF-STORE-032")
def test_expire(backend: Callable[[float], Any]) -> None:
    check_expire(backend(SHORT))


@pytest.mark.req("JF-STORE-013")
def test_fence_a_write(backend: Callable[[float], Any]) -> None:
    check_fence_write(backend(LONG))


@pytest.mark.req("JF-STORE-030")
def test_fence_a_read(backend: Callable[[float], Any]) -> None:
    check_fence_read(backend(LONG))


@pytest.mark.slow
@pytest.mark.parametrize("mutant", MUTANTS)
def test_the_rule_test_fails_when_its_rule_is_broken(
    backend: Callable[[float], Any], mutant: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    rule = mutant.split(":")[0]
    check, lease = RULES[rule]
    b = backend(lease)
    mutants = (
        file_mutants(monkeypatch, b) if isinstance(b, FileBackend) else pg_mutants(monkeypatch, b)
    )
    assert set(mutants) == set(MUTANTS)
    mutants[mutant]()
    with pytest.raises((Exception, pytest.fail.Exception)) as failed:
        check(b)
    # the check itself failed (an assertion, "did not raise", the store's own refusal), never
    # the harness (a mutant that does not run)
    assert isinstance(
        failed.value, (AssertionError, pytest.fail.Exception, StoreLocked, StoreFenced)
    ), failed.value
