"""openai-agents `OpenAIResponsesCompactionSession` under the profile, offline.

- Storage: `InMemoryStore`, a custom `Session` (the SDK's own stores are not used) whose
  every method yields to the event loop like a real async backend, records each state it
  holds, and can fail its next `add_items` once (the replacement write).
- Provider: a fake `AsyncOpenAI` whose `responses.compact` hands the input items' text to
  the scripted summarizer and answers with the real reply type, `CompactedResponse`: all
  user messages of the input, then one `compaction` item whose `encrypted_content` is the
  summary. A failure is `openai.InternalServerError`, a timeout `openai.APITimeoutError`,
  an empty summary an empty `output` list.
- Entry point: `run_compaction({"compaction_mode": "input"})`, the manual call; the
  decision hook compacts from 2 candidate items on, so one compaction settles. Appends go
  through the wrapper's `add_items`, as the runner's do.
"""

from __future__ import annotations

import asyncio
import logging
from importlib import metadata
from typing import Any, cast

import openai
from agents.memory import OpenAIResponsesCompactionSession
from openai import _exceptions
from openai.types.responses import CompactedResponse

from jfsm_conformance.profile import (
    AdapterSpec,
    ObservedStorage,
    Scope,
    ScriptedSummarizer,
    SummarizerFailed,
    SummarizerTimeout,
)

__all__ = ["InMemoryStore", "OpenAIAgentsAdapter", "adapter", "scope", "text_of"]

_URL = "https://api.openai.com/v1/responses/compact"


def scope() -> Scope:
    return Scope(
        library="openai-agents",
        version=metadata.version("openai-agents"),
        entry_point="OpenAIResponsesCompactionSession.run_compaction (custom Session store)",
        writers="multi",
        writers_claim=(
            "a Session is shared by every Runner.run given it; openai-agents#4679 (fixed in "
            "0.22.1 by PR #4736) made items added while responses.compact is in flight "
            "survive"
        ),
        failures=frozenset({"raise", "timeout", "empty", "write_fail"}),
        storage="custom",
        hold=True,
        by_design={
            "JF-SAFE-007": "responses.compact returns every user message of its input "
            "verbatim, followed by one compaction item (CompactedResponse.output is "
            "documented as 'a list of all user messages, followed by a single compaction "
            "item'): user messages stay next to the summary that also saw them.",
            "JF-SAFE-011": "the Session protocol has no atomic replace: for a custom store "
            "the session clears it and then adds the compacted items, so a reader between "
            "the two sees an empty store (the SDK's own SQLite/SQLAlchemy stores replace "
            "atomically in recent releases; a custom store must implement that itself).",
        },
        notes=(
            "an empty summary is modelled as an empty CompactedResponse.output",
            "compaction_mode='input'; decision hook: >= 2 candidate items",
        ),
    )


def text_of(item: Any) -> str:
    """The text a stored item carries: message text, or a compaction item's content."""
    if not isinstance(item, dict):
        item = item.model_dump(exclude_unset=True, warnings=False)
    if item.get("type") == "compaction":
        return str(item.get("encrypted_content", ""))
    content = item.get("content")
    if isinstance(content, str):
        return content
    if isinstance(content, list):
        return "".join(str(part.get("text", "")) for part in content if isinstance(part, dict))
    return ""


class InMemoryStore:
    """A custom async `Session` store: yields on every call, records states, can fail once."""

    def __init__(self, session_id: str = "profile") -> None:
        self.session_id = session_id
        self.session_settings = None
        self.items: list[Any] = []
        self.observed = ObservedStorage()

    def _record(self) -> None:
        self.observed.record([text_of(i) for i in self.items])

    async def get_items(self, limit: int | None = None) -> list[Any]:
        await asyncio.sleep(0)
        items = list(self.items)
        return items if limit is None else items[-limit:] if limit > 0 else []

    async def add_items(self, items: list[Any]) -> None:
        await asyncio.sleep(0)
        self.observed.fail_if_armed()
        self.items.extend(items)
        self._record()
        await asyncio.sleep(0)

    async def pop_item(self) -> Any:
        await asyncio.sleep(0)
        item = self.items.pop() if self.items else None
        self._record()
        return item

    async def clear_session(self) -> None:
        await asyncio.sleep(0)
        self.items = []
        self._record()
        await asyncio.sleep(0)


class _FakeResponses:
    def __init__(self, summarizer: ScriptedSummarizer) -> None:
        self.summarizer = summarizer
        self.calls = 0

    async def compact(self, **kwargs: Any) -> Any:
        # the HTTP library openai itself builds its errors on (httpx, or httpx2 lately)
        httpx: Any = getattr(_exceptions, "httpx2", None) or getattr(_exceptions, "httpx")  # noqa: B009

        self.calls += 1
        items = list(kwargs.get("input") or [])
        request = httpx.Request("POST", _URL)
        try:
            summary = await self.summarizer.summarize("\n".join(text_of(i) for i in items))
        except SummarizerFailed as exc:
            raise openai.InternalServerError(
                str(exc), response=httpx.Response(500, request=request), body=None
            ) from exc
        except SummarizerTimeout as exc:
            raise openai.APITimeoutError(request=request) from exc
        output: list[dict[str, Any]] = []
        if summary:
            for n, item in enumerate(items):
                if isinstance(item, dict) and item.get("role") == "user":
                    output.append(
                        {
                            "id": f"msg_user_{self.calls}_{n}",
                            "type": "message",
                            "role": "user",
                            "status": "completed",
                            "content": [{"type": "input_text", "text": text_of(item)}],
                        }
                    )
            output.append(
                {"id": f"cmp_{self.calls}", "type": "compaction", "encrypted_content": summary}
            )
        return CompactedResponse.construct(
            id=f"resp_compact_{self.calls}",
            created_at=0,
            object="response.compaction",
            output=output,
            usage={
                "input_tokens": 10,
                "input_tokens_details": {"cached_tokens": 0},
                "output_tokens": 5,
                "output_tokens_details": {"reasoning_tokens": 0},
                "total_tokens": 15,
            },
        )


class _FakeClient:
    def __init__(self, summarizer: ScriptedSummarizer) -> None:
        self.responses = _FakeResponses(summarizer)


class OpenAIAgentsAdapter:
    def __init__(self, summarizer: ScriptedSummarizer) -> None:
        self.scope = scope()
        for name in ("openai.agents", "openai-agents.openai.compaction"):
            logging.getLogger(name).setLevel(logging.CRITICAL)  # expected restore warnings
        self.store = InMemoryStore()
        self.session = OpenAIResponsesCompactionSession(
            "profile",
            cast(Any, self.store),  # a custom Session: the protocol, not the ABC
            client=cast(Any, _FakeClient(summarizer)),
            compaction_mode="input",
            should_trigger_compaction=lambda ctx: len(ctx["compaction_candidate_items"]) >= 2,
        )

    async def append(self, user: str, assistant: str) -> None:
        await self.session.add_items(
            [{"role": "user", "content": user}, {"role": "assistant", "content": assistant}]
        )

    async def compact(self) -> None:
        await self.session.run_compaction({"compaction_mode": "input"})

    async def read(self) -> list[str]:
        return [text_of(i) for i in await self.session.get_items()]

    def observed_states(self) -> list[list[str]]:
        return self.store.observed.take()

    def fail_next_write(self, armed: bool = True) -> None:
        self.store.observed.arm(armed)

    async def close(self) -> None:
        return None


adapter = AdapterSpec(factory=OpenAIAgentsAdapter, scope=scope())
