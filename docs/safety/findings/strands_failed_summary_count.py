"""Strands Agents: a failed summary still counts its messages as removed, and a restored
session loses them.

Run: pip install "strands-agents==1.62.0"; python strands_failed_summary_count.py
Exit 0 and "REPRODUCED" when the defect shows, 1 when it does not. Offline: both models
are `strands.models.Model` subclasses (the SDK's extension point for providers); the
session is Strands' own `FileSessionManager` in a temporary directory.
"""

import asyncio
import sys
import tempfile

from strands import Agent
from strands.agent.conversation_manager import SummarizingConversationManager
from strands.models.model import Model
from strands.session.file_session_manager import FileSessionManager
from strands.types.exceptions import ContextWindowOverflowException


class FakeModel(Model):
    """Streams one text reply; `fail` (an exception class) makes the next call raise it."""

    def __init__(self, reply):
        self.reply, self.fail = reply, None

    def update_config(self, **model_config):
        pass

    def get_config(self):
        return {}

    def structured_output(self, *args, **kwargs):
        raise NotImplementedError

    async def stream(self, messages, *args, **kwargs):
        if self.fail is not None:
            error, self.fail = self.fail, None
            raise error("scripted failure")
        yield {"messageStart": {"role": "assistant"}}
        yield {"contentBlockDelta": {"delta": {"text": self.reply}}}
        yield {"contentBlockStop": {}}
        yield {"messageStop": {"stopReason": "end_turn"}}


def build(storage, summarizer):
    return Agent(
        agent_id="assistant",
        model=FakeModel("an answer"),
        aux_model=summarizer,  # the model the summarizing manager calls
        conversation_manager=SummarizingConversationManager(
            summary_ratio=0.5, preserve_recent_messages=2
        ),
        session_manager=FileSessionManager(session_id="s", storage_dir=storage),
        callback_handler=None,
    )


def texts(agent):
    return ["".join(b.get("text", "") for b in m["content"]) for m in agent.messages]


async def main():
    storage = tempfile.mkdtemp()
    summarizer = FakeModel("a summary")
    agent = build(storage, summarizer)
    for n in (1, 2, 3):
        await agent.invoke_async(f"question {n}")
    # turn 4: the model reports a context overflow, the agent asks the manager to summarize,
    # and the summary call fails (a provider error, a timeout or an empty reply alike)
    agent.model.fail = ContextWindowOverflowException
    summarizer.fail = RuntimeError
    try:
        await agent.invoke_async("question 4")
    except Exception as exc:
        print("turn 4 failed as it should:", type(exc).__name__, exc)
    print("live agent:", texts(agent))
    print("removed_message_count:", agent.conversation_manager.removed_message_count)
    restored = build(storage, FakeModel("a summary"))  # a restart, or the next request
    print("restored:  ", texts(restored))
    lost = [t for t in ("question 1", "an answer") if t not in texts(restored)]
    if lost and "question 1" in texts(agent) and len(texts(restored)) < len(texts(agent)):
        print(
            f"REPRODUCED: the restored session lost {len(texts(agent)) - len(texts(restored))}"
            " messages that were never summarized"
        )
        return 0
    print("NOT REPRODUCED")
    return 1


sys.exit(asyncio.run(main()))
