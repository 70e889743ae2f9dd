"""The reference engine under the profile: `GameEngine` over an in-memory store.

`append` records a round (one exchange on the game stack), `compact` is
`before_generation()` (which compresses once the stack's canonical text passes the
threshold, set low here), `read` is the game stack in the store: the summary, then the
chunks by seq. The compressor hands the request's canonical text to the scripted
summarizer and maps its outcomes as `HttpCompressor` would map a provider's: a failure is a
refusal, a timeout a transport failure, an empty reply an ok result that the engine
judges invalid. The store fails one `publish_summary` projection when asked, and records
every state it commits.

Like the suite's drivers, this is the one adapter that imports the engine.
"""

from __future__ import annotations

from typing import Any

from jfsm import GameEngine, MemoryStore, Projection, StoreUnavailable
from jfsm.compressor import Attempt, CompressionRequest, CompressionResult, ParticipantSource
from jfsm_conformance.profile import (
    AdapterSpec,
    ObservedStorage,
    Scope,
    ScriptedSummarizer,
    SummarizerFailed,
    SummarizerTimeout,
)

__all__ = ["ReferenceAdapter", "adapter", "scope"]

THRESHOLD = 60
_CHUNK = "jfGameStack.chunk."
_SUMMARY = "jfGameStack.summary"


def scope() -> Scope:
    from jfsm import __version__

    return Scope(
        library="jfsm reference engine",
        version=__version__,
        entry_point="GameEngine.record_round / before_generation",
        writers="multi",
        writers_claim=(
            "jfsm's engine (D19): appends to a game are accepted while its compression call "
            "is in flight"
        ),
        failures=frozenset({"raise", "timeout", "empty", "write_fail"}),
        storage="native",
        hold=True,
        notes=(f"game threshold lowered to {THRESHOLD} canonical characters",),
    )


class _ScriptedCompressor:
    """A `Compressor` whose provider is the scripted summarizer."""

    def __init__(self, summarizer: ScriptedSummarizer) -> None:
        self.summarizer = summarizer

    async def compress(
        self, request: CompressionRequest, participants: ParticipantSource
    ) -> CompressionResult:
        try:
            summary = await self.summarizer.summarize(request.text)
        except SummarizerFailed:
            attempt = Attempt(1, "refused", "call-refused", 0.0, detail="provider_error")
            return CompressionResult("refused", (attempt,), "call-refused", None, "provider_error")
        except SummarizerTimeout:
            attempt = Attempt(1, "transport", None, 0.0, detail="timeout")
            return CompressionResult("transport", (attempt,), error_code="timeout")
        call = f"call-{len(self.summarizer.calls)}"
        attempt = Attempt(1, "ok", call, 0.0, output_chars=len(summary))
        return CompressionResult("ok", (attempt,), call_id=call, summary=summary)


class _RecordingStore(MemoryStore):
    """A memory store that can refuse one summary publication and records its states."""

    def __init__(self) -> None:
        super().__init__()
        self.observed = ObservedStorage()

    async def commit(self, projection: Projection) -> None:
        if self.observed.armed and projection.label == "publish_summary":
            self.observed.arm(False)
            raise StoreUnavailable("scripted write failure", state="open")
        await super().commit(projection)
        self.observed.record(entries(self.image.store_json()))


def entries(store: dict[str, Any]) -> list[str]:
    """The game stack as texts: the summary, then each chunk's user and assistant text."""
    out = [store[_SUMMARY]["text"]] if _SUMMARY in store else []
    chunks = sorted((int(k[len(_CHUNK) :]), v) for k, v in store.items() if k.startswith(_CHUNK))
    for _, chunk in chunks:
        out += [chunk["user"], chunk["assistant"]]
    return out


class ReferenceAdapter:
    def __init__(self, summarizer: ScriptedSummarizer) -> None:
        self.scope = scope()
        self.store = _RecordingStore()
        self.engine = GameEngine(
            self.store,
            _ScriptedCompressor(summarizer),
            game_id="profile",
            participants=[{"id": "p1", "human": True}],
            thresholds={"game": THRESHOLD},
        )

    async def append(self, user: str, assistant: str) -> None:
        await self.engine.record_round(user, assistant)

    async def compact(self) -> None:
        await self.engine.before_generation()

    async def read(self) -> list[str]:
        return entries(self.store.image.store_json())

    def observed_states(self) -> list[list[str]]:
        return self.store.observed.take()

    def fail_next_write(self, armed: bool = True) -> None:
        self.store.observed.arm(armed)

    async def close(self) -> None:
        await self.engine.close()


adapter = AdapterSpec(factory=ReferenceAdapter, scope=scope())
