"""pydantic-ai's history processors under the profile: the summarizing processor its docs
show ("Summarize Old Messages", docs/message-history.md), offline.

A pydantic-ai application keeps the conversation itself (`result.all_messages()`, passed
back as `message_history`); a history processor, attached as
`capabilities=[ProcessHistory(fn)]` (the `history_processors=` of earlier releases), is run
by `ProcessHistory.before_model_request` on the history before each model request, and its
result replaces the run's history. The docs' summarizing processor
(`summarize_old_messages`, in `PydanticAIHistoryAdapter.__init__` below, verbatim but for its
agent's model) summarizes `messages[:10]` with a second agent once there are more than 10
messages, and returns the summary run's new messages followed by `messages[-1:]`.

The adapter:

- `append` adds an exchange to the application's history, as a run leaves it: a
  `ModelRequest` with the user prompt and a `ModelResponse` with the reply;
- `compact` runs the processor as `ProcessHistory` runs it before the next model request:
  over the history followed by that request (here a request with an empty prompt, which
  stands for it and is taken off again), and keeps what it returns (a run's
  `all_messages()` starts with it);
- `summarize_agent` is an `Agent` over pydantic-ai's own test double, `FunctionModel`, whose
  function hands the messages' text to the profile's summarizer (async, so it can be held)
  and answers one `TextPart`; a failure is `ModelHTTPError` (500), a timeout
  `ModelAPIError`, as a provider's model raises them;
- `read` is the texts of the history's parts, what the next request is built from.

One writer (the application's list), no storage of its own. Run before every request, the
processor sees 11 messages when it first summarizes, and `messages[-1:]` keeps the new
request; a history that reaches it longer (one loaded from storage, shared from another
agent, or grown while summaries failed) loses `messages[10:-1]`.
"""

from __future__ import annotations

from importlib import metadata
from typing import Any

from pydantic_ai import Agent, ModelMessage, ModelRequest, ModelResponse, TextPart, UserPromptPart
from pydantic_ai.exceptions import ModelAPIError, ModelHTTPError
from pydantic_ai.models.function import AgentInfo, FunctionModel

from jfsm_conformance.profile import (
    AdapterSpec,
    Scope,
    ScriptedSummarizer,
    SummarizerFailed,
    SummarizerTimeout,
)

__all__ = ["PydanticAIHistoryAdapter", "adapter", "scope"]

INSTRUCTIONS = """
Summarize this conversation, omitting small talk and unrelated topics.
Focus on the technical discussion and next steps.
"""


def scope() -> Scope:
    return Scope(
        library="pydantic-ai-slim",
        version=metadata.version("pydantic-ai-slim"),
        entry_point="the docs' summarize_old_messages history processor (ProcessHistory)",
        writers="single",
        failures=frozenset({"raise", "timeout", "empty"}),
        storage="none",
        hold=True,
        notes=(
            "the processor of docs/message-history.md verbatim: summarize messages[:10] once "
            "there are more than 10, keep messages[-1:]",
            "summarize_agent: an Agent over FunctionModel answering one TextPart",
        ),
    )


def _texts(message: Any) -> list[str]:
    return [p.content for p in message.parts if isinstance(getattr(p, "content", None), str)]


class PydanticAIHistoryAdapter:
    def __init__(self, summarizer: ScriptedSummarizer) -> None:
        self.scope = scope()
        self.summarizer = summarizer
        self.history: list[ModelMessage] = []
        summarize_agent = Agent(FunctionModel(self._answer), instructions=INSTRUCTIONS)

        async def summarize_old_messages(messages: list[ModelMessage]) -> list[ModelMessage]:
            # Summarize the oldest 10 messages
            if len(messages) > 10:
                oldest_messages = messages[:10]
                summary = await summarize_agent.run(message_history=oldest_messages)
                # Return the last message and the summary
                return summary.new_messages() + messages[-1:]

            return messages

        self.processor = summarize_old_messages

    async def _answer(self, messages: list[ModelMessage], info: AgentInfo) -> ModelResponse:
        text = "\n".join(t for m in messages for t in _texts(m))
        try:
            reply = await self.summarizer.summarize(text)
        except SummarizerFailed as exc:
            raise ModelHTTPError(500, "jfsm-profile-fake", str(exc)) from exc
        except SummarizerTimeout as exc:
            raise ModelAPIError("jfsm-profile-fake", f"request timed out: {exc}") from exc
        return ModelResponse(parts=[TextPart(content=reply)])

    async def append(self, user: str, assistant: str) -> None:
        self.history += [
            ModelRequest(parts=[UserPromptPart(content=user)]),
            ModelResponse(parts=[TextPart(content=assistant)]),
        ]

    async def compact(self) -> None:
        request = ModelRequest(parts=[UserPromptPart(content="")])
        processed = await self.processor([*self.history, request])
        self.history = [m for m in processed if m is not request]

    async def read(self) -> list[str]:
        return [t for m in self.history for t in _texts(m)]

    def observed_states(self) -> list[list[str]]:
        return []  # no storage of its own

    def fail_next_write(self, armed: bool = True) -> None:
        return None  # not in scope: the application keeps the list

    async def close(self) -> None:
        return None


adapter = AdapterSpec(factory=PydanticAIHistoryAdapter, scope=scope())
