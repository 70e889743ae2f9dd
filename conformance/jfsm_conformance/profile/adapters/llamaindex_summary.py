"""LlamaIndex's `ChatSummaryMemoryBuffer` under the profile, offline.

`ChatSummaryMemoryBuffer` keeps the chat in a chat store and compacts on `get()`: it walks
back from the newest message while the token limit allows, summarizes the older ones with
its `llm` (one system message holding the reply) and writes `[summary, *recent]` back
(`reset()` then `set()`). The adapter:

- `append` puts a user and an assistant `ChatMessage` through `put`;
- `compact` calls `get()`, the library's own entry point (what a chat engine calls before
  each model call), with a `MockLLM` subclass whose `complete` hands the prompt to the
  profile's summarizer (sync: `get()` is synchronous, so nothing can be held);
- `read` is the chat store's list (`get_all()`), what the next `get()` starts from;
- the chat store is a `SimpleChatStore` subclass that records every state it holds and can
  fail its next `set_messages` once (a remote chat store's write failing).

Token counting counts messages (`tokenizer_fn` gives one token per message): the last 4
messages stay verbatim. One writer.
"""

from __future__ import annotations

from importlib import metadata
from typing import Any

from ..adapter import Scope, Unavailable
from ..summarizer import ScriptedSummarizer

__all__ = ["factory", "scope"]


def _require() -> str:
    try:
        import llama_index.core.memory  # noqa: F401
    except ImportError as exc:
        raise Unavailable(
            f"llama-index-core is not installed ({exc}); install the extra profile-llamaindex"
        ) from exc
    return metadata.version("llama-index-core")


def scope(variant: str = "") -> Scope:
    return Scope(
        library="llama-index-core",
        version=_require(),
        entry_point="llama_index.core.memory.ChatSummaryMemoryBuffer.get",
        writers="single",
        failures=frozenset({"raise", "timeout", "empty", "write_fail"}),
        storage="custom",
        hold=False,
        notes=("token_limit=4, one token per message; SimpleChatStore subclass",),
    )


def _one_token(text: str) -> list[str]:
    return [text]


def _classes() -> tuple[Any, Any]:
    from llama_index.core.base.llms.types import CompletionResponse
    from llama_index.core.llms import MockLLM
    from llama_index.core.llms.callbacks import llm_completion_callback
    from llama_index.core.storage.chat_store import SimpleChatStore
    from pydantic import PrivateAttr

    class ProfileLLM(MockLLM):
        _summarizer: Any = PrivateAttr(default=None)

        @llm_completion_callback()
        def complete(self, prompt: str, formatted: bool = False, **kwargs: Any) -> Any:
            return CompletionResponse(text=self._summarizer.summarize_sync(prompt))

    class ProfileChatStore(SimpleChatStore):
        _states: list[Any] = PrivateAttr(default_factory=list)
        _fail_next: bool = PrivateAttr(default=False)

        def set_messages(self, key: str, messages: list[Any]) -> None:
            if self._fail_next:
                self._fail_next = False
                raise ConnectionError("scripted chat store write failure")
            super().set_messages(key, messages)
            self._states.append([str(m.content) for m in messages])

        def delete_messages(self, key: str) -> Any:
            out = super().delete_messages(key)
            self._states.append([])
            return out

    return ProfileLLM, ProfileChatStore


class LlamaIndexSummaryAdapter:
    def __init__(self, summarizer: ScriptedSummarizer) -> None:
        from llama_index.core.memory import ChatSummaryMemoryBuffer

        self.scope = scope()
        llm_cls, store_cls = _classes()
        self.llm = llm_cls()
        self.llm._summarizer = summarizer
        self.store = store_cls()
        self.memory = ChatSummaryMemoryBuffer.from_defaults(
            llm=self.llm, token_limit=4, tokenizer_fn=_one_token, chat_store=self.store
        )

    async def append(self, user: str, assistant: str) -> None:
        from llama_index.core.llms import ChatMessage, MessageRole

        self.memory.put(ChatMessage(role=MessageRole.USER, content=user))
        self.memory.put(ChatMessage(role=MessageRole.ASSISTANT, content=assistant))

    async def compact(self) -> None:
        self.memory.get()

    async def read(self) -> list[str]:
        return [str(m.content) for m in self.memory.get_all()]

    def observed_states(self) -> list[list[str]]:
        states, self.store._states = self.store._states, []
        return list(states)

    def fail_next_write(self, armed: bool = True) -> None:
        self.store._fail_next = armed

    async def close(self) -> None:
        return None


def factory(variant: str = "") -> Any:
    return LlamaIndexSummaryAdapter
