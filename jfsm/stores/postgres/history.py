"""Noticing that the database lost writes this process saw acknowledged (JF-STORE-060 to
JF-STORE-063, decisions R181 to R183).

**The one concept: what this process knows the database must hold, compared with what the
server it reaches now holds, in the statements the store sends anyway.**

A failover that promotes a node without every acknowledged write (an asynchronous standby, a
Patroni older than 3.0.3 whose frozen primary takes the leader key back, a restore from a
backup) rolls the database back: acknowledged rounds vanish, tokens too, and a store that
trusted the database would write the same round numbers again. Two checks catch it.

# (a) The WAL position (per pool)

Every statement of the store reads, on the server that runs it, its WAL insertion timeline
and position (`POSITION`: the first 8 hex digits of `pg_walfile_name` of
`pg_current_wal_insert_lsn()`, which names the timeline the server inserts on, and the
position itself in bytes). The pool keeps the high-water mark of the pairs read by the
statements whose transaction committed a write with `synchronous_commit = on` (a write
landed, an owner's token taken): such a pair is at or before that commit, which every node
a legitimate failover may promote holds (JF-STORE-042), so a legitimate promotion moves both
numbers forward (a new timeline starts where the standby's WAL ends, past every commit it
confirmed). A pair behind the mark (a lower timeline, or a lower position) means the server
lacks WAL this process saw acknowledged. Every statement is compared with the mark as it was
when the statement was *sent* (its floor): a write acknowledged concurrently may have read a
later position, a write acknowledged before cannot. The fenced write statements compare in
SQL, so a write behind its floor never lands.

# (b) The game's write count (per store)

A store knows its game's token and the count of its landed writes (`seq`, read at open and
counted up by each write it saw acknowledged, JF-STORE-014). Its write statements land only
while the row holds both (`token = %(token)s AND seq = %(seq)s`). When one does not land,
one more statement reads the row, after this store's state was committed: in a history that
only moves forward a token and a write count never go down, so a stored token below the
store's, or its own token with a lower count, is a lost history; a higher token (or no row)
is a newer owner (`StoreFenced`).

# On detection

`HistoryWatch.lose` (on the pool): the pool refuses every statement from then on
(`StoreHistoryLost`, code `store_history_lost`, not retryable), writes the database's mark
(a row of `jfsm_history_lost`, which every statement of every worker reads, `marked` in
`POSITION`, and every new connection of a pool checks), counts the detection (`losses`,
process-wide, and `HistoryWatch.detections` per pool) and logs one line once per process
(logger `jfsm.stores.postgres`; no text of any round). Clearing the mark is an operator's
act: `clear_history_lost(conninfo)`, `jfsm pg-migrate URL --clear-history-lost`, or
`DELETE FROM jfsm_history_lost`; running workers that detected a loss stay stopped until
restarted.
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import jfsm.observability as observability
from jfsm.errors import StoreHistoryLost

__all__ = [
    "POSITION",
    "HistoryWatch",
    "LossCounter",
    "WalPosition",
    "clear_history_lost",
    "history_lost_marks",
    "judge_row",
    "losses",
]

_log = logging.getLogger("jfsm.stores.postgres")

#: The columns `timeline`, `wal` (bytes) and `marked` (the database holds a mark of lost
#: history) of the server that runs the statement, as a FROM item (`FROM POSITION AS here`).
POSITION = """(
    SELECT ('x' || lpad(substr(pg_walfile_name(w.at), 1, 8), 16, '0'))::bit(64)::bigint
            AS timeline,
        (w.at - '0/0'::pg_lsn)::bigint AS wal,
        EXISTS (SELECT 1 FROM jfsm_history_lost) AS marked
    FROM pg_current_wal_insert_lsn() AS w(at)
)"""

#: The condition a fenced write adds: the server is not behind the floor, and unmarked.
AHEAD_OF_FLOOR = (
    "NOT here.marked AND here.timeline >= %(floor_timeline)s AND here.wal >= %(floor_wal)s"
)


@dataclass(frozen=True)
class WalPosition:
    """A server's WAL insertion timeline and position (bytes), as `POSITION` reads them."""

    timeline: int
    wal: int

    def behind(self, floor: WalPosition) -> bool:
        """Whether this position lacks WAL that `floor` had: a lower timeline, or a lower
        position (a legitimate promotion moves both forward)."""
        return self.timeline < floor.timeline or self.wal < floor.wal

    def __str__(self) -> str:
        return f"timeline {self.timeline}, WAL {self.wal >> 32:X}/{self.wal & 0xFFFFFFFF:X}"


class LossCounter:
    """The detections of lost history in this process (every pool): `count`, and callbacks
    called with each `StoreHistoryLost` as it is detected (`subscribe`; a metrics exporter
    wires its `history_lost` counter here). A callback that raises is ignored."""

    def __init__(self) -> None:
        self.count = 0
        self._callbacks: list[Callable[[StoreHistoryLost], Any]] = []
        self._lock = threading.Lock()
        self._logged = False

    def subscribe(self, callback: Callable[[StoreHistoryLost], Any]) -> None:
        self._callbacks.append(callback)

    def unsubscribe(self, callback: Callable[[StoreHistoryLost], Any]) -> None:
        if callback in self._callbacks:
            self._callbacks.remove(callback)

    def record(self, error: StoreHistoryLost, where: str) -> None:
        with self._lock:
            self.count += 1
            first, self._logged = not self._logged, True
        if first:  # one line once per process: later detections are counted, not logged
            _log.error(
                "jfsm: the PostgreSQL database at %s lacks writes this process saw "
                "acknowledged (%s); this process refuses every write to it from now on "
                "(store_history_lost). See the Deploying guide: 'A database that lost "
                "acknowledged writes'",
                where,
                error.details.get("reason", ""),
            )
        observability.history_lost("postgresql")  # the metric, with an SDK configured
        for callback in list(self._callbacks):
            try:
                callback(error)
            except Exception:  # a listener never breaks the store
                continue


