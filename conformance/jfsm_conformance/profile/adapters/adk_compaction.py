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

from ..adapter import Scope, Unavailable
from ..summarizer import ScriptedSummarizer

__all__ = ["factory", "scope"]

APP, USER, SESSION, AGENT = "jfsm_profile", "user", "s1", "agent"


def _require() -> str:
    try:
        import google.adk.apps.compaction  # noqa: F401
    except ImportError as exc:
        raise Unavailable(
            f"google-adk is not installed ({exc}); install the extra profile-adk"
        ) from exc
    return metadata.version("google-adk")


def scope(variant: str = "") -> Scope:
    return Scope(
        library="google-adk",
        version=_require(),
        entry_point="Runner._run_post_invocation_compaction (sliding window, "
        "InMemorySessionService)",
        writers="multi",
        failures=frozenset({"raise", "timeout", "empty", "write_fail"}),
        storage="native",
        hold=True,
        notes=(
            "compaction_interval=2, overlap_size=1; LlmEventSummarizer over a BaseLlm fake",
            "an empty summary is one empty text part with finish reason STOP",
        ),
    )


def _texts(events: list[Any]) -> list[str]:
    from google.adk.flows.llm_flows.context._compaction import _process_compaction_events

    out = []
    for event in _process_compaction_events(events):
        parts = event.content.parts if event.content and event.content.parts else []
        out.append("".join(p.text or "" for p in parts))
    return out


def _classes() -> tuple[Any, Any]:
    from google.adk.models.base_llm import BaseLlm
    from google.adk.models.llm_response import LlmResponse
    from google.adk.sessions import InMemorySessionService
    from google.genai import types

    class ProfileLlm(BaseLlm):
        summarizer: Any = None

        async def generate_content_async(self, llm_request: Any, stream: bool = False) -> Any:
            prompt = "".join(p.text or "" for c in llm_request.contents for p in c.parts or [])
            text = await self.summarizer.summarize(prompt)
            content = types.Content(role="model", parts=[types.Part(text=text)])
            candidate = types.Candidate(content=content, finish_reason=types.FinishReason.STOP)
            yield LlmResponse.create(types.GenerateContentResponse(candidates=[candidate]))

    class ProfileSessionService(InMemorySessionService):
        def __init__(self) -> None:
            super().__init__()
            self.states: list[list[str]] = []
            self.fail_next = False

        async def append_event(self, session: Any, event: Any) -> Any:
            if self.fail_next and event.actions and event.actions.compaction:
                self.fail_next = False
                raise ConnectionError("scripted session store write failure")
            out = await super().append_event(session=session, event=event)
            stored = await self.get_session(app_name=APP, user_id=USER, session_id=SESSION)
            self.states.append(_texts(stored.events))
            return out

    return ProfileLlm, ProfileSessionService


class AdkCompactionAdapter:
    def __init__(self, summarizer: ScriptedSummarizer) -> None:
        from google.adk.agents import LlmAgent
        from google.adk.apps.app import App, EventsCompactionConfig
        from google.adk.apps.llm_event_summarizer import LlmEventSummarizer
        from google.adk.runners import Runner

        self.scope = scope()
        llm_cls, service_cls = _classes()
        llm = llm_cls(model="jfsm-profile-fake", summarizer=summarizer)
        self.service = service_cls()
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
        from google.adk.events import Event
        from google.genai import types

        self.clock += 1.0
        role = "user" if author == USER else "model"
        return Event(
            author=author,
            invocation_id=invocation,
            timestamp=self.clock,
            content=types.Content(role=role, parts=[types.Part(text=text)]),
        )

    async def append(self, user: str, assistant: str) -> None:
        from google.adk.events import Event

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
        states, self.service.states = self.service.states, []
        return list(states)

    def fail_next_write(self, armed: bool = True) -> None:
        self.service.fail_next = armed

    async def close(self) -> None:
        await self.runner.close()


def factory(variant: str = "") -> Any:
    return AdkCompactionAdapter
