"""Strands Agents' `SummarizingConversationManager` under the profile, with a session,
offline.

A Strands `Agent` keeps `agent.messages`; a session manager writes each message to its
repository as it is added and, after each invocation (and right after a context reduction),
the agent's state, which holds the conversation manager's state: the summary message and
`removed_message_count`, the number of stored messages the summary stands for. An agent
restored from the session (a restart, or a stateless server building the agent per request)
sees the summary and the stored messages from that count on
(`RepositorySessionManager.initialize`). When the model reports a context overflow, the
agent calls `conversation_manager.reduce_context(agent, e)` and syncs the session; the
summarizing manager summarizes the oldest messages with the agent's model and replaces them
in `agent.messages` with the summary. The adapter:

- `append` is one invocation, `await agent.invoke_async(user)`, whose model answers with
  `assistant`: the agent's normal path, hooks and session writes included;
- `compact` is the overflow recovery step of the agent loop: `reduce_context(agent,
  e=ContextWindowOverflowException(...))` and then `sync_agent` (the agent syncs right after
  a reduction, and again after the invocation, which a failed reduction ends: so the sync
  runs either way), with `summary_ratio=0.5, preserve_recent_messages=2`;
- the summaries come from the agent's `aux_model` (what the manager calls "the parent
  agent's model" for side calls), a `Model` whose `stream` hands the messages' text to the
  profile's summarizer and streams the reply as one text block (an empty reply streams no
  text, as a provider's empty completion does); a failure or timeout raises from the
  stream. The manager runs the call on its own event loop (`run_async`), so it is not held;
- `read` is the session as a restored agent sees it: a fresh `Agent` over the same
  repository, initialized by `RepositorySessionManager`;
- the repository is an in-memory `SessionRepository` (the interface Strands' file and S3
  repositories implement, storing copies) that records the restored view after every write.

One writer: an agent runs one invocation at a time (`_invocation_lock`). No write failure:
the summary and the count are one `update_agent` write, which the agent makes again after
every invocation (the sync skips only when nothing changed), so a write that failed once is
written by the next sync; the profile's "the reply came back, then the replacement write
failed" has no lasting state to judge (JF-SAFE-010 not applicable).
"""

from __future__ import annotations

import copy
from collections.abc import AsyncIterator
from importlib import metadata
from typing import Any

from strands import Agent
from strands.agent.conversation_manager import SummarizingConversationManager
from strands.models.model import Model
from strands.session.repository_session_manager import RepositorySessionManager
from strands.session.session_repository import SessionRepository
from strands.types.exceptions import ContextWindowOverflowException

from jfsm_conformance.profile import AdapterSpec, ObservedStorage, Scope, ScriptedSummarizer

__all__ = ["ProfileModel", "ProfileRepository", "StrandsAdapter", "adapter", "scope"]

SESSION = "jfsm-profile"


def scope() -> Scope:
    return Scope(
        library="strands-agents",
        version=metadata.version("strands-agents"),
        entry_point="SummarizingConversationManager.reduce_context (overflow recovery) + "
        "RepositorySessionManager",
        writers="single",
        failures=frozenset({"raise", "timeout", "empty"}),
        storage="native",
        hold=False,
        notes=(
            "summary_ratio=0.5, preserve_recent_messages=2; an in-memory SessionRepository",
            "read: the session as a restored agent sees it",
            "the summarizer call runs on the manager's own event loop (run_async): no hold",
        ),
    )


def _text(message: Any) -> str:
    return "".join(str(block.get("text", "")) for block in message.get("content", []))


class ProfileModel(Model):
    """A Strands `Model` streaming one text block: the next scripted assistant reply for the
    agent's own calls, or (as the agent's `aux_model`) the summarizer's reply."""

    def __init__(self, answer: Any) -> None:
        self.answer = answer  # (text of the request) -> reply, or raises

    def update_config(self, **model_config: Any) -> None:
        return None

    def get_config(self) -> Any:
        return {}

    def structured_output(self, *args: Any, **kwargs: Any) -> Any:
        raise NotImplementedError("the profile's model answers text only")

    async def stream(self, messages: Any, *args: Any, **kwargs: Any) -> AsyncIterator[Any]:
        reply = self.answer("\n".join(_text(m) for m in messages))
        yield {"messageStart": {"role": "assistant"}}
        if reply:
            yield {"contentBlockDelta": {"delta": {"text": reply}}}
            yield {"contentBlockStop": {}}
        yield {"messageStop": {"stopReason": "end_turn"}}


