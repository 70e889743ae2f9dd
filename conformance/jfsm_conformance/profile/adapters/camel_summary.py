"""CAMEL's `ChatAgent` summarization (`camel-ai`) under the profile, offline.

A CAMEL `ChatAgent` keeps its conversation in its memory (a `ChatHistoryMemory` by
default). Before each model call, `astep` runs `_get_context_with_summarization_async`:
once the memory's token count passes `summarize_threshold` percent of the token limit, it
asks `asummarize()` for a summary (a second `ChatAgent` on the same model, prompted with the
conversation) and then `_update_memory_with_summary(summary)` clears the memory, puts back
the earlier `[CONTEXT_SUMMARY]` messages, adds the new one and re-adds the last user message
prefixed with "Based on the previous CONTEXT_SUMMARY, continue with my current message: ".
When the summary's tokens pass `summary_window_ratio` of the limit it summarizes the
summaries too (full compression). The adapter:

- `append` adds a user and an assistant message through `update_memory`, as `astep` does;
- `compact` is that step, `await agent._get_context_with_summarization_async()`;
- the model is CAMEL's own test double, a `StubModel` subclass whose `_arun` hands the
  request's text to the profile's summarizer (async, so it can be held) and answers a
  `ChatCompletion` with its reply (an empty summary is an empty content); a failure or a
  timeout raises from `_arun`. Its token counter counts 10 tokens a message, and the
  token limit is 100, so the default threshold (50) summarizes past 5 messages;
- `read` is the memory's context, what the next model call is sent, the texts in order;
- the summary's markdown file goes to a temporary directory (`ContextUtility`), removed on
  `close()`.

One configuration, the constructor's default, `summarize_threshold=50` (the `camel`
adapter). One writer: a `ChatAgent`'s memory is its own (a workforce's `share_memory`
copies histories between workers, it does not share one memory).
"""

from __future__ import annotations

import shutil
import tempfile
from importlib import metadata
from typing import Any

from camel.agents import ChatAgent
from camel.messages import BaseMessage
from camel.models.stub_model import StubModel
from camel.types import ModelType, OpenAIBackendRole
from camel.utils.context_utils import ContextUtility
from camel.utils.token_counting import BaseTokenCounter
from openai.types.chat import ChatCompletion, ChatCompletionMessage
from openai.types.chat.chat_completion import Choice
from openai.types.completion_usage import CompletionUsage

from jfsm_conformance.profile import AdapterSpec, Scope, ScriptedSummarizer

__all__ = ["CamelSummaryAdapter", "ProfileModel", "ProfileTokenCounter", "adapter", "scope"]

_TOKEN_LIMIT = 100


def scope() -> Scope:
    return Scope(
        library="camel-ai",
        version=metadata.version("camel-ai"),
        entry_point="ChatAgent._get_context_with_summarization_async (summarize_threshold=50)",
        writers="single",
        failures=frozenset({"raise", "timeout", "empty"}),
        storage="none",
        hold=True,
        notes=(
            f"token_limit={_TOKEN_LIMIT}, 10 tokens a message; StubModel subclass as the model",
            "read: the memory's context (what the next model call is sent)",
        ),
    )


class ProfileTokenCounter(BaseTokenCounter):
    """10 tokens a message, so the thresholds are counted in messages."""

    def count_tokens_from_messages(self, messages: list[Any]) -> int:
        return 10 * len(messages)

    def encode(self, text: str) -> list[int]:
        return [0] * len(text)

    def decode(self, token_ids: list[int]) -> str:
        return ""


class ProfileModel(StubModel):
    """CAMEL's `StubModel` answering with the profile's summarizer."""

    summarizer: Any = None

    async def _arun(self, messages: Any, response_format: Any = None, tools: Any = None) -> Any:
        text = "\n".join(str(m.get("content", "")) for m in messages)
        reply = await self.summarizer.summarize(text)
        return ChatCompletion(
            id="jfsm-profile",
            model="stub",
            object="chat.completion",
            created=0,
            choices=[
                Choice(
                    finish_reason="stop",
                    index=0,
                    message=ChatCompletionMessage(content=reply, role="assistant"),
                )
            ],
            usage=CompletionUsage(completion_tokens=1, prompt_tokens=1, total_tokens=2),
        )


class CamelSummaryAdapter:
    def __init__(self, summarizer: ScriptedSummarizer) -> None:
        self.scope = scope()
        model = ProfileModel(ModelType.STUB, token_counter=ProfileTokenCounter())
        model.summarizer = summarizer
        self.agent = ChatAgent(model=model, token_limit=_TOKEN_LIMIT, summarize_threshold=50)
        self.folder = tempfile.mkdtemp(prefix="jfsm-profile-camel-")
        self.agent._context_utility = ContextUtility(working_directory=self.folder)

    async def append(self, user: str, assistant: str) -> None:
        self.agent.update_memory(
            BaseMessage.make_user_message("user", user), OpenAIBackendRole.USER
        )
        self.agent.update_memory(
            BaseMessage.make_assistant_message("assistant", assistant),
            OpenAIBackendRole.ASSISTANT,
        )

    async def compact(self) -> None:
        await self.agent._get_context_with_summarization_async()

    async def read(self) -> list[str]:
        messages, _ = self.agent.memory.get_context()
        return [str(m.get("content") or "") for m in messages if m.get("role") != "system"]

    def observed_states(self) -> list[list[str]]:
        return []  # no storage of its own

    def fail_next_write(self, armed: bool = True) -> None:
        return None  # not in scope: the memory is rewritten in place

    async def close(self) -> None:
        shutil.rmtree(self.folder, ignore_errors=True)


adapter = AdapterSpec(factory=CamelSummaryAdapter, scope=scope())
