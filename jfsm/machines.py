"""The state machines, built from the tables in `spec/machines/` with `transitions`.

The tables are the only definition: this module adds no transition of its own and turns off
`transitions`' automatic `to_<state>` helpers. A `(state, event)` pair without a row is
illegal; so is an event whose rows' guards all fail. Either raises `InvalidTransition` and
leaves the state unchanged (like h2, the machine never moves on an error).

Guards are named in the table; the owner of a machine passes one zero-argument callable per
guard name. Firing an event returns the `Transition` row that fired, whose `effect` the
owner carries out.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator, Mapping
from contextlib import contextmanager
from dataclasses import dataclass
from functools import cache
from typing import Any

from transitions import Machine, MachineError

from jfsm.errors import InvalidTransition
from jfsm.spec import load_json

__all__ = ["MACHINE_NAMES", "MachineTable", "StateMachine", "Transition", "table"]

MACHINE_NAMES = (
    "stack_compression",
    "catalyst_scene",
    "intervene_retry",
    "store_ownership",
)


@dataclass(frozen=True, slots=True)
class Transition:
    """One row of a machine table."""

    source: str
    event: str
    dest: str
    effect: str
    guard: str | None = None
    unless: str | None = None


@dataclass(frozen=True, slots=True)
class MachineTable:
    """A machine table loaded from `spec/machines/<name>.json`."""

    name: str
    title: str
    description: str
    initial: str
    states: tuple[str, ...]
    terminal: frozenset[str]
    events: tuple[str, ...]
    guards: tuple[str, ...]
    effects: tuple[str, ...]
    transitions: tuple[Transition, ...]
    raw: Mapping[str, Any]

    def rows(self, state: str, event: str) -> tuple[Transition, ...]:
        """The rows for `(state, event)`, in table order."""
        return tuple(t for t in self.transitions if t.source == state and t.event == event)


@cache
def table(name: str) -> MachineTable:
    """Load and check one machine table. Raises `ValueError` on an inconsistent table."""
    if name not in MACHINE_NAMES:
        raise ValueError(f"unknown machine {name!r}; known: {', '.join(MACHINE_NAMES)}")
    data = load_json(f"machines/{name}.json")
    rows = tuple(
        Transition(
            source=row["source"],
            event=row["event"],
            dest=row["dest"],
            effect=row["effect"],
            guard=row.get("guard"),
            unless=row.get("unless"),
        )
        for row in data["transitions"]
    )
    loaded = MachineTable(
        name=data["machine"],
        title=data["title"],
        description=data["description"],
        initial=data["initial"],
        states=tuple(s["name"] for s in data["states"]),
        terminal=frozenset(s["name"] for s in data["states"] if s.get("terminal")),
        events=tuple(e["name"] for e in data["events"]),
        guards=tuple(g["name"] for g in data["guards"]),
        effects=tuple(e["name"] for e in data["effects"]),
        transitions=rows,
        raw=data,
    )
    _check(loaded)
    return loaded


def _check(t: MachineTable) -> None:
    problems = []
    if t.initial not in t.states:
        problems.append(f"initial state {t.initial!r} is not a state")
    for row in t.transitions:
        for what, value, known in (
            ("source", row.source, t.states),
            ("dest", row.dest, t.states),
            ("event", row.event, t.events),
            ("effect", row.effect, t.effects),
        ):
            if value not in known:
                problems.append(f"{row}: unknown {what} {value!r}")
        for guard in (row.guard, row.unless):
            if guard is not None and guard not in t.guards:
                problems.append(f"{row}: unknown guard {guard!r}")
        if row.source in t.terminal and row.dest != row.source:
            problems.append(f"{row}: leaves terminal state {row.source!r}")
    if problems:
        raise ValueError(f"machine table {t.name}: " + "; ".join(problems))


class StateMachine:
    """A live machine over one table, with guards bound to the owner's callables.

    `fire(event)` moves to the row's destination and returns the row; an illegal event
    raises `InvalidTransition` (with `state` set to the unchanged state).
    """

    def __init__(
        self,
        name: str,
        guards: Mapping[str, Callable[[], bool]] | None = None,
        *,
        state: str | None = None,
    ) -> None:
        self.table = table(name)
        bound = dict(guards or {})
        missing = set(self.table.guards) - set(bound)
        if missing:
            raise ValueError(f"machine {name}: no callable for guards {sorted(missing)}")
        self._guards = bound
        self._fired: Transition | None = None
        start = self.table.initial if state is None else state
        if start not in self.table.states:
            raise ValueError(f"machine {name}: unknown state {start!r}")
        self._machine = Machine(
            model=self,
            states=list(self.table.states),
            initial=start,
            transitions=[self._row_spec(row) for row in self.table.transitions],
            auto_transitions=False,
            ignore_invalid_triggers=False,
            send_event=False,
            model_attribute="state",
        )

    def _row_spec(self, row: Transition) -> dict[str, Any]:
        spec: dict[str, Any] = {
            "trigger": row.event,
            "source": row.source,
            "dest": row.dest,
            "after": lambda: self._remember(row),
        }
        if row.guard is not None:
            spec["conditions"] = [self._guards[row.guard]]
        if row.unless is not None:
            spec["unless"] = [self._guards[row.unless]]
        return spec

    def _remember(self, row: Transition) -> None:
        self._fired = row

    @property
    def current(self) -> str:
        """The current state's name."""
        return str(self.state)  # type: ignore[attr-defined]

    def allowed(self, event: str) -> bool:
        """Whether `event` has any row from the current state (guards not evaluated)."""
        return bool(self.table.rows(self.current, event))

    def fire(self, event: str) -> Transition:
        """Fire `event`; return the row that fired. Raises `InvalidTransition`."""
        before = self.current
        if not any(row.event == event for row in self.table.transitions):
            raise InvalidTransition(
                f"{self.table.name}: event {event!r} has no transition in any state",
                state=before,
                machine=self.table.name,
                event=event,
            )
        self._fired = None
        try:
            moved = self.trigger(event)  # type: ignore[attr-defined]
        except MachineError as exc:
            raise InvalidTransition(
                f"{self.table.name}: event {event!r} is not allowed in state {before!r}",
                state=before,
                machine=self.table.name,
                event=event,
            ) from exc
        if not moved or self._fired is None:
            raise InvalidTransition(
                f"{self.table.name}: no guard of event {event!r} holds in state {before!r}",
                state=before,
                machine=self.table.name,
                event=event,
            )
        return self._fired

    @contextmanager
    def attempt(self, event: str) -> Iterator[Transition]:
        """Fire `event` for a change that may still fail: if the body raises, the machine
        returns to the state it had before the event, and the error propagates."""
        before = self.current
        row = self.fire(event)
        try:
            yield row
        except BaseException:
            self._machine.set_state(before, model=self)
            raise
