"""A list-backed toy memory, correct by default, with switchable bugs: the profile's own test
subject and the model to copy for an adapter of your own.

The memory is a list of texts in a `ToyStore` that yields on every call and can fail one
write. `compact()` snapshots the entries before the last exchange, awaits the summarizer,
then replaces exactly the snapshot with the summary in one write, keeping whatever was
appended meanwhile. `--adapter toy:BUG` turns on one bug (see `BUGS`): each one breaks
the property its name says, the way a real library once did.

What the profile takes is an `AdapterSpec`: `adapter` below is the correct memory, and each
bug has one of its own (`stale_snapshot` for `toy:stale-snapshot`), so
`jfsm profile --adapter jfsm_conformance.profile.adapters.toy:adapter` runs this module as
any module of yours would run. Copy it, replace `ToyStore` and `ToyMemory` with your
memory, and keep the last lines.
"""

from __future__ import annotations

import asyncio

from jfsm_conformance.profile import AdapterSpec, ObservedStorage, Scope, ScriptedSummarizer

__all__ = ["BUGS", "ToyMemory", "adapter", "scope"]

BUGS: dict[str, str] = {
    "": "no bug",
    "lose-append": "an append after a summary overwrites the previous last message",
    "error-as-summary": "a failed summarizer call publishes its error text as the summary",
    "empty-publishes": "an empty summary is published like any other",
    "stale-snapshot": "the replacement is written from the snapshot, dropping later appends",
    "clear-then-add": "the replacement clears the store, then adds (no restore on failure)",
    "drop-extra": "the replacement also drops the first message kept after the prefix",
    "keep-summarized": "the summarized messages stay next to the summary",
    "reorder": "the kept messages come back reversed",
    "resummarize": "every compaction summarizes again, even with nothing new",
    "drop-summary": "a compaction leaves the previous summary out of its input and drops it",
    "placeholder": "a long prefix is replaced by a placeholder text, never summarized",
}
PLACEHOLDER = "[earlier conversation too long to summarize]"


def scope(variant: str = "") -> Scope:
    if variant not in BUGS:
        raise KeyError(f"toy has no bug {variant!r}; known: {sorted(BUGS)}")
    return Scope(
        library="toy memory" + (f" [{variant}]" if variant else ""),
        version="0",
        entry_point="ToyMemory.compact",
        writers="multi",
        writers_claim=(
            "the toy memory's own claim: appends and compactions of one memory may interleave"
        ),
        failures=frozenset({"raise", "timeout", "empty", "write_fail"}),
        storage="custom",
        hold=True,
        notes=(BUGS[variant],),
    )


class ToyStore:
    """Entries in a list; every call yields; one write can be made to fail."""

    def __init__(self) -> None:
        self.entries: list[str] = []
        self.observed = ObservedStorage()  # what the profile reads: states, a write to fail

    async def write(self, entries: list[str]) -> None:
        await asyncio.sleep(0)
        self.observed.fail_if_armed()
        self.entries = list(entries)
        self.observed.record(entries)

    async def read(self) -> list[str]:
        await asyncio.sleep(0)
        return list(self.entries)

    async def clear(self) -> None:
        await asyncio.sleep(0)
        self.entries = []
        self.observed.record([])


class ToyMemory:
    """The five operations of an adapter (see `Adapter`) around the toy store."""

    def __init__(self, summarizer: ScriptedSummarizer, bug: str = "") -> None:
        self.scope = scope(bug)
        self.bug = bug
        self.summarizer = summarizer
        self.store = ToyStore()
        self.summaries = 0
        self.lock = asyncio.Lock()

    async def append(self, user: str, assistant: str) -> None:
        async with self.lock:
            entries = await self.store.read()
            if self.bug == "lose-append" and self.summaries and len(entries) > 1:
                entries = entries[:-1]
            await self.store.write([*entries, user, assistant])

    async def compact(self) -> None:
        async with self.lock:
            entries = await self.store.read()
        prefix = entries[:-2] if self.bug != "resummarize" else entries
        if (len(prefix) < 2 and self.bug != "resummarize") or not prefix:
            return
        summarized = prefix
        if self.bug == "drop-summary" and self.summaries:
            summarized = prefix[1:]
        try:
            if self.bug == "placeholder" and len(prefix) >= 6:
                summary = PLACEHOLDER
            else:
                summary = await self.summarizer.summarize("\n".join(summarized))
        except Exception as exc:
            if self.bug != "error-as-summary":
                raise
            summary = f"Error generating summary: {exc}"
        if not summary.strip() and self.bug != "empty-publishes":
            return
        async with self.lock:
            now = await self.store.read()
            later = now[len(prefix) :]
            if self.bug == "stale-snapshot":
                later = entries[len(prefix) :]
            if self.bug == "drop-extra":
                later = later[1:]
            if self.bug == "reorder":
                later = later[::-1]
            kept = prefix if self.bug == "keep-summarized" else []
            replacement = [*kept, summary, *later]
            if self.bug == "clear-then-add":
                await self.store.clear()
            await self.store.write(replacement)
            self.summaries += 1

    async def read(self) -> list[str]:
        return await self.store.read()

    def observed_states(self) -> list[list[str]]:
        return self.store.observed.take()

    def fail_next_write(self, armed: bool = True) -> None:
        self.store.observed.arm(armed)

    async def close(self) -> None:
        return None


def _with_bug(bug: str) -> AdapterSpec:
    """The toy with `bug` switched on: each adapter it makes has that bug."""
    return AdapterSpec(factory=lambda summarizer: ToyMemory(summarizer, bug), scope=scope(bug))


adapter = AdapterSpec(factory=ToyMemory, scope=scope())
lose_append = _with_bug("lose-append")
error_as_summary = _with_bug("error-as-summary")
empty_publishes = _with_bug("empty-publishes")
stale_snapshot = _with_bug("stale-snapshot")
clear_then_add = _with_bug("clear-then-add")
drop_extra = _with_bug("drop-extra")
keep_summarized = _with_bug("keep-summarized")
reorder = _with_bug("reorder")
resummarize = _with_bug("resummarize")
drop_summary = _with_bug("drop-summary")
placeholder = _with_bug("placeholder")
