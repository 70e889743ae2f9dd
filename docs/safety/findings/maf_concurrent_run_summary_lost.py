"""Agent Framework: a run that saves to the session while the compaction of another run
awaits its summary makes that summary vanish, and the summarized messages with it.

Run: pip install "agent-framework-core==1.26.0"; python maf_concurrent_run_summary_lost.py
Exit 0 and "REPRODUCED" when the defect shows, 1 when it does not. Offline: both chat
clients are `BaseChatClient` subclasses; the summarizer takes a moment to answer, as a
model call does.
"""

import asyncio
import sys

from agent_framework import (
    Agent,
    BaseChatClient,
    ChatResponse,
    CompactionProvider,
    InMemoryHistoryProvider,
    Message,
    SummarizationStrategy,
)


class Client(BaseChatClient):
    """Answers `answer(text)` after `delay` seconds."""

    def __init__(self, answer, delay=0.0, **kwargs):
        super().__init__(**kwargs)
        self.answer, self.delay = answer, delay

    def _inner_get_response(self, *, messages, stream, options, **kwargs):
        async def reply():
            await asyncio.sleep(self.delay)
            text = self.answer("\n".join(m.text or "" for m in messages))
            return ChatResponse(messages=[Message(role="assistant", contents=[text])])

        return reply()


async def main():
    history = InMemoryHistoryProvider(skip_excluded=True)  # the compaction sample's setting
    compaction = CompactionProvider(
        after_strategy=SummarizationStrategy(
            client=Client(lambda text: "SUMMARY of the first turns", delay=0.2),
            target_count=2,
            threshold=2,
        ),
        history_source_id=history.source_id,
    )
    agent = Agent(
        client=Client(lambda text: "answer"), name="a", context_providers=[history, compaction]
    )
    # a second writer on the same session: a sub-agent run through as_tool(propagate_session=True)
    # shares the session's state the same way
    helper = Agent(
        client=Client(lambda text: "helper answer"), name="h", context_providers=[history]
    )
    session = agent.create_session()
    for n in (1, 2, 3):
        await helper.run(f"question {n}", session=session)

    async def second_writer():
        await asyncio.sleep(0.05)  # while the first run's compaction awaits its summary
        await helper.run("question 5", session=session)

    await asyncio.gather(agent.run("question 4", session=session), second_writer())
    loaded = await history.get_messages(None, state=session.state[history.source_id])
    texts = [m.text for m in loaded]
    print("the next run loads:", texts)
    gone = [q for q in ("question 1", "question 2") if q not in texts]
    if gone and not any("SUMMARY" in t for t in texts):
        print(f"REPRODUCED: {gone} and their answers are excluded, and their summary is gone")
        return 0
    print("NOT REPRODUCED")
    return 1


sys.exit(asyncio.run(main()))
