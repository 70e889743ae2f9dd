"""Agent Framework (configuration pitfall): with the history provider's default
`skip_excluded=False`, the next run loads a compaction's summary and every message it
summarized.

Run: pip install "agent-framework-core==1.26.0"; python maf_default_history_pitfall.py
Exit 0 and "REPRODUCED" when the pitfall shows, 1 when it does not. Offline: both chat
clients are `BaseChatClient` subclasses. `InMemoryHistoryProvider(skip_excluded=True)`
avoids it (the script checks that too).
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
    def __init__(self, text, **kwargs):
        super().__init__(**kwargs)
        self.text = text

    def _inner_get_response(self, *, messages, stream, options, **kwargs):
        async def reply():
            return ChatResponse(messages=[Message(role="assistant", contents=[self.text])])

        return reply()


async def loaded_after_compaction(history):
    compaction = CompactionProvider(
        after_strategy=SummarizationStrategy(
            client=Client("SUMMARY of the first turns"), target_count=2, threshold=2
        ),
        history_source_id=history.source_id,
    )
    agent = Agent(client=Client("answer"), name="a", context_providers=[history, compaction])
    session = agent.create_session()
    for n in (1, 2, 3, 4):
        await agent.run(f"question {n}", session=session)
    loaded = await history.get_messages(None, state=session.state[history.source_id])
    return [m.text for m in loaded]


async def main():
    default = await loaded_after_compaction(InMemoryHistoryProvider())
    avoided = await loaded_after_compaction(InMemoryHistoryProvider(skip_excluded=True))
    print("skip_excluded=False (default), the next run loads:", default)
    print("skip_excluded=True, the next run loads:           ", avoided)
    both = any("SUMMARY" in t for t in default) and "question 1" in default
    if both and "question 1" not in avoided and any("SUMMARY" in t for t in avoided):
        print("REPRODUCED: by default the summary and the messages it summarized are both loaded")
        return 0
    print("NOT REPRODUCED")
    return 1


sys.exit(asyncio.run(main()))