#: The process's detections (see `LossCounter`).
losses = LossCounter()


class HistoryWatch:
    """One pool's memory of what the database must hold (see the module docstring):
    `mark` (the WAL high-water mark of acknowledged writes), `lost` (the error every
    statement gets once a loss was found) and `detections` (how many this pool found)."""

    def __init__(self, where: str) -> None:
        self.where = where  # the target as messages show it (no password)
        self.mark = WalPosition(0, 0)
        self.lost: StoreHistoryLost | None = None
        self.detections = 0
        self.marked_durably = False

    def floor(self) -> WalPosition:
        """The mark now: what a statement sent now must find on its server."""
        return self.mark

    def params(self, floor: WalPosition) -> dict[str, int]:
        """The floor as a statement's parameters (`AHEAD_OF_FLOOR`)."""
        return {"floor_timeline": floor.timeline, "floor_wal": floor.wal}

    def refuse(self) -> None:
        """Raise the pool's `StoreHistoryLost` once a loss was found (else nothing)."""
        if self.lost is not None:
            raise StoreHistoryLost(self.lost.message, state="history_lost", **self.lost.details)

    def check(
        self, position: WalPosition, floor: WalPosition, *, acked: bool, marked: bool = False
    ) -> StoreHistoryLost | None:
        """Compare what a statement read with its floor: the error to raise (the loss
        recorded: call `HistoryWatch.lose`'s durable part next) or None; an `acked`
        statement (it committed a write with synchronous_commit on) raises the mark."""
        if marked:
            return self.lose(
                "the database holds a mark of lost history (jfsm_history_lost), written by a "
                "worker that found it lacking acknowledged writes",
                durable=True,
            )
        if position.behind(floor):
            return self.lose(
                f"the server is at {position}, behind {floor}, which this process saw acknowledged",
                timeline=position.timeline,
                wal=position.wal,
                acknowledged_timeline=floor.timeline,
                acknowledged_wal=floor.wal,
            )
        if acked:
            self.mark = WalPosition(
                max(self.mark.timeline, position.timeline), max(self.mark.wal, position.wal)
            )
        return None

    def lose(self, reason: str, *, durable: bool = False, **details: Any) -> StoreHistoryLost:
        """Record a loss: from now on every statement of the pool is refused. Returns the
        error to raise; the first detection of the pool is counted and (once per process)
        logged. `durable`: the database's mark exists already."""
        error = StoreHistoryLost(
            f"the PostgreSQL database at {self.where} lacks writes this process saw "
            f"acknowledged: {reason}; nothing was written, and this process writes nothing "
            "more there (an operator must act: see the Deploying guide)",
            state="history_lost",
            reason=reason,
            **details,
        )
        if durable:
            self.marked_durably = True
        if self.lost is None:
            self.lost = error
            self.detections += 1
            losses.record(error, self.where)
        return error


def judge_row(token: int, seq: int, stored: tuple[int, int] | None) -> str:
    """What a write of a store holding (`token`, `seq`) that did not land meets, given the
    game's row as read after it, `stored` = (token, seq) or None (no row): `"lost"` (a token
    below the store's, or its own token with a lower write count: the database lost
    acknowledged writes), `"fenced"` (a newer token, or no row) or `"ahead"` (its own token
    with a higher count: a write of its own landed that it does not know of)."""
    if stored is None:
        return "fenced"
    stored_token, stored_seq = stored
    if stored_token < token or (stored_token == token and stored_seq < seq):
        return "lost"
    if stored_token > token:
        return "fenced"
    return "ahead" if stored_seq > seq else "fenced"


#: Written by the detector (one short transaction, synchronous_commit on).
MARK = (
    "WITH durable AS MATERIALIZED (SELECT set_config('synchronous_commit', 'on', true) AS v)"
    " INSERT INTO jfsm_history_lost (detected_by, reason) SELECT %s, %s FROM durable"
)


def history_lost_marks(conninfo: str) -> list[dict[str, Any]]:
    """The database's marks of lost history, oldest first (`n`, `detected_at`,
    `detected_by`, `reason`); [] when none. Raises `StoreUnavailable` as
    `PostgresStore.open` does."""
    import psycopg

    from jfsm.stores.postgres.schema import connect, connection_error, require_schema

    conn = connect(conninfo)
    try:
        require_schema(conn)
        rows = conn.execute(
            "SELECT n, detected_at, detected_by, reason FROM jfsm_history_lost ORDER BY n"
        ).fetchall()
    except psycopg.Error as exc:
        raise connection_error(exc, conninfo, "read the marks of lost history at") from None
    finally:
        conn.close()
    return [
        {"n": int(n), "detected_at": at.isoformat(), "detected_by": by, "reason": reason}
        for n, at, by, reason in rows
    ]


def clear_history_lost(conninfo: str) -> int:
    """Delete the database's marks of lost history (an operator's act, once the loss is
    dealt with); returns how many there were. Raises `StoreUnavailable` as
    `PostgresStore.open` does."""
    import psycopg

    from jfsm.stores.postgres.schema import connect, connection_error, require_schema

    conn = connect(conninfo)
    try:
        require_schema(conn)
        cur = conn.execute("DELETE FROM jfsm_history_lost")
        return int(cur.rowcount)
    except psycopg.Error as exc:
        raise connection_error(exc, conninfo, "clear the marks of lost history at") from None
    finally:
        conn.close()
