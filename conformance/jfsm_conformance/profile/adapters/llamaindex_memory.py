"""LlamaIndex's current `Memory` (with a `FactExtractionMemoryBlock`) under the profile,
offline.

`Memory` keeps a FIFO queue of active messages in a chat store; after every write
(`aput`, `aput_messages`) it runs `_manage_queue`: while the queue is over
`token_limit * chat_history_token_ratio` it archives the oldest messages
(`archive_oldest_messages`) and then hands them to each memory block (`block.aput`); a
`FactExtractionMemoryBlock` asks its `llm` for `<fact>` items and keeps them. `aget()`
puts the blocks' content into a system message in front of the active messages. The
adapter:

- `append` writes a user and an assistant `ChatMessage` through the chat store's
  `add_messages`, the write half of `aput_messages`;
- `compact` runs `Memory._manage_queue`, the step `aput_messages` runs after that write
  (split so the profile decides when compaction happens);
- the block's `llm` is the profile's `MockLLM` (`ProfileLLM`, shared with the
  `llamaindex-summary` adapter), whose `achat` hands the conversation to the profile's
  summarizer and answers in the block's format
  (`<facts><fact>REPLY</fact></facts>`; an empty or blank reply is passed on as it is);
- `read` is `aget()`: the facts in its system message, then the active messages;
- the chat store is an in-process `AsyncDBChatStore` (the semantics of the default
  `SQLAlchemyChatStore` on in-memory SQLite, without its database thread, so a held
  summarizer call is deterministic) that records the memory (facts and active messages)
  after every write and can fail its next `archive_oldest_messages` once (a remote chat
  store's write failing).

Token counting counts messages (`tokenizer_fn` gives one token per message):
`token_limit=6`, ratio 0.7, `token_flush_size=2`, so the queue keeps at most 4 messages.
"""

from __future__ import annotations

import re
from importlib import metadata
from typing import Any

from llama_index.core.llms import ChatMessage, MessageRole
from llama_index.core.memory import FactExtractionMemoryBlock, Memory
from llama_index.core.storage.chat_store.base_db import AsyncDBChatStore, MessageStatus
from pydantic import PrivateAttr

from jfsm_conformance.profile import AdapterSpec, ObservedStorage, Scope, ScriptedSummarizer
from jfsm_conformance.profile.adapters.llamaindex_summary import ProfileLLM, text_of

__all__ = ["LlamaIndexMemoryAdapter", "ProfileChatStore", "adapter", "as_facts", "scope"]

FACT = re.compile(r"<fact>(.*?)</fact>", re.DOTALL)
KEY = "jfsm-profile"
ACTIVE, ARCHIVED = MessageStatus.ACTIVE, MessageStatus.ARCHIVED


def scope() -> Scope:
    return Scope(
        library="llama-index-core",
        version=metadata.version("llama-index-core"),
        entry_point="llama_index.core.memory.Memory._manage_queue (run by aput_messages) "
        "with a FactExtractionMemoryBlock",
        writers="single",
        failures=frozenset({"raise", "timeout", "empty", "write_fail"}),
        storage="custom",
        # Memory archives a chunk before it calls the block's model, so a write failure armed
        # while that call is held can only hit a later chunk (or nothing): not the profile's
        # "the summary came back, then its write failed"; reads during the call are covered by
        # the states the store records (JF-SAFE-011)
        hold=False,
        notes=(
            "token_limit=6, ratio 0.7, token_flush_size=2, one token per message; "
            "an in-process AsyncDBChatStore (SQLAlchemyChatStore semantics)",
            "a non-blank reply is wrapped as one <fact>; an empty or blank one is passed on",
            "no held calls: the flushed messages are archived before the block's model is "
            "called, so a write cannot fail after the reply",
        ),
    )


def _one_token(text: str) -> list[str]:
    return [text]


def as_facts(reply: str) -> str:
    """A reply in the fact block's format (`<facts><fact>REPLY</fact></facts>`); an empty or
    blank reply is passed on as it is."""
    return f"<facts>\n  <fact>{reply}</fact>\n</facts>" if reply.strip() else reply


