"""Microsoft Agent Framework's compaction (`agent-framework-core`) under the profile, offline.

An Agent Framework agent keeps its conversation in a *history provider*; the built-in
`InMemoryHistoryProvider` stores it in the session's state (`session.state[source_id]
["messages"]`), and a run appends its input and its reply there (`save_messages`, which
assigns a new list: the stored messages, then the new ones). A `CompactionProvider` with an
`after_strategy` compacts that stored list after each run (`after_run`), in place:
`SummarizationStrategy` asks its own chat client for a summary of the oldest message groups
(past `target_count + threshold` included messages), marks the summarized messages
`_excluded` and inserts the summary before them. Nothing is deleted; the history provider's
`skip_excluded` decides whether the next run loads the excluded messages. The adapter:

- `append` is one run of an agent whose only context provider is the history provider,
  `await agent.run(user, session=session)`, answered `assistant` by a `BaseChatClient`
  subclass: the framework's own run path and history write;
- `compact` is the compaction provider's own step after a run, `after_run(...)` on the
  same session, with `SummarizationStrategy(target_count=2, threshold=2)` over a second
  `BaseChatClient` subclass that hands the request's text to the profile's summarizer
  (async, so it can be held) and answers one assistant `Message`; a failure is the
  framework's `ChatClientException`, a timeout a `TimeoutError`, an empty summary a reply
  with empty text;
- `read` is what the next run loads: the history provider's `get_messages` (with its
  `skip_excluded` setting), the texts in order;
- the storage is the session's state itself (native); its states are recorded after every
  run and every compaction. No write failure: a compaction changes the stored list in place
  and writes nothing of its own (persisting the session is the application's
  `SessionStore`, outside the strategy).

Two configurations, named as the compaction sample and the provider's docstring name them:
`maf` is `InMemoryHistoryProvider(skip_excluded=True)`, the setting the sample pairs with
an `after_strategy` ("skip_excluded on the history provider ensures they won't be loaded on
the next turn"); `maf-default-history` keeps the provider's default, `skip_excluded=False`
("Defaults to False (load all messages)"), so the next run loads the summary *and* the
messages it summarized: a configuration pitfall, reported as such.

Several writers: `Agent.as_tool(propagate_session=True)` forwards the parent's session to
the sub-agent's `run()`, and the framework's own comment in it speaks of "concurrent
asyncio.gather tool invocations sharing the same session": two runs on one session are the
framework's own use. Out of scope: `before_strategy` (it summarizes the loaded context
anew on every run and stores nothing, so the stored history never changes), in-run
compaction on the chat client, `TokenBudgetComposedStrategy`'s fallback exclusion.
"""

from __future__ import annotations

import asyncio
from importlib import metadata
from typing import Any

from agent_framework import (
    Agent,
    BaseChatClient,
    ChatResponse,
    CompactionProvider,
    InMemoryHistoryProvider,
    Message,
    SummarizationStrategy,
)
from agent_framework.exceptions import ChatClientException

from jfsm_conformance.profile import (
    AdapterSpec,
    ObservedStorage,
    Scope,
    ScriptedSummarizer,
    SummarizerFailed,
)

__all__ = [
    "MafCompactionAdapter",
    "ProfileChatClient",
    "adapter",
    "default_history_adapter",
    "scope",
]

_CLAIM = (
    "Agent.as_tool(propagate_session=True): 'the parent agent's session is forwarded to "
    "this sub-agent's run() call'; the framework's comment there: 'concurrent "
    "asyncio.gather tool invocations sharing the same session'"
)


def scope(skip_excluded: bool = True) -> Scope:
    name = "skip_excluded=True" if skip_excluded else "skip_excluded=False (default)"
    by_design = {}
    if not skip_excluded:
        by_design = {
            "JF-SAFE-007": "configuration pitfall, documented: InMemoryHistoryProvider's "
            "skip_excluded 'Defaults to False (load all messages)', so the next run loads "
            "the summary and every message it summarized; InMemoryHistoryProvider("
            "skip_excluded=True) avoids it (the compaction sample's setting)",
            "JF-SAFE-012": "the same pitfall: with skip_excluded=False a compaction adds "
            "its summary and excludes nothing the next run loads, so what the model is "
            "sent grows by one message per compaction",
        }
    return Scope(
        library="agent-framework-core",
        version=metadata.version("agent-framework-core"),
        entry_point="CompactionProvider.after_run (SummarizationStrategy, "
        f"InMemoryHistoryProvider {name})",
        writers="multi",
        writers_claim=_CLAIM,
        failures=frozenset({"raise", "timeout", "empty"}),
        storage="native",
        hold=True,
        by_design=by_design,
        notes=(
            "SummarizationStrategy(target_count=2, threshold=2); the session's state is the store",
            "read: what the next run loads (InMemoryHistoryProvider.get_messages)",
        ),
    )


class ProfileChatClient(BaseChatClient):
    """A chat client whose reply is `answer(text of the request)` (async, so it can be
    held): the next scripted reply for the agent, the summarizer's for the strategy. A
    summarizer failure is the framework's `ChatClientException`."""

    def __init__(self, answer: Any, **kwargs: Any) -> None:
        super().__init__(**kwargs)
        self.answer = answer

    def _inner_get_response(
        self, *, messages: Any, stream: bool, options: Any, **kwargs: Any
    ) -> Any:
        async def reply() -> ChatResponse:
            text = "\n".join(m.text or "" for m in messages)
            try:
                answer = await self.answer(text)
            except SummarizerFailed as exc:
                raise ChatClientException(f"the service failed: {exc}") from exc
            return ChatResponse(messages=[Message(role="assistant", contents=[answer])])

        return reply()


class MafCompactionAdapter:
    def __init__(self, summarizer: ScriptedSummarizer, skip_excluded: bool = True) -> None:
        self.scope = scope(skip_excluded)
        self.replies: list[str] = []
        self.history = InMemoryHistoryProvider(skip_excluded=skip_excluded)
        self.compaction = CompactionProvider(
            after_strategy=SummarizationStrategy(
                client=ProfileChatClient(summarizer.summarize), target_count=2, threshold=2
            ),
            history_source_id=self.history.source_id,
        )
        self.agent = Agent(
            client=ProfileChatClient(self._reply), name="profile", context_providers=[self.history]
        )
        self.session = self.agent.create_session()
        self.observed = ObservedStorage()

    async def _reply(self, text: str) -> str:
        return self.replies.pop(0)

    def _state(self) -> dict[str, Any]:
        return self.session.state.setdefault(self.history.source_id, {})

    async def _loaded(self) -> list[str]:
        loaded = await self.history.get_messages(self.session.session_id, state=self._state())
        return [m.text or "" for m in loaded]

    async def append(self, user: str, assistant: str) -> None:
        self.replies.append(assistant)
        await self.agent.run(user, session=self.session)
        self.observed.record(await self._loaded())

    async def compact(self) -> None:
        try:
            await self.compaction.after_run(
                agent=self.agent, session=self.session, context=None, state={}
            )
        finally:
            await asyncio.sleep(0)
            self.observed.record(await self._loaded())

    async def read(self) -> list[str]:
        return await self._loaded()

    def observed_states(self) -> list[list[str]]:
        return self.observed.take()

    def fail_next_write(self, armed: bool = True) -> None:
        return None  # not in scope: see the module docs

    async def close(self) -> None:
        return None


adapter = AdapterSpec(factory=MafCompactionAdapter, scope=scope(True))
default_history_adapter = AdapterSpec(
    factory=lambda summarizer: MafCompactionAdapter(summarizer, skip_excluded=False),
    scope=scope(False),
)