class ProfileRepository(SessionRepository):
    """An in-memory `SessionRepository`: copies of what it is given, keyed like the file
    repository's; records the restored view after each write; can fail one
    `update_agent`."""

    def __init__(self) -> None:
        self.sessions: dict[str, Any] = {}
        self.agents: dict[tuple[str, str], Any] = {}
        self.messages: dict[tuple[str, str], dict[int, Any]] = {}
        self.observed = ObservedStorage()

    def restored(self, agent_id: str) -> list[str]:
        """The messages an agent restored from this repository starts with, as Strands
        restores it (`RepositorySessionManager.initialize` of a fresh agent)."""
        if SESSION not in self.sessions or (SESSION, agent_id) not in self.agents:
            return []
        fresh = Agent(
            model=ProfileModel(lambda _: ""),
            agent_id=agent_id,
            conversation_manager=SummarizingConversationManager(),
            session_manager=RepositorySessionManager(SESSION, self),
            callback_handler=None,
        )
        return [_text(m) for m in fresh.messages]

    def _record(self, agent_id: str) -> None:
        self.observed.record(self.restored(agent_id))

    def create_session(self, session: Any, **kwargs: Any) -> Any:
        self.sessions[session.session_id] = copy.deepcopy(session)
        return session

    def read_session(self, session_id: str, **kwargs: Any) -> Any:
        return copy.deepcopy(self.sessions.get(session_id))

    def create_agent(self, session_id: str, session_agent: Any, **kwargs: Any) -> None:
        self.agents[(session_id, session_agent.agent_id)] = copy.deepcopy(session_agent)
        self._record(session_agent.agent_id)

    def read_agent(self, session_id: str, agent_id: str, **kwargs: Any) -> Any:
        return copy.deepcopy(self.agents.get((session_id, agent_id)))

    def update_agent(self, session_id: str, session_agent: Any, **kwargs: Any) -> None:
        self.agents[(session_id, session_agent.agent_id)] = copy.deepcopy(session_agent)
        self._record(session_agent.agent_id)

    def create_message(
        self, session_id: str, agent_id: str, session_message: Any, **kwargs: Any
    ) -> None:
        rows = self.messages.setdefault((session_id, agent_id), {})
        rows[session_message.message_id] = copy.deepcopy(session_message)
        self._record(agent_id)

    def read_message(self, session_id: str, agent_id: str, message_id: int, **kwargs: Any) -> Any:
        return copy.deepcopy(self.messages.get((session_id, agent_id), {}).get(message_id))

    def update_message(
        self, session_id: str, agent_id: str, session_message: Any, **kwargs: Any
    ) -> None:
        self.create_message(session_id, agent_id, session_message)

    def list_messages(
        self, session_id: str, agent_id: str, limit: int | None = None, offset: int = 0, **kw: Any
    ) -> list[Any]:
        rows = self.messages.get((session_id, agent_id), {})
        ids = sorted(rows)[offset:]
        return [copy.deepcopy(rows[i]) for i in (ids if limit is None else ids[:limit])]


class StrandsAdapter:
    def __init__(self, summarizer: ScriptedSummarizer) -> None:
        self.scope = scope()
        self.repository = ProfileRepository()
        self.replies: list[str] = []
        self.session = RepositorySessionManager(SESSION, self.repository)
        self.agent = Agent(
            model=ProfileModel(lambda _: self.replies.pop(0)),
            aux_model=ProfileModel(summarizer.summarize_sync),
            conversation_manager=SummarizingConversationManager(
                summary_ratio=0.5, preserve_recent_messages=2
            ),
            session_manager=self.session,
            callback_handler=None,
        )

    async def append(self, user: str, assistant: str) -> None:
        self.replies.append(assistant)
        await self.agent.invoke_async(user)

    async def compact(self) -> None:
        overflow = ContextWindowOverflowException("the profile asks for a compaction")
        try:
            self.agent.conversation_manager.reduce_context(self.agent, e=overflow)
        finally:
            self.session.sync_agent(self.agent)

    async def read(self) -> list[str]:
        return self.repository.restored(self.agent.agent_id)

    def observed_states(self) -> list[list[str]]:
        return self.repository.observed.take()

    def fail_next_write(self, armed: bool = True) -> None:
        return None  # not in scope: see the module docs

    async def close(self) -> None:
        return None


adapter = AdapterSpec(factory=StrandsAdapter, scope=scope())