class ProfileChatStore(AsyncDBChatStore):
    """An in-process `AsyncDBChatStore`: rows of (key, status, message) in a list, the
    semantics of `SQLAlchemyChatStore` without its database thread."""

    _rows: list[Any] = PrivateAttr(default_factory=list)
    _observed: ObservedStorage = PrivateAttr(default_factory=ObservedStorage)
    _facts: Any = PrivateAttr(default=None)

    def _record(self, key: str) -> None:
        active = [m for k, s, m in self._rows if k == key and s == ACTIVE]
        self._observed.record([*self._facts(), *(text_of(m) for m in active)])

    async def get_messages(
        self, key: str, status: Any = ACTIVE, limit: Any = None, offset: Any = None
    ) -> list[Any]:
        rows = [m for k, s, m in self._rows if k == key and (status is None or s == status)]
        rows = rows[offset or 0 :]
        return rows[:limit] if limit is not None else rows

    async def count_messages(self, key: str, status: Any = ACTIVE) -> int:
        return len(await self.get_messages(key, status))

    async def add_message(self, key: str, message: Any, status: Any = ACTIVE) -> None:
        await self.add_messages(key, [message], status)

    async def add_messages(self, key: str, messages: list[Any], status: Any = ACTIVE) -> None:
        self._rows += [(key, MessageStatus(status), m) for m in messages]
        self._record(key)

    async def set_messages(self, key: str, messages: list[Any], status: Any = ACTIVE) -> None:
        self._rows = [r for r in self._rows if r[0] != key]
        await self.add_messages(key, messages, status)

    async def delete_message(self, key: str, idx: int) -> Any:
        mine = [i for i, r in enumerate(self._rows) if r[0] == key]
        return self._rows.pop(mine[idx])[2] if idx < len(mine) else None

    async def delete_messages(self, key: str, status: Any = None) -> None:
        self._rows = [r for r in self._rows if not (r[0] == key and status in (None, r[1]))]
        self._record(key)

    async def delete_oldest_messages(self, key: str, n: int) -> list[Any]:
        picked = [i for i, r in enumerate(self._rows) if r[0] == key and r[1] == ACTIVE][:n]
        out = [self._rows[i][2] for i in picked]
        self._rows = [r for i, r in enumerate(self._rows) if i not in picked]
        self._record(key)
        return out

    async def archive_oldest_messages(self, key: str, n: int) -> list[Any]:
        self._observed.fail_if_armed("scripted chat store write failure")
        picked = [i for i, r in enumerate(self._rows) if r[0] == key and r[1] == ACTIVE][:n]
        out = [self._rows[i][2] for i in picked]
        for i in picked:
            self._rows[i] = (key, ARCHIVED, self._rows[i][2])
        self._record(key)
        return out

    async def get_keys(self) -> list[str]:
        return sorted({r[0] for r in self._rows})


class LlamaIndexMemoryAdapter:
    def __init__(self, summarizer: ScriptedSummarizer) -> None:
        self.scope = scope()
        self.block = FactExtractionMemoryBlock(llm=ProfileLLM(summarizer, as_facts))
        self.store = ProfileChatStore()
        self.store._facts = lambda: list(self.block.facts)
        self.memory = Memory.from_defaults(
            session_id=KEY,
            token_limit=6,
            chat_history_token_ratio=0.7,
            token_flush_size=2,
            tokenizer_fn=_one_token,
            memory_blocks=[self.block],
        )
        self.memory.sql_store = self.store

    async def append(self, user: str, assistant: str) -> None:
        await self.store.add_messages(
            KEY,
            [
                ChatMessage(role=MessageRole.USER, content=user),
                ChatMessage(role=MessageRole.ASSISTANT, content=assistant),
            ],
        )

    async def compact(self) -> None:
        await self.memory._manage_queue()

    async def read(self) -> list[str]:
        out: list[str] = []
        for message in await self.memory.aget():
            if message.role == "system":
                out += [f.strip() for f in FACT.findall(text_of(message))]
            else:
                out.append(text_of(message))
        return out

    def observed_states(self) -> list[list[str]]:
        return self.store._observed.take()

    def fail_next_write(self, armed: bool = True) -> None:
        self.store._observed.arm(armed)

    async def close(self) -> None:
        return None


adapter = AdapterSpec(factory=LlamaIndexMemoryAdapter, scope=scope())
