"""AutoGen's model contexts (`autogen_core.model_context`) under the profile, offline.

A model context is what an `AssistantAgent` (autogen-agentchat) keeps for its model: the
agent adds every message with `add_message` and, before each model call, sends what
`get_messages()` returns. The stored list (`_messages`, what `save_state` saves) keeps
every message; each context chooses a *view* of it, and none of them calls a model:

| adapter | context, configured | view |
|---|---|---|
| `autogen-unbounded` | `Unbounded...` (the agent's default) | every message |
| `autogen-buffered` | `Buffered...(buffer_size=4)` | the last 4 |
| `autogen-head-tail` | `HeadAndTail...(head_size=2, tail_size=2)` | first 2, placeholder, last 2 |
| `autogen-token-limited` | `TokenLimited...(token_limit=4)` | middle popped to 4 messages |

(The head-and-tail placeholder is a user message "Skipped N messages."; the token-limited
context counts tokens with its model client, here one token per message.)

The adapter: `append` adds a `UserMessage` and an `AssistantMessage`; `compact` is
`get_messages()`, the step the agent takes before its model call (there is no compaction:
it changes nothing); `read` is the view `get_messages()` returns. So JF-SAFE-001 (the view
keeps every message, or a summary of it) and -008 (order) are what a context decides; the
properties of a summarizer call and its replacement (JF-SAFE-002 to -007 and -009 to -014)
have no call to judge and are not applicable, each with that reason.

A context that summarized would subclass `ChatCompletionContext` and need: a
model call of its own (in `get_messages`, or after `add_message`), a place for the summary
that `save_state` keeps next to the messages it stands for, and a replacement that leaves
the stored list as it was when the call fails, times out or answers nothing.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from functools import partial
from importlib import metadata
from typing import Any

from autogen_core.model_context import (
    BufferedChatCompletionContext,
    ChatCompletionContext,
    HeadAndTailChatCompletionContext,
    TokenLimitedChatCompletionContext,
    UnboundedChatCompletionContext,
)
from autogen_core.models import AssistantMessage, UserMessage

from jfsm_conformance.profile import AdapterSpec, Scope, ScriptedSummarizer

__all__ = [
    "AutoGenContextAdapter",
    "MessageCounter",
    "buffered",
    "head_and_tail",
    "scope",
    "token_limited",
    "unbounded",
]

NO_SUMMARIZER = (
    "no summarizer: an AutoGen model context never calls a model, so there is no summary "
    "call whose outcome, reply or replacement this property judges"
)
_NOT_APPLICABLE = (
    "JF-SAFE-005",
    "JF-SAFE-006",
    "JF-SAFE-007",
    "JF-SAFE-011",
    "JF-SAFE-012",
    "JF-SAFE-013",
    "JF-SAFE-014",
)


class MessageCounter:
    """The token counting `TokenLimitedChatCompletionContext` asks its model client for:
    one token per message (the client's two counting methods, nothing else)."""

    def __init__(self, limit: int = 1_000_000) -> None:
        self.limit = limit

    def count_tokens(self, messages: Sequence[Any], *, tools: Sequence[Any] = ()) -> int:
        return len(messages)

    def remaining_tokens(self, messages: Sequence[Any], *, tools: Sequence[Any] = ()) -> int:
        return self.limit - len(messages)


def scope(context: str, config: str, by_design: str = "") -> Scope:
    return Scope(
        library="autogen-core",
        version=metadata.version("autogen-core"),
        entry_point=f"autogen_core.model_context.{context}.get_messages",
        writers="single",
        failures=frozenset(),
        storage="none",
        hold=False,
        by_design={"JF-SAFE-001": by_design} if by_design else {},
        not_applicable=dict.fromkeys(_NOT_APPLICABLE, NO_SUMMARIZER),
        notes=(config, "no summarizer: compact() is get_messages(), which changes nothing"),
    )


def _text(message: Any) -> str:
    return message.content if isinstance(message.content, str) else str(message.content)


class AutoGenContextAdapter:
    def __init__(
        self,
        summarizer: ScriptedSummarizer,
        make: Callable[[], ChatCompletionContext],
        declared: Scope,
    ) -> None:
        self.scope = declared
        self.context = make()

    async def append(self, user: str, assistant: str) -> None:
        for message in (
            UserMessage(content=user, source="user"),
            AssistantMessage(content=assistant, source="assistant"),
        ):
            await self.context.add_message(message)

    async def compact(self) -> None:
        await self.context.get_messages()

    async def read(self) -> list[str]:
        return [_text(m) for m in await self.context.get_messages()]

    def observed_states(self) -> list[list[str]]:
        return []  # nothing is ever replaced: see the module docs

    def fail_next_write(self, armed: bool = True) -> None:
        return None  # not in scope: the context writes nothing but its own list

    async def close(self) -> None:
        return None


def _context(
    make: Callable[[], ChatCompletionContext], context: str, config: str, by_design: str = ""
) -> AdapterSpec:
    declared = scope(context, config, by_design)
    return AdapterSpec(
        factory=lambda summarizer: AutoGenContextAdapter(summarizer, make, declared),
        scope=declared,
    )


unbounded = _context(
    UnboundedChatCompletionContext,
    context="UnboundedChatCompletionContext",
    config="every message (the AssistantAgent's default)",
)
buffered = _context(
    partial(BufferedChatCompletionContext, buffer_size=4),
    context="BufferedChatCompletionContext",
    config="buffer_size=4",
    by_design="documented: 'a buffered chat completion context that keeps a view of the last "
    "n messages, where n is the buffer size'; the older messages stay in the stored list "
    "(save_state) but the model is no longer sent them, and nothing summarizes them.",
)
head_and_tail = _context(
    partial(HeadAndTailChatCompletionContext, head_size=2, tail_size=2),
    context="HeadAndTailChatCompletionContext",
    config="head_size=2, tail_size=2",
    by_design="documented: 'a chat completion context that keeps a view of the first n and "
    "last m messages'; the messages between are replaced in the view by a 'Skipped N "
    "messages.' placeholder and stay only in the stored list.",
)
token_limited = _context(
    partial(TokenLimitedChatCompletionContext, MessageCounter(), token_limit=4),
    context="TokenLimitedChatCompletionContext",
    config="token_limit=4, one token per message",
    by_design="documented (experimental): 'maintains a view of the context up to a token "
    "limit'; get_messages pops the middle message until the count fits, so the middle of "
    "the conversation leaves the view unsummarized.",
)
