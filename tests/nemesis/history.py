"""The history of a nemesis run, as Jepsen keeps one: every operation a client invoked and
how it completed, and every fault the nemesis began and ended.

An `Event` is one line: its index, the `process` that did it (a client `w2.c1`, the
`nemesis`, a `bystander`), its `type`, the operation `f` (`record_round`, `open_game`, ...,
or a fault's kind), the `worker` and `game` it concerns, a `value` (the text sent and the
round answered, the token, the error's code, a pid...) and its `time` in seconds from the
run's start. Types:

- `invoke`: the operation was sent;
- `ok`: it happened (the reply said so);
- `fail`: it definitely did not happen (the store refused it: `store_fenced`,
  `store_locked`, `invalid_input`, ...: nothing of it was written);
- `info`: unknown: it may or may not have happened (`store_unavailable`, no reply because
  the worker died or stalled, `internal_error`). The checker settles each one against the
  final state.

A completion names its invocation (`value["invoke"]`). The history is written as JSON lines
(`dump`) and read back (`load`), so a run's checker can be run again on its file alone.
"""

from __future__ import annotations

import json
import time
from collections.abc import Iterator
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

__all__ = ["DEFINITE_FAILURES", "Event", "History", "message", "outcome"]

#: error codes that say the operation changed nothing (the protocol's promise)
DEFINITE_FAILURES = frozenset(
    {"store_fenced", "store_locked", "invalid_input", "quota_exceeded", "invalid_transition"}
)


def outcome(reply: dict[str, Any] | None) -> tuple[str, str]:
    """(type, error code) of a reply; None (no reply) is `info`."""
    if reply is None:
        return "info", "no reply"
    if reply.get("ok"):
        return "ok", ""
    error = reply.get("error")
    code = str(error.get("code", "")) if isinstance(error, dict) else ""
    return ("fail" if code in DEFINITE_FAILURES else "info"), code or "malformed reply"


def message(reply: dict[str, Any] | None) -> str:
    """The error message of a reply (cut to 300 characters); '' for none."""
    error = reply.get("error") if isinstance(reply, dict) else None
    return str(error.get("message", ""))[:300] if isinstance(error, dict) else ""


@dataclass(frozen=True)
class Event:
    """One line of the history (module docstring)."""

    index: int
    process: str
    type: str
    f: str
    time: float
    worker: str | None = None
    game: str | None = None
    value: dict[str, Any] = field(default_factory=dict)

    def to_json(self) -> dict[str, Any]:
        return asdict(self)


class History:
    """The run's events in the order they happened (one event loop appends them)."""

    def __init__(self, started: float | None = None) -> None:
        self.started = time.monotonic() if started is None else started
        self.events: list[Event] = []

    def now(self) -> float:
        return round(time.monotonic() - self.started, 4)

    def add(
        self,
        process: str,
        type_: str,
        f: str,
        *,
        worker: str | None = None,
        game: str | None = None,
        **value: Any,
    ) -> Event:
        event = Event(len(self.events), process, type_, f, self.now(), worker, game, value)
        self.events.append(event)
        return event

    def invoke(
        self, process: str, f: str, *, worker: str | None = None, game: str | None = None, **v: Any
    ) -> Event:
        return self.add(process, "invoke", f, worker=worker, game=game, **v)

    def complete(self, invoked: Event, type_: str, **value: Any) -> Event:
        """The completion of `invoked` (`ok`, `fail` or `info`), carrying its value too."""
        merged = {**invoked.value, **value, "invoke": invoked.index}
        return self.add(
            invoked.process, type_, invoked.f, worker=invoked.worker, game=invoked.game, **merged
        )

    def pairs(self) -> Iterator[tuple[Event, Event | None]]:
        """Each invocation with its completion (None: never completed, as `info`)."""
        done = {e.value["invoke"]: e for e in self.events if "invoke" in e.value}
        for event in self.events:
            if event.type == "invoke":
                yield event, done.get(event.index)

    def dump(self, path: Path) -> None:
        with path.open("w", encoding="utf-8") as out:
            for event in self.events:
                out.write(json.dumps(event.to_json(), sort_keys=True) + "\n")

    @classmethod
    def load(cls, path: Path) -> History:
        history = cls(started=0.0)
        with path.open(encoding="utf-8") as lines:
            history.events = [Event(**json.loads(line)) for line in lines if line.strip()]
        return history
