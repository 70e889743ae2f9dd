"""LlamaIndex's `ChatSummaryMemoryBuffer` under the profile, offline.

`ChatSummaryMemoryBuffer` keeps the chat in a chat store and compacts on `get()`: it walks
back from the newest message while the token limit allows, summarizes the older ones with
its `llm` (one system message holding the reply) and writes `[summary, *recent]` back
(`reset()` then `set()`). The adapter:

- `append` puts a user and an assistant `ChatMessage` through `put`;
- `compact` calls `get()`, the library's own entry point (what a chat engine calls before
  each model call), with `ProfileLLM`, a `MockLLM` subclass whose `complete` hands the prompt to the
  profile's summarizer (sync: `get()` is synchronous, so nothing can be held);
- `read` is the chat store's list (`get_all()`), what the next `get()` starts from;
- the chat store is a `SimpleChatStore` subclass that records every state it holds and can
  fail its next `set_messages` once (a remote chat store's write failing).

Token counting counts messages (`tokenizer_fn` gives one token per message): the last 4
messages stay verbatim. One writer.
"""

from __future__ import annotations

from collections.abc import Callable
from importlib import metadata
from typing import Any

from llama_index.core.base.llms.types import ChatResponse, CompletionResponse
from llama_index.core.llms import ChatMessage, MessageRole, MockLLM
from llama_index.core.llms.callbacks import llm_chat_callback, llm_completion_callback
from llama_index.core.memory import ChatSummaryMemoryBuffer
from llama_index.core.storage.chat_store import SimpleChatStore
from pydantic import PrivateAttr

from jfsm_conformance.profile import AdapterSpec, ObservedStorage, Scope, ScriptedSummarizer

__all__ = [
    "LlamaIndexSummaryAdapter",
    "ProfileChatStore",
    "ProfileLLM",
    "adapter",
    "scope",
    "text_of",
]


def scope() -> Scope:
    return Scope(
        library="llama-index-core",
        version=metadata.version("llama-index-core"),
        entry_point="llama_index.core.memory.ChatSummaryMemoryBuffer.get",
        writers="single",
        failures=frozenset({"raise", "timeout", "empty", "write_fail"}),
        storage="custom",
        hold=False,
        notes=("token_limit=4, one token per message; SimpleChatStore subclass",),
    )


def _one_token(text: str) -> list[str]:
    return [text]


class ProfileLLM(MockLLM):
    """LlamaIndex's own `MockLLM`, answering with the scripted summarizer: `complete` (sync,
    what `ChatSummaryMemoryBuffer` calls) and `achat` (async, what a memory block calls),
    each reply passed through `shape` (the caller's reply format; the text as it is by
    default). Shared by both LlamaIndex adapters."""

    _summarizer: Any = PrivateAttr(default=None)
    _shape: Any = PrivateAttr(default=None)

    def __init__(self, summarizer: ScriptedSummarizer, shape: Callable[[str], str] = str) -> None:
        super().__init__()
        self._summarizer = summarizer
        self._shape = shape

    @llm_completion_callback()
    def complete(self, prompt: str, formatted: bool = False, **kwargs: Any) -> Any:
        return CompletionResponse(text=self._shape(self._summarizer.summarize_sync(prompt)))

    @llm_chat_callback()
    async def achat(self, messages: Any, **kwargs: Any) -> Any:
        reply = await self._summarizer.summarize("\n".join(text_of(m) for m in messages))
        content = self._shape(reply)
        return ChatResponse(message=ChatMessage(role=MessageRole.ASSISTANT, content=content))


def text_of(message: Any) -> str:
    """A LlamaIndex message's text (its text blocks, joined)."""
    return "".join(getattr(b, "text", "") or "" for b in message.blocks)


class ProfileChatStore(SimpleChatStore):
    """A `SimpleChatStore` that records every state it holds and can fail one write."""

    _observed: ObservedStorage = PrivateAttr(default_factory=ObservedStorage)

    def set_messages(self, key: str, messages: list[Any]) -> None:
        self._observed.fail_if_armed("scripted chat store write failure")
        super().set_messages(key, messages)
        self._observed.record([str(m.content) for m in messages])

    def delete_messages(self, key: str) -> Any:
        out = super().delete_messages(key)
        self._observed.record([])
        return out


class LlamaIndexSummaryAdapter:
    def __init__(self, summarizer: ScriptedSummarizer) -> None:
        self.scope = scope()
        self.llm = ProfileLLM(summarizer)
        self.store = ProfileChatStore()
        self.memory = ChatSummaryMemoryBuffer.from_defaults(
            llm=self.llm, token_limit=4, tokenizer_fn=_one_token, chat_store=self.store
        )

    async def append(self, user: str, assistant: str) -> None:
        self.memory.put(ChatMessage(role=MessageRole.USER, content=user))
        self.memory.put(ChatMessage(role=MessageRole.ASSISTANT, content=assistant))

    async def compact(self) -> None:
        self.memory.get()

    async def read(self) -> list[str]:
        return [str(m.content) for m in self.memory.get_all()]

    def observed_states(self) -> list[list[str]]:
        return self.store._observed.take()

    def fail_next_write(self, armed: bool = True) -> None:
        self.store._observed.arm(armed)

    async def close(self) -> None:
        return None


adapter = AdapterSpec(factory=LlamaIndexSummaryAdapter, scope=scope())
