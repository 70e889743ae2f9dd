"""Agno: a whitespace-only summary replaces the folded messages.

Run: pip install "agno[sqlite]==3.1.10"; python agno_blank_summary.py
Exit 0 and "REPRODUCED" when the defect shows, 1 when it does not. Offline: both models
are subclasses of Agno's `Model` (its extension point for providers) answering a
`ModelResponse`; the database is Agno's `SqliteDb` in memory.
"""

import asyncio
import sys
from dataclasses import dataclass, field

from agno.agent import Agent
from agno.compaction import Compaction
from agno.db.sqlite import SqliteDb
from agno.models.base import Model
from agno.models.response import ModelResponse


@dataclass
class FakeModel(Model):
    """Answers `reply`; remembers the texts of the last request it was sent."""

    id: str = "fake"
    name: str = "fake"
    provider: str = "fake"
    reply: str = "an answer"
    seen: list = field(default_factory=list)

    async def ainvoke(self, *args, **kwargs):
        self.seen = [m.get_content_string() for m in kwargs["messages"] if m.role != "system"]
        return ModelResponse(role="assistant", content=self.reply)

    def invoke(self, *args, **kwargs):
        raise NotImplementedError

    def invoke_stream(self, *args, **kwargs):
        raise NotImplementedError

    def ainvoke_stream(self, *args, **kwargs):
        raise NotImplementedError

    def _parse_provider_response(self, response, **kwargs):
        return response

    def _parse_provider_response_delta(self, response):
        return response


async def main():
    model = FakeModel()
    agent = Agent(
        model=model,
        db=SqliteDb(db_url="sqlite://"),
        session_id="s",
        add_history_to_context=True,
        # the summarizer answers normally, with a whitespace-only text
        compaction=Compaction(model=FakeModel(reply=" \n"), uncompacted_runs=1),
    )
    for n in (1, 2, 3):
        await agent.arun(f"question {n}")
    result = await agent.acompact()  # fold everything before the last run, now
    print("compaction:", result.status, "-", result.message)
    await agent.arun("question 4")
    print("turn 4 was sent:", model.seen)
    lost = [t for t in ("question 1", "question 2") if t not in model.seen]
    if result.compacted and lost:
        print(f"REPRODUCED: {lost} are gone from the prompt; a blank summary stands in for them")
        return 0
    print("NOT REPRODUCED")
    return 1


sys.exit(asyncio.run(main()))
