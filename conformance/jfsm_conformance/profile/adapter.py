"""The adapter interface: how the profile drives one agent-memory library.

An adapter wraps one library's memory (a middleware, a session, a function) around the
profile's `ScriptedSummarizer` and fake storage, and exposes five async operations:

- `append(user, assistant)`: add one exchange (two messages) through the library's normal
  path; returns when the library acknowledged it;
- `compact()`: ask for a compaction through the library's normal path; it may raise (the
  profile records it, a raise is not a failure by itself);
- `read()`: the memory as the model would see it next, as a list of texts in order (a
  message's text, a summary's text or whatever the library put there);
- `observed_states()`: every state the storage held since the last call (empty if the
  library has no storage of its own);
- `fail_next_write(armed)`: make the next replacement write of the storage fail once
  (`armed=False` disarms it again once the compaction is over, written or not);
- `close()`.

Hold and release are the summarizer's (`ScriptedSummarizer.script("hold")`, `release`):
an adapter only declares in its `Scope` whether its summarizer call can be held (async).

`Scope` says what the library claims, so a verdict never blames it for what it does not
claim: one writer or several (`writers="multi"`, with `writers_claim` quoting the library's
own line that lets two runs share a session: the profile then searches twice, one writer and
two overlapping writers, and reports both), which failures its provider can really produce,
native or custom storage, `by_design`: property ID -> reason, for findings the library documents
as intended, and `not_applicable`: property ID -> reason, for properties about a step the
library does not have (a memory without a summarizer has no compaction for JF-SAFE-006 to
judge); those are *not applicable* with that reason, never searched.

`ObservedStorage` is the part of a fake store that the profile reads through the adapter:
the store calls `record(state)` after every change and `fail_if_armed()` before a
replacement write; the adapter's `observed_states()` is `take()` and its
`fail_next_write(armed)` is `arm(armed)`.

`AdapterSpec` bundles a factory with its scope: a user's adapter is one module-level
`AdapterSpec` (or any object with `factory` and `scope` attributes, or a callable with a
`scope` attribute, such as an adapter class), run with `jfsm profile --adapter module:attr`.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field, replace
from typing import Literal, Protocol

from .summarizer import ScriptedSummarizer

__all__ = [
    "Adapter",
    "AdapterFactory",
    "AdapterSpec",
    "ObservedStorage",
    "Scope",
    "Unavailable",
]


class Unavailable(RuntimeError):
    """The library an adapter needs is not installed (the message says which extra)."""


@dataclass(frozen=True)
class Scope:
    """What an adapter's library claims to handle (see the module docs)."""

    library: str
    version: str
    entry_point: str
    writers: Literal["single", "multi"] = "single"
    writers_claim: str = ""
    failures: frozenset[str] = frozenset({"raise", "timeout", "empty"})
    storage: Literal["native", "custom", "none"] = "none"
    hold: bool = False
    by_design: dict[str, str] = field(default_factory=dict)
    not_applicable: dict[str, str] = field(default_factory=dict)
    notes: tuple[str, ...] = ()

    def one_writer(self) -> Scope:
        """This scope with one writer: the single-writer search of a `multi` adapter."""
        return replace(self, writers="single")

    def capabilities(self) -> frozenset[str]:
        """The scope as the words properties need: outcomes, `multi`, `hold`, and `observe`
        (storage to observe, or a call to hold: a state during a compaction can be seen)."""
        out = set(self.failures)
        if self.writers == "multi":
            out.add("multi")
        if self.hold:
            out.add("hold")
        if self.hold or self.storage != "none":  # a state during a compaction can be seen
            out.add("observe")
        return frozenset(out)


class Adapter(Protocol):
    """One library's memory under the profile (see the module docs)."""

    scope: Scope

    async def append(self, user: str, assistant: str) -> None:
        """Add one exchange through the library's normal write path; return once it is
        acknowledged. An exception here is a harness error, not a verdict."""
        ...

    async def compact(self) -> None:
        """Ask for a compaction through the library's normal entry point; it may raise (the
        profile records the exception; a raise is not a failure by itself)."""
        ...

    async def read(self) -> list[str]:
        """The memory as the model would see it next: texts in order."""
        ...

    def observed_states(self) -> list[list[str]]:
        """Every state the storage held since the previous call, oldest first (`[]` without
        storage of its own)."""
        ...

    def fail_next_write(self, armed: bool = True) -> None:
        """Make the storage's next replacement write fail once (`armed=False` disarms)."""
        ...

    async def close(self) -> None:
        """Release what the adapter holds (called once per example)."""
        ...


@dataclass
class ObservedStorage:
    """What a fake store tells the profile: the states it held since the profile last asked,
    and whether its next replacement write is armed to fail (see the module docs)."""

    states: list[list[str]] = field(default_factory=list)
    armed: bool = False

    def record(self, state: list[str]) -> None:
        """The store now holds `state` (texts, in order)."""
        self.states.append(list(state))

    def take(self) -> list[list[str]]:
        """Every state recorded since the previous call, oldest first."""
        states, self.states = self.states, []
        return states

    def arm(self, armed: bool = True) -> None:
        """Make the next replacement write fail once (`armed=False` disarms)."""
        self.armed = armed

    def fail_if_armed(self, what: str = "scripted storage write failure") -> None:
        """Raise `ConnectionError(what)` once if armed (a remote store's write failing)."""
        if self.armed:
            self.armed = False
            raise ConnectionError(what)


AdapterFactory = Callable[[ScriptedSummarizer], Adapter]


@dataclass(frozen=True)
class AdapterSpec:
    """A factory and the scope its adapters declare: what `jfsm profile --adapter module:attr`
    and `run_profile(spec=...)` take for an adapter that is not registered."""

    factory: AdapterFactory
    scope: Scope
