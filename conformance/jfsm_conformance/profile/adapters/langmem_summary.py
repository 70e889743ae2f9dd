"""langmem's `asummarize_messages` (running summary) under the profile, offline.

langmem keeps no storage: the caller keeps the full message list and the `RunningSummary`,
and before each model call asks `asummarize_messages` for the messages the model should see.
The adapter does exactly that:

- `append` adds a `HumanMessage` and an `AIMessage` (with ids) to the full list;
- `compact` calls `asummarize_messages(messages, running_summary=...)` with the profile's
  fake chat model (shared with the LangChain adapter) and keeps the running summary it
  returns, as `SummarizationNode` does;
- `read` is what the model would see next: with a running summary, langmem's own
  `DEFAULT_FINAL_SUMMARY_PROMPT` over the summary and the messages after the last summarized
  one; without one, the messages.

Thresholds count messages (`token_counter=len`): summarize once 4 messages are pending.
One writer (a function over the caller's list), no storage of its own.
"""

from __future__ import annotations

from importlib import metadata
from typing import Any

from langchain_core.messages import AIMessage, HumanMessage
from langmem.short_term import asummarize_messages
from langmem.short_term.summarization import DEFAULT_FINAL_SUMMARY_PROMPT

from jfsm_conformance.profile import AdapterSpec, Scope, ScriptedSummarizer
from jfsm_conformance.profile.adapters.langchain_v1 import profile_chat_model

__all__ = ["LangmemAdapter", "adapter", "scope"]


def scope() -> Scope:
    return Scope(
        library="langmem",
        version=metadata.version("langmem"),
        entry_point="langmem.short_term.asummarize_messages (running summary)",
        writers="single",
        failures=frozenset({"raise", "timeout", "empty"}),
        storage="none",
        hold=True,
        by_design={
            "JF-SAFE-006": "langmem documents that when more is to be summarized than "
            "max_tokens allows, 'only the last max_tokens amongst those will be summarized' "
            "(summarize_messages docstring): older messages beyond that budget are dropped "
            "unsummarized, to fit the summarization model's context window.",
        },
        notes=("token_counter=len (messages), max_tokens_before_summary=4, max_tokens=8",),
    )


def _count(messages: Any) -> int:
    return len(messages)


class LangmemAdapter:
    def __init__(self, summarizer: ScriptedSummarizer) -> None:
        self.scope = scope()
        self.model = profile_chat_model(summarizer)
        self.messages: list[Any] = []
        self.running: Any = None
        self.ids = 0

    def _id(self) -> str:
        self.ids += 1
        return f"msg-{self.ids}"

    async def append(self, user: str, assistant: str) -> None:
        self.messages += [
            HumanMessage(content=user, id=self._id()),
            AIMessage(content=assistant, id=self._id()),
        ]

    async def compact(self) -> None:
        result = await asummarize_messages(
            list(self.messages),
            running_summary=self.running,
            model=self.model,
            max_tokens=8,
            max_tokens_before_summary=4,
            max_summary_tokens=1,
            token_counter=_count,
        )
        if result.running_summary is not None:
            self.running = result.running_summary

    async def read(self) -> list[str]:
        if self.running is None:
            return [str(m.content) for m in self.messages]
        last = self.running.last_summarized_message_id
        done = next((i + 1 for i, m in enumerate(self.messages) if m.id == last), 0)
        prompt = DEFAULT_FINAL_SUMMARY_PROMPT.invoke(
            {
                "system_message": [],
                "summary": self.running.summary,
                "messages": self.messages[done:],
            }
        )
        return [str(m.content) for m in prompt.messages]

    def observed_states(self) -> list[list[str]]:
        return []

    def fail_next_write(self, armed: bool = True) -> None:
        return None  # not in scope: langmem writes nothing

    async def close(self) -> None:
        return None


adapter = AdapterSpec(factory=LangmemAdapter, scope=scope())
