"""Semantic Kernel's `ChatHistorySummarizationReducer` under the profile, offline.

The reducer *is* the chat history (a `ChatHistory` subclass): messages are appended to it,
and `reduce()`, called by the application before the next model call (or by
`add_message_async` with `auto_reduce=True`), summarizes everything before the last
`target_count` messages with its `service` once there are more than `target_count +
threshold_count`, then assigns `[summary, *kept]` to `messages` (one assignment, after the
reply). The adapter:

- `append` adds a user and an assistant message (`add_user_message`,
  `add_assistant_message`);
- `compact` is `await reduce()`, with `target_count=2, threshold_count=2` (summarize once
  more than 4 messages are held, keep the last 2, or more to start at a user message);
- the `service` is a `ChatCompletionClientBase` subclass whose
  `_inner_get_chat_message_contents` hands the history's text to the profile's summarizer
  and answers one assistant `ChatMessageContent`, as the OpenAI connector does; a failure
  or a timeout is the connectors' `ServiceResponseException`; an empty summary is an
  assistant message with empty content;
- `read` is the reducer's messages, what the next model call is given.

One writer: a `ChatHistory` is an object in the application's memory, with no storage of
its own and no claim to concurrent writers.
"""

from __future__ import annotations

from importlib import metadata
from typing import Any

from semantic_kernel.connectors.ai.chat_completion_client_base import ChatCompletionClientBase
from semantic_kernel.contents import AuthorRole, ChatMessageContent
from semantic_kernel.contents.history_reducer.chat_history_summarization_reducer import (
    ChatHistorySummarizationReducer,
)
from semantic_kernel.exceptions import ServiceResponseException

from jfsm_conformance.profile import (
    AdapterSpec,
    Scope,
    ScriptedSummarizer,
    SummarizerFailed,
    SummarizerTimeout,
)

__all__ = ["ProfileChatService", "SemanticKernelAdapter", "adapter", "scope"]


def scope() -> Scope:
    return Scope(
        library="semantic-kernel",
        version=metadata.version("semantic-kernel"),
        entry_point="ChatHistorySummarizationReducer.reduce",
        writers="single",
        failures=frozenset({"raise", "timeout", "empty"}),
        storage="none",
        hold=True,
        notes=(
            "target_count=2, threshold_count=2, use_single_summary and fail_on_error as default",
            "the service: a ChatCompletionClientBase subclass answering one assistant message",
        ),
    )


class ProfileChatService(ChatCompletionClientBase):
    """A chat completion service whose replies are the scripted summarizer's."""

    summarizer: Any = None

    async def _inner_get_chat_message_contents(
        self, chat_history: Any, settings: Any
    ) -> list[ChatMessageContent]:
        text = "\n".join(str(m.content) for m in chat_history.messages)
        try:
            reply = await self.summarizer.summarize(text)
        except (SummarizerFailed, SummarizerTimeout) as exc:
            raise ServiceResponseException(f"the service failed: {exc}") from exc
        return [ChatMessageContent(role=AuthorRole.ASSISTANT, content=reply)]


class SemanticKernelAdapter:
    def __init__(self, summarizer: ScriptedSummarizer) -> None:
        self.scope = scope()
        service = ProfileChatService(ai_model_id="jfsm-profile-fake", summarizer=summarizer)
        self.history = ChatHistorySummarizationReducer(
            service=service, target_count=2, threshold_count=2
        )

    async def append(self, user: str, assistant: str) -> None:
        self.history.add_user_message(user)
        self.history.add_assistant_message(assistant)

    async def compact(self) -> None:
        await self.history.reduce()

    async def read(self) -> list[str]:
        return [str(m.content) for m in self.history.messages]

    def observed_states(self) -> list[list[str]]:
        return []  # no storage of its own

    def fail_next_write(self, armed: bool = True) -> None:
        return None  # not in scope: the reducer writes nothing but its own list

    async def close(self) -> None:
        return None


adapter = AdapterSpec(factory=SemanticKernelAdapter, scope=scope())
