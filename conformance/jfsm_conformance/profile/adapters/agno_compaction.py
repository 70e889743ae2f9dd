"""Agno's conversation `Compaction` under the profile, offline.

Agno never deletes a message: a session stores every run. A compaction (a *fold*) summarizes
the oldest messages with its `model` and stores one immutable record in the database's
compactions table: the summary and the id of the first message it keeps (the *anchor*).
Each run then sends the summary and the messages from the anchor on (`build_view`), and a
later fold folds the previous summary in. `Agent.acompact()` folds now, whatever the size
threshold (`compact_at_tokens`) says. The adapter:

- `append` is one run, `await agent.arun(user)`, whose model answers `assistant`: the
  agent's normal path, the session written to the database;
- `compact` is `await agent.acompact()`, with `Compaction(uncompacted_runs=1)` (fold all but
  the last run) and `compact_at_tokens` set above anything the profile reaches, so that
  compaction owns the replay window (every message since the last fold is sent) and no run
  folds on its own;
- both models are one `Model` subclass whose `ainvoke` answers a `ModelResponse`: the agent's
  with the next scripted reply, the compaction's with the profile's summarizer (async, so it
  can be held); a failure or a timeout is Agno's `ModelProviderError`, an empty summary an
  empty `content`;
- `read` is what the next run sends from the session (`_last_sent`: the history Agno reads
  for a run, folded by the stored record);
- the database is Agno's `SqliteDb` on an in-memory SQLite database (the backends that store
  compaction records are SQLite and PostgreSQL), recording that view after every session
  or record write, and able to fail its next `upsert_compaction` (the write of the fold)
  once.

Several writers: a fold is a record about runs, anchored on a message id, and Agno's own
docstring of `_stored_compaction` says why it reads the fold from the record table: "records
are immutable facts about single runs, so two containers writing different runs never
clobber one another"; runs appended while a summary is written come after the anchor.
"""

from __future__ import annotations

from dataclasses import dataclass
from importlib import metadata
from typing import Any, cast

from agno.agent import Agent
from agno.agent._messages import _last_sent, agent_compaction
from agno.compaction import Compaction
from agno.db.sqlite import SqliteDb
from agno.exceptions import ModelProviderError
from agno.models.base import Model
from agno.models.response import ModelResponse

from jfsm_conformance.profile import (
    AdapterSpec,
    ObservedStorage,
    Scope,
    ScriptedSummarizer,
    SummarizerFailed,
    SummarizerTimeout,
)

__all__ = ["AgnoCompactionAdapter", "ProfileDb", "ProfileModel", "adapter", "scope"]

SESSION = "jfsm-profile"


def scope() -> Scope:
    return Scope(
        library="agno",
        version=metadata.version("agno"),
        entry_point="Agent.acompact (Compaction, SqliteDb)",
        writers="multi",
        writers_claim=(
            "Agno reads the fold from the record table (_stored_compaction): 'records are "
            "immutable facts about single runs, so two containers writing different runs "
            "never clobber one another' (a fold is anchored on a message id)"
        ),
        failures=frozenset({"raise", "timeout", "empty", "write_fail"}),
        storage="native",
        hold=True,
        notes=(
            "Compaction(uncompacted_runs=1, compact_at_tokens=10**9); an in-memory SqliteDb",
            "read: what the next run sends (_last_sent)",
        ),
    )


@dataclass
class ProfileModel(Model):
    """An Agno `Model` whose `ainvoke` answers with `answer(text of the messages)`."""

    id: str = "jfsm-profile-fake"
    name: str = "jfsm-profile-fake"
    provider: str = "jfsm"
    answer: Any = None

    async def ainvoke(self, *args: Any, **kwargs: Any) -> ModelResponse:
        text = "\n".join(m.get_content_string() for m in kwargs.get("messages") or [])
        try:
            reply = await self.answer(text)
        except (SummarizerFailed, SummarizerTimeout) as exc:
            raise ModelProviderError(str(exc), status_code=500, model_name=self.name) from exc
        return ModelResponse(role="assistant", content=reply)

    def invoke(self, *args: Any, **kwargs: Any) -> ModelResponse:
        raise NotImplementedError("the profile drives Agno asynchronously")

    def invoke_stream(self, *args: Any, **kwargs: Any) -> Any:
        raise NotImplementedError("the profile's model does not stream")

    def ainvoke_stream(self, *args: Any, **kwargs: Any) -> Any:
        raise NotImplementedError("the profile's model does not stream")

    def _parse_provider_response(self, response: Any, **kwargs: Any) -> ModelResponse:
        return cast(ModelResponse, response)

    def _parse_provider_response_delta(self, response: Any) -> ModelResponse:
        return cast(ModelResponse, response)


class ProfileDb(SqliteDb):
    """Agno's `SqliteDb` (in memory) that records the next run's view after every write and
    can fail its next fold record write."""

    def __init__(self) -> None:
        super().__init__(db_url="sqlite://")
        self.observed = ObservedStorage()
        self.view: Any = None  # () -> the next run's view, set by the adapter

    def _record(self) -> None:
        if self.view is not None:
            self.observed.record(self.view())

    def upsert_session(self, *args: Any, **kwargs: Any) -> Any:
        out = super().upsert_session(*args, **kwargs)
        self._record()
        return out

    def upsert_compaction(self, row: dict[str, Any]) -> None:
        self.observed.fail_if_armed("scripted database write failure")
        super().upsert_compaction(row)
        self._record()


class AgnoCompactionAdapter:
    def __init__(self, summarizer: ScriptedSummarizer) -> None:
        self.scope = scope()
        self.replies: list[str] = []
        self.db = ProfileDb()
        self.agent = Agent(
            model=ProfileModel(answer=self._reply),
            db=self.db,
            session_id=SESSION,
            add_history_to_context=True,
            compaction=Compaction(
                model=ProfileModel(answer=summarizer.summarize),
                compact_at_tokens=10**9,
                uncompacted_runs=1,
            ),
        )
        self.db.view = self._view

    async def _reply(self, text: str) -> str:
        return self.replies.pop(0)

    def _view(self) -> list[str]:
        session = self.agent.get_session(SESSION)
        if session is None:
            return []
        sent = _last_sent(self.agent, session, agent_compaction(self.agent))
        return [m.get_content_string() for m in sent]

    async def append(self, user: str, assistant: str) -> None:
        self.replies.append(assistant)
        await self.agent.arun(user, session_id=SESSION)

    async def compact(self) -> None:
        await self.agent.acompact(session_id=SESSION)

    async def read(self) -> list[str]:
        return self._view()

    def observed_states(self) -> list[list[str]]:
        return self.db.observed.take()

    def fail_next_write(self, armed: bool = True) -> None:
        self.db.observed.arm(armed)

    async def close(self) -> None:
        return None


adapter = AdapterSpec(factory=AgnoCompactionAdapter, scope=scope())
