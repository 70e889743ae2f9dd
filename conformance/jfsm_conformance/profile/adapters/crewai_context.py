"""crewAI's context window handling (`respect_context_window`) under the profile, offline.

A crewAI agent keeps the conversation of a task execution in its executor's messages (the
state's `messages`, each one `format_message_for_llm(text, role)`). When the model reports
that the request exceeds its context window, the executor routes to
`recover_from_context_length`, which calls `handle_context_length(respect_context_window,
..., messages, llm, ...)`: with `respect_context_window=True` (the default) the LLM's
`summarize_messages` packs every non-system message into chunks that fit the window,
summarizes each chunk with the agent's own LLM, and replaces the messages in place with one
message holding the merged summaries (`<summary>...</summary>` and an instruction to
continue); with `respect_context_window=False` it stops the run (`SystemExit`). The adapter:

- `append` adds a user and an assistant message to the executor's list, as the executor
  does (`format_message_for_llm`);
- `compact` is that recovery step, `handle_context_length(...)`, on the list, taken when the
  model would report an overflow: the fake model's window holds 4 messages, so a shorter
  history is sent as it is (no recovery, no summarizer call);
- the LLM is a `BaseLLM` subclass whose `call` and `acall` hand the summary request's text to
  the profile's summarizer and answer with its reply, wrapped in `<summary>` tags as the
  summary prompt asks (an empty summary is an empty reply); a failure or timeout raises
  `RuntimeError` and `TimeoutError`, as `BaseLLM.acall` documents. Its context window is
  400 tokens, so a longer history is summarized in several chunks. crewAI runs the chunks'
  calls on a worker thread's own event loop (`asyncio.run`), so a call is not held;
- `read` is the list, the texts in order; there is no storage of its own.

Configurations, as the agents page names them: `crewai` is `respect_context_window=True`
("Default: auto-handle context limits"), `crewai-strict` is `respect_context_window=False`
("Stop execution on context limit"): no summarizer is ever called, so the properties of a
summary are not applicable. One writer: the messages belong to one task execution. Out of
scope: the proactive summary before a call (`_proactively_summarize_context`, the same
`summarize_messages`, its failures logged and skipped), tool-result compaction.
"""

from __future__ import annotations

import inspect
from importlib import metadata
from typing import Any

from crewai.llms.base_llm import BaseLLM
from crewai.utilities import agent_utils
from crewai.utilities.agent_utils import handle_context_length
from crewai.utilities.i18n import I18N
from crewai.utilities.printer import Printer

from jfsm_conformance.profile import (
    AdapterSpec,
    Scope,
    ScriptedSummarizer,
    SummarizerFailed,
    SummarizerTimeout,
)


def _format_message_for_llm() -> Any:
    """crewAI's message formatter: 1.15 moved it to `message_utils`; before, `agent_utils`
    had it (and `handle_context_length` took an `I18N`)."""
    found = getattr(agent_utils, "format_message_for_llm", None)
    if found is None:
        from crewai.utilities import message_utils

        found = message_utils.format_message_for_llm
    return found


format_message_for_llm = _format_message_for_llm()
_TAKES_I18N = "i18n" in inspect.signature(handle_context_length).parameters

__all__ = ["CrewAIContextAdapter", "ProfileLLM", "adapter", "scope", "strict_adapter"]

_WINDOW = 400  # tokens: a history of a few exchanges is summarized in chunks
_OVERFLOW = 4  # messages: a longer request is what the model reports as too long

_NO_SUMMARIZER = (
    "respect_context_window=False: the agents page says 'Stop execution on context limit' "
    "('Task execution halts immediately'); no summarizer is called and nothing is replaced"
)


