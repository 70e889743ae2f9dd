"""The state machines, built from the tables in `spec/machines/` with `transitions`.

The tables are the only definition: this module adds no transition of its own and turns off
`transitions`' automatic `to_<state>` helpers. A `(state, event)` pair without a row is
illegal; so is an event whose rows' guards all fail. Either raises `InvalidTransition` and
leaves the state unchanged (like h2, the machine never moves on an error).

Guards and effects are named in the table; the owner of a machine binds one zero-argument
callable per guard name and one handler per effect name (decision R31). By convention the
handler of effect `x` is the owner's method `on_x` (`handlers(owner)` collects them, the most
derived override winning), so a table says what happens and its owner holds the code.
`act(event, *args)` fires the event and runs the handler of the row that fired, returning
what the handler returns; if the handler raises, the machine returns to its former state.
`act_async` does the same for a handler that may be a coroutine (one that commits to the
store, which is awaited): the state is restored if the awaited handler raises.

The states and events of the engine's three machines are also typed (`StrEnum`s below,
checked against the tables when a table is loaded). Other tables in `spec/machines/` (a
store backend's, for example) load and sweep the same way; their owners live elsewhere.
"""

from __future__ import annotations

import inspect
from collections.abc import Callable, Iterator, Mapping
from contextlib import contextmanager
from dataclasses import dataclass
from enum import StrEnum
from functools import cache
from typing import Any

from transitions import Machine, MachineError

from jfsm.errors import InvalidTransition
from jfsm.spec import load_json, spec_dir

__all__ = [
    "ENGINE_MACHINES",
    "MACHINE_NAMES",
    "TYPED",
    "CompressionEvent",
    "CompressionState",
    "ForcedEvent",
    "ForcedState",
    "Handlers",
    "MachineTable",
    "SceneEvent",
    "SceneState",
    "StateMachine",
    "Transition",
    "effect_names",
    "handlers",
    "table",
]

ENGINE_MACHINES = ("stack_compression", "catalyst_scene", "intervene_retry")


def _machine_names() -> tuple[str, ...]:
    found = sorted(path.stem for path in (spec_dir() / "machines").glob("*.json"))
    return tuple([*ENGINE_MACHINES, *(name for name in found if name not in ENGINE_MACHINES)])


#: Every table in `spec/machines/`: the engine's three first, then any other (sorted).
MACHINE_NAMES = _machine_names()


class CompressionState(StrEnum):
    """States of `stack_compression` (one machine per stack)."""

    IDLE = "idle"
    IN_FLIGHT = "in_flight"
    PUBLISHING = "publishing"
    CLOSED = "closed"


class CompressionEvent(StrEnum):
    """Events of `stack_compression`."""

    APPEND = "append"
    CHECK = "check"
    FORCE = "force"
    REPLY_VALID = "reply_valid"
    REPLY_FAILED = "reply_failed"
    REPLY_STALE = "reply_stale"
    COMMIT = "commit"
    COMMIT_REFUSED = "commit_refused"
    REBUILD = "rebuild"
    CLOSE = "close"


class SceneState(StrEnum):
    """States of `catalyst_scene` (one machine per scene)."""

    CREATED = "created"
    RUNNING = "running"
    PUBLISHED = "published"
    CANCELLED = "cancelled"


class SceneEvent(StrEnum):
    """Events of `catalyst_scene`."""

    RECORD = "record"
    GENERATE = "generate"
    PUBLISH = "publish"
    CANCEL = "cancel"


class ForcedState(StrEnum):
    """States of `intervene_retry` (one machine per game)."""

    CLEAR = "clear"
    OWED = "owed"
    FORCING = "forcing"


class ForcedEvent(StrEnum):
    """Events of `intervene_retry`."""

    INTERVENE = "intervene"
    PUBLICATION = "publication"
    ATTEMPT_FAILED = "attempt_failed"
    BEFORE_GENERATION = "before_generation"
    REBUILD = "rebuild"


#: The typed states and events of each engine machine.
TYPED: dict[str, tuple[type[StrEnum], type[StrEnum]]] = {
    "stack_compression": (CompressionState, CompressionEvent),
    "catalyst_scene": (SceneState, SceneEvent),
    "intervene_retry": (ForcedState, ForcedEvent),
}

_HANDLER_PREFIX = "on_"


def effect_names(owner: type) -> frozenset[str]:
    """The effects a class handles: the names of its `on_<effect>` methods."""
    return frozenset(
        name[len(_HANDLER_PREFIX) :]
        for name in dir(owner)
        if name.startswith(_HANDLER_PREFIX) and callable(getattr(owner, name))
    )


_EFFECT_NAMES: dict[type, frozenset[str]] = {}  # effect_names by class, found once


class Handlers(Mapping[str, Callable[..., Any]]):
    """The effect handlers of one owner: effect name -> its `on_<effect>` method, looked
    up when it is taken. It holds the owner only, not a bound method per effect: an open
    game keeps its machines' handlers as two objects, not sixteen (decision R150)."""

    __slots__ = ("_names", "_owner")

    def __init__(self, owner: object) -> None:
        self._owner = owner
        kind = type(owner)
        names = _EFFECT_NAMES.get(kind)
        if names is None:
            names = _EFFECT_NAMES[kind] = effect_names(kind)
        self._names = names

    def __getitem__(self, name: str) -> Callable[..., Any]:
        if name not in self._names:
            raise KeyError(name)
        handler: Callable[..., Any] = getattr(self._owner, _HANDLER_PREFIX + name)
        return handler

    def __iter__(self) -> Iterator[str]:
        return iter(self._names)

    def __len__(self) -> int:
        return len(self._names)


