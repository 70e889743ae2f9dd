"""The scripted summarizer the profile puts behind every adapter.

An adapter's fake provider (a fake chat model, a fake `responses.compact`, a compressor)
calls `summarize` (async) or `summarize_sync` with whatever text the library sends it. The
summarizer finds the markers of the profile's messages (`#m12`) and earlier summaries
(`#s3`) in that text, records them as the call's input, and answers according to the
outcome scripted for the current compaction:

- `ok`: a short summary `#s<k> ...` that names no message text;
- `raise`: `SummarizerFailed` (the adapter maps it to its provider's error);
- `timeout`: `SummarizerTimeout` (a `TimeoutError`);
- `empty`: the empty string;
- `blank`: a whitespace-only reply (`" \n"`), the empty summary's other shape;
- `hold`: waits until `release(outcome)` and then answers with that outcome (async only).

`counts` tells how often each outcome really reached the summarizer: a compaction the
library decides not to run, or answers from elsewhere, reaches nothing.
"""

from __future__ import annotations

import asyncio
import re
from collections import Counter
from dataclasses import dataclass, field

__all__ = [
    "MARKER",
    "OUTCOMES",
    "Call",
    "ScriptedSummarizer",
    "SummarizerFailed",
    "SummarizerTimeout",
]

MARKER = re.compile(r"#([ms])(\d+)\b")
OUTCOMES = ("ok", "raise", "timeout", "empty", "blank", "hold")
BLANK = " \n"


class SummarizerFailed(RuntimeError):
    """The scripted `raise` outcome: the provider refused or failed."""


class SummarizerTimeout(TimeoutError):
    """The scripted `timeout` outcome: the provider did not answer in time."""


@dataclass
class Call:
    """One call that reached the summarizer: its outcome, the markers it was given, its reply."""

    number: int
    outcome: str
    inputs: frozenset[str]
    reply: str | None = None


@dataclass
class ScriptedSummarizer:
    """See the module docs. `outcome` applies to every call until changed (retries included)."""

    outcome: str = "ok"
    calls: list[Call] = field(default_factory=list)
    counts: Counter[str] = field(default_factory=Counter)
    summaries: dict[str, Call] = field(default_factory=dict)
    _gate: asyncio.Event | None = None
    _after_hold: str = "ok"
    _reached: asyncio.Event | None = None

    # -- scripting ------------------------------------------------------------------------
    def script(self, outcome: str) -> None:
        if outcome not in OUTCOMES:
            raise ValueError(f"unknown outcome {outcome!r}")
        self.outcome = outcome
        if outcome == "hold":
            self._gate = asyncio.Event()
            self._reached = asyncio.Event()

    def release(self, outcome: str = "ok") -> None:
        """Let a held call answer with `outcome` (`ok`, `raise`, `timeout`, `empty`, `blank`)."""
        self._after_hold = outcome
        self.outcome = outcome
        if self._gate is not None:
            self._gate.set()

    @property
    def holding(self) -> bool:
        """Whether a call is waiting at the gate now."""
        return self._reached is not None and self._reached.is_set() and not self._gate_open

    @property
    def _gate_open(self) -> bool:
        return self._gate is None or self._gate.is_set()

    def reached_hold(self) -> bool:
        return self._reached is not None and self._reached.is_set()

    # -- the provider's side --------------------------------------------------------------
    def _begin(self, text: str, outcome: str) -> Call:
        inputs = frozenset(m.group(1) + m.group(2) for m in MARKER.finditer(text))
        call = Call(len(self.calls) + 1, outcome, inputs)
        self.calls.append(call)
        self.counts[outcome] += 1
        return call

    def _answer(self, call: Call, outcome: str) -> str:
        if outcome == "raise":
            raise SummarizerFailed(f"scripted provider failure (call {call.number})")
        if outcome == "timeout":
            raise SummarizerTimeout(f"scripted provider timeout (call {call.number})")
        if outcome in ("empty", "blank"):
            call.reply = "" if outcome == "empty" else BLANK
            return call.reply
        key = f"s{call.number}"
        call.reply = f"#{key} summary of {len(call.inputs)} items"
        self.summaries[key] = call
        return call.reply

    async def summarize(self, text: str) -> str:
        """Answer one call (async): see the module docs for each outcome."""
        outcome = self.outcome
        if outcome == "hold":
            call = self._begin(text, "hold")
            assert self._gate is not None and self._reached is not None
            self._reached.set()
            await self._gate.wait()
            outcome = self._after_hold
            self.counts[f"hold→{outcome}"] += 1
            call.outcome = f"hold→{outcome}"
            return self._answer(call, outcome)
        return self._answer(self._begin(text, outcome), outcome)

    def summarize_sync(self, text: str) -> str:
        """Answer one call (blocking); `hold` is not available here (answers `ok`)."""
        outcome = "ok" if self.outcome == "hold" else self.outcome
        return self._answer(self._begin(text, outcome), outcome)