def scope(respect: bool = True) -> Scope:
    setting = "respect_context_window=True (default)" if respect else "respect_context_window=False"
    not_applicable = {
        "JF-SAFE-011": "the messages are a list in the executor's state, replaced in place "
        "by one call that is never held: no intermediate state to observe"
    }
    if not respect:
        not_applicable = {
            rid: _NO_SUMMARIZER
            for rid in (
                "JF-SAFE-002",
                "JF-SAFE-003",
                "JF-SAFE-004",
                "JF-SAFE-005",
                "JF-SAFE-006",
                "JF-SAFE-007",
                "JF-SAFE-011",
                "JF-SAFE-012",
                "JF-SAFE-013",
                "JF-SAFE-014",
            )
        }
    return Scope(
        library="crewai",
        version=metadata.version("crewai"),
        entry_point=f"handle_context_length (the executor's recovery step, {setting})",
        writers="single",
        failures=frozenset({"raise", "timeout", "empty"}) if respect else frozenset(),
        storage="none",
        hold=False,
        not_applicable=not_applicable,
        notes=(
            f"a BaseLLM subclass with a {_WINDOW}-token context window: chunked summaries",
            "the summary calls run on a worker thread's own event loop: no hold",
        ),
    )


class ProfileLLM(BaseLLM):
    """A crewAI `BaseLLM` that answers every call with the profile's summarizer (the
    adapter sends it only summary requests)."""

    summarizer: Any = None

    def _answer(self, messages: Any) -> str:
        if isinstance(messages, str):
            text = messages
        else:
            text = "\n".join(str(m.get("content", "")) for m in messages)
        try:
            reply = self.summarizer.summarize_sync(text)
        except SummarizerTimeout as exc:
            raise TimeoutError(str(exc)) from exc
        except SummarizerFailed as exc:
            raise RuntimeError(f"the provider failed: {exc}") from exc
        return f"<summary>{reply}</summary>" if reply else reply

    def call(self, messages: Any, *args: Any, **kwargs: Any) -> Any:
        return self._answer(messages)

    async def acall(self, messages: Any, *args: Any, **kwargs: Any) -> Any:
        return self._answer(messages)

    def get_context_window_size(self) -> int:
        return _WINDOW

    def get_input_tokens_count(self, messages: Any, *args: Any, **kwargs: Any) -> int:
        if isinstance(messages, str):
            return (len(messages) + 3) // 4
        return (sum(len(str(m.get("content", ""))) for m in messages) + 3) // 4


class CrewAIContextAdapter:
    def __init__(self, summarizer: ScriptedSummarizer, respect: bool = True) -> None:
        self.scope = scope(respect)
        self.respect = respect
        self.llm = ProfileLLM(model="jfsm-profile-fake", summarizer=summarizer)
        self.messages: list[Any] = []

    async def append(self, user: str, assistant: str) -> None:
        self.messages.append(format_message_for_llm(user, role="user"))
        self.messages.append(format_message_for_llm(assistant, role="assistant"))

    async def compact(self) -> None:
        if len(self.messages) <= _OVERFLOW:
            return  # the model answers: no context-length error, no recovery step
        extra: dict[str, Any] = {"i18n": I18N()} if _TAKES_I18N else {}
        try:
            handle_context_length(
                respect_context_window=self.respect,
                printer=Printer(),
                messages=self.messages,
                llm=self.llm,
                callbacks=[],
                verbose=False,
                **extra,
            )
        except SystemExit as exc:  # the strict setting stops the run: a raise, not an exit
            raise RuntimeError(f"crewAI stopped the run: {exc}") from exc

    async def read(self) -> list[str]:
        return [str(m.get("content", "")) for m in self.messages]

    def observed_states(self) -> list[list[str]]:
        return []  # no storage of its own

    def fail_next_write(self, armed: bool = True) -> None:
        return None  # not in scope: the list is replaced in place

    async def close(self) -> None:
        return None


adapter = AdapterSpec(factory=CrewAIContextAdapter, scope=scope(True))
strict_adapter = AdapterSpec(
    factory=lambda summarizer: CrewAIContextAdapter(summarizer, respect=False),
    scope=scope(False),
)