def handlers(owner: object) -> Handlers:
    """The effect handlers of `owner`: effect name -> its `on_<effect>` method."""
    return Handlers(owner)


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
    if t.name in TYPED:
        states, events = TYPED[t.name]
        if {s.value for s in states} != set(t.states):
            problems.append(f"typed states {sorted(s.value for s in states)} != table's")
        if {e.value for e in events} != set(t.events):
            problems.append(f"typed events {sorted(e.value for e in events)} != table's")
    if problems:
        raise ValueError(f"machine table {t.name}: " + "; ".join(problems))


_SHARED: dict[str, tuple[MachineTable, Machine]] = {}


def _shared_machine(t: MachineTable) -> Machine:
    """The one `transitions` machine of table `name`, shared by every `StateMachine` of it
    (each is a model fired through it, never registered: the machine holds no reference to
    it). Guards are looked up on the model being fired, by name, and the row that fired is
    handed back to it, so one machine serves every game. Building a machine per instance
    cost about 0.4 ms and 330 objects the garbage collector walks for as long as the game
    lives (decision R150). Built again when the table was loaded anew (a test's copy of
    the spec)."""
    built = _SHARED.get(t.name)
    if built is not None and built[0] is t:
        return built[1]

    def guard(guard_name: str) -> Callable[[Any], bool]:
        return lambda event: bool(event.model._guards[guard_name]())

    def remember(row: Transition) -> Callable[[Any], None]:
        return lambda event: event.model._remember(row)

    specs = []
    for row in t.transitions:
        spec: dict[str, Any] = {
            "trigger": row.event,
            "source": row.source,
            "dest": row.dest,
            "after": remember(row),
        }
        if row.guard is not None:
            spec["conditions"] = [guard(row.guard)]
        if row.unless is not None:
            spec["unless"] = [guard(row.unless)]
        specs.append(spec)
    machine = Machine(
        model=[],
        states=list(t.states),
        initial=t.initial,
        transitions=specs,
        auto_transitions=False,
        ignore_invalid_triggers=False,
        send_event=True,
        model_attribute="state",
    )
    _SHARED[t.name] = (t, machine)
    return machine


class StateMachine:
    """A live machine over one table, with guards and effects bound to the owner's callables.

    `fire(event)` moves to the row's destination and returns the row; `act(event, ...)`
    also runs the row's effect handler. An illegal event raises `InvalidTransition` (with
    `state` set to the unchanged state). `effects`, when given, must bind exactly the
    table's effect names (`ValueError` otherwise); without it the machine only decides
    legality (the table sweeps of the tests).
    """

    def __init__(
        self,
        name: str,
        guards: Mapping[str, Callable[[], bool]] | None = None,
        *,
        effects: Mapping[str, Callable[..., Any]] | None = None,
        state: str | None = None,
    ) -> None:
        self.table = table(name)
        bound = dict(guards or {})
        missing = set(self.table.guards) - set(bound)
        if missing:
            raise ValueError(f"machine {name}: no callable for guards {sorted(missing)}")
        self._guards = bound
        if effects is not None and set(effects) != set(self.table.effects):
            unbound = sorted(set(self.table.effects) - set(effects))
            extra = sorted(set(effects) - set(self.table.effects))
            raise ValueError(
                f"machine {name}: effects without handler {unbound}, handlers "
                f"without effect {extra}"
            )
        self._effects: Mapping[str, Callable[..., Any]] | None = (
            effects if effects is None or isinstance(effects, Handlers) else dict(effects)
        )
        self._fired: Transition | None = None
        start = self.table.initial if state is None else str(state)
        if start not in self.table.states:
            raise ValueError(f"machine {name}: unknown state {start!r}")
        self._machine = _shared_machine(self.table)
        self._machine.set_state(start, model=self)

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
            moved = self._machine.events[str(event)].trigger(self)
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

    def act(self, event: str, *args: Any) -> Any:
        """Fire `event` and run the effect handler of the row that fired with `args`;
        return what it returns. If the handler raises, the machine returns to the state
        it had before the event and the error propagates."""
        if self._effects is None:
            raise ValueError(f"machine {self.table.name}: no effect handlers are bound")
        before = self.current
        row = self.fire(event)
        try:
            return self._effects[row.effect](*args)
        except BaseException:
            self._machine.set_state(before, model=self)
            raise

    async def act_async(self, event: str, *args: Any) -> Any:
        """`act` for a handler that may return an awaitable (a commit): it is awaited, and
        if it raises (or the await is cancelled) the machine returns to the state it had
        before the event and the error propagates."""
        if self._effects is None:
            raise ValueError(f"machine {self.table.name}: no effect handlers are bound")
        before = self.current
        row = self.fire(event)
        try:
            result = self._effects[row.effect](*args)
            if inspect.isawaitable(result):
                result = await result
            return result
        except BaseException:
            self._machine.set_state(before, model=self)
            raise

    @contextmanager
    def acting(self, event: str, *args: Any) -> Iterator[Any]:
        """`act(event, *args)` for a change that may still fail: yields the handler's
        result; if the body raises, the machine returns to its former state."""
        before = self.current
        result = self.act(event, *args)
        try:
            yield result
        except BaseException:
            self._machine.set_state(before, model=self)
            raise
