"""Google ADK: an empty compaction summary replaces the compacted turns.

Run: pip install "google-adk==2.13.0"; python adk_empty_summary.py
Exit 0 and "REPRODUCED" when the defect shows, 1 when it does not. Offline: ADK ships no
fake model, so both models are `BaseLlm` subclasses (ADK's extension point for custom
models) answering through `LlmResponse.create`, as the Gemini model does.
"""

import asyncio
import sys

from google.adk.agents import LlmAgent
from google.adk.apps.app import App, EventsCompactionConfig
from google.adk.apps.llm_event_summarizer import LlmEventSummarizer
from google.adk.models.base_llm import BaseLlm
from google.adk.models.llm_response import LlmResponse
from google.adk.runners import Runner
from google.adk.sessions import InMemorySessionService
from google.genai import types
from pydantic import Field


def reply(text):
    content = types.Content(role="model", parts=[types.Part(text=text)])
    candidate = types.Candidate(content=content, finish_reason=types.FinishReason.STOP)
    return LlmResponse.create(types.GenerateContentResponse(candidates=[candidate]))


class AgentModel(BaseLlm):
    """Answers every turn and remembers the texts of the last prompt it was sent."""

    seen: list = Field(default_factory=list)

    async def generate_content_async(self, llm_request, stream=False):
        self.seen = [p.text for c in llm_request.contents for p in c.parts or [] if p.text]
        yield reply(f"answer {len(self.seen) // 2 + 1}")


class EmptySummaryModel(BaseLlm):
    """The summarization model: finishes normally (STOP) with an empty text."""

    async def generate_content_async(self, llm_request, stream=False):
        yield reply("")


async def main():
    agent_model = AgentModel(model="fake-agent")
    app = App(
        name="repro",
        root_agent=LlmAgent(name="assistant", model=agent_model),
        events_compaction_config=EventsCompactionConfig(
            summarizer=LlmEventSummarizer(llm=EmptySummaryModel(model="fake-summarizer")),
            compaction_interval=2,
            overlap_size=1,
        ),
    )
    service = InMemorySessionService()
    runner = Runner(app=app, session_service=service)
    await service.create_session(app_name="repro", user_id="u", session_id="s")
    for n in (1, 2, 3):
        message = types.Content(role="user", parts=[types.Part(text=f"question {n}")])
        async for _ in runner.run_async(user_id="u", session_id="s", new_message=message):
            pass
    # after turn 2 the runner compacted turns 1-2 with the empty summary; turn 3's prompt:
    session = await service.get_session(app_name="repro", user_id="u", session_id="s")
    summaries = [
        "".join(p.text or "" for p in e.actions.compaction.compacted_content.parts or [])
        for e in session.events
        if e.actions.compaction
    ]
    print("summaries stored:", summaries)
    print("prompt of turn 3:", agent_model.seen)
    lost = [t for t in ("question 1", "answer 1", "question 2") if t not in agent_model.seen]
    if lost and summaries and not any(s.strip() for s in summaries):
        print(f"REPRODUCED: {lost} are gone from the prompt; the empty summary stands in")
        return 0
    print("NOT REPRODUCED")
    return 1


sys.exit(asyncio.run(main()))
