"""Google ADK's events compaction (sliding window) under the profile, offline.

ADK never deletes events: a compaction appends one event whose `EventCompaction` holds a
summary and the timestamp range it covers, and prompt assembly
(`_process_compaction_events`) shows the summary in place of the raw events in that range.
The runner compacts after each invocation (`Runner._run_post_invocation_compaction`: the
sliding-window compactor, then `session_service.append_event` of the summary). The adapter:

- `append` is one invocation: a user event and an agent event with one invocation ID,
  appended through the session service (timestamps strictly increasing, as wall clock
  time between turns is);
- `compact` calls `Runner._run_post_invocation_compaction`, the runner's own step, with
  an `App` whose `EventsCompactionConfig` has `compaction_interval=2, overlap_size=1` and
  an `LlmEventSummarizer` over a `BaseLlm` subclass that hands the prompt to the profile's
  summarizer (async, so it can be held) and answers through `LlmResponse.create` (finish
  reason STOP; an empty summary is one empty text part);
- `read` is the session's events as the next prompt sees them (`_process_compaction_events`);
- the storage is an `InMemorySessionService` subclass that records that view after every
  write and can fail its next write once (a remote session store's append failing).

Out of scope: the token-threshold trigger, the stale-session check of the persistent
session services (`InMemorySessionService` has none), tool calls.
"""

from __future__ import annotations

from importlib import metadata
from typing import Any

from google.adk.agents import LlmAgent
from google.adk.apps.app import App, EventsCompactionConfig
from google.adk.apps.llm_event_summarizer import LlmEventSummarizer
from google.adk.events import Event
from google.adk.flows.llm_flows.context._compaction import _process_compaction_events
from google.adk.models.base_llm import BaseLlm
from google.adk.models.llm_response import LlmResponse
from google.adk.runners import Runner
from google.adk.sessions import InMemorySessionService
from google.genai import types

from jfsm_conformance.profile import AdapterSpec, ObservedStorage, Scope, ScriptedSummarizer

__all__ = ["AdkCompactionAdapter", "ProfileLlm", "ProfileSessionService", "adapter", "scope"]

APP, USER, SESSION, AGENT = "jfsm_profile", "user", "s1", "agent"


def scope() -> Scope:
    return Scope(
        library="google-adk",
        version=metadata.version("google-adk"),
        entry_point="Runner._run_post_invocation_compaction (sliding window, "
        "InMemorySessionService)",
        writers="multi",
        writers_claim=(
            "a session service serves every Runner.run_async for the session, and ADK's "
            "DatabaseSessionService says why it locks: 'Use one lock per logical ADK "
            "session to prevent concurrent append_event writes from racing in the same "
            "process'; the compaction is appended as one more event beside the turns "
            "appended meanwhile"
        ),
        failures=frozenset({"raise", "timeout", "empty", "write_fail"}),
        storage="native",
        hold=True,
        notes=(
            "compaction_interval=2, overlap_size=1; LlmEventSummarizer over a BaseLlm fake",
            "an empty summary is one empty text part with finish reason STOP",
        ),
    )


def _texts(events: list[Any]) -> list[str]:
    out = []
    for event in _process_compaction_events(events):
        parts = event.content.parts if event.content and event.content.parts else []
        out.append("".join(p.text or "" for p in parts))
    return out


class ProfileLlm(BaseLlm):
    """A `BaseLlm` whose replies are the scripted summarizer's (async, so it can be held),
    answered through `LlmResponse.create` with finish reason STOP."""

    summarizer: Any = None

    async def generate_content_async(self, llm_request: Any, stream: bool = False) -> Any:
        prompt = "".join(p.text or "" for c in llm_request.contents for p in c.parts or [])
        text = await self.summarizer.summarize(prompt)
        content = types.Content(role="model", parts=[types.Part(text=text)])
        candidate = types.Candidate(content=content, finish_reason=types.FinishReason.STOP)
        yield LlmResponse.create(types.GenerateContentResponse(candidates=[candidate]))


class ProfileSessionService(InMemorySessionService):
    """ADK's `InMemorySessionService`, recording the prompt view after every write and
    failing its next compaction write when armed."""

    def __init__(self) -> None:
        super().__init__()
        self.observed = ObservedStorage()

    async def append_event(self, session: Any, event: Any) -> Any:
        if event.actions and event.actions.compaction:
            self.observed.fail_if_armed("scripted session store write failure")
        out = await super().append_event(session=session, event=event)
        stored = await self.get_session(app_name=APP, user_id=USER, session_id=SESSION)
        self.observed.record(_texts(stored.events))
        return out


class AdkCompactionAdapter:
    def __init__(self, summarizer: ScriptedSummarizer) -> None:
        self.scope = scope()
        llm = ProfileLlm(model="jfsm-profile-fake", summarizer=summarizer)
        self.service = ProfileSessionService()
        config = EventsCompactionConfig(
            summarizer=LlmEventSummarizer(llm=llm), compaction_interval=2, overlap_size=1
        )
        agent = LlmAgent(name=AGENT, model=llm)
        app = App(name=APP, root_agent=agent, events_compaction_config=config)
        self.runner = Runner(app=app, session_service=self.service)
        self.clock = 1_000_000.0
        self.created = False

    async def _session(self) -> Any:
        if not self.created:
            await self.service.create_session(app_name=APP, user_id=USER, session_id=SESSION)
            self.created = True
        return await self.service.get_session(app_name=APP, user_id=USER, session_id=SESSION)

    def _event(self, author: str, text: str, invocation: str) -> Any:
        self.clock += 1.0
        role = "user" if author == USER else "model"
        return Event(
            author=author,
            invocation_id=invocation,
            timestamp=self.clock,
            content=types.Content(role=role, parts=[types.Part(text=text)]),
        )

    async def append(self, user: str, assistant: str) -> None:
        session = await self._session()
        invocation = Event.new_id()
        await self.service.append_event(session, self._event(USER, user, invocation))
        await self.service.append_event(session, self._event(AGENT, assistant, invocation))

    async def compact(self) -> None:
        session = await self._session()
        await self.runner._run_post_invocation_compaction(session=session)

    async def read(self) -> list[str]:
        return _texts((await self._session()).events)

    def observed_states(self) -> list[list[str]]:
        return self.service.observed.take()

    def fail_next_write(self, armed: bool = True) -> None:
        self.service.observed.arm(armed)

    async def close(self) -> None:
        await self.runner.close()


adapter = AdapterSpec(factory=AdkCompactionAdapter, scope=scope())
