"""Strands Agents: when the kept messages alone overflow the context, every recovery
summarizes the previous summary again, until the recursion limit.

Run: pip install "strands-agents==1.62.0"; python strands_resummarize_summary.py
Exit 0 and "REPRODUCED" when the defect shows, 1 when it does not. Offline: both models
are `strands.models.Model` subclasses (the SDK's extension point for providers); the main
model reports a context overflow whenever its request is longer than 150 characters.
"""

import asyncio
import sys

from strands import Agent
from strands.agent.conversation_manager import SummarizingConversationManager
from strands.models.model import Model
from strands.types.exceptions import ContextWindowOverflowException


def texts(messages):
    return ["".join(b.get("text", "") for b in m["content"]) for m in messages]


class FakeModel(Model):
    """Streams `reply(texts)`; records what it was sent; overflows above `limit` characters."""

    def __init__(self, reply, limit=None):
        self.reply, self.limit, self.requests = reply, limit, []

    def update_config(self, **model_config):
        pass

    def get_config(self):
        return {}

    def structured_output(self, *args, **kwargs):
        raise NotImplementedError

    async def stream(self, messages, *args, **kwargs):
        sent = texts(messages)
        self.requests.append(sent)
        if self.limit is not None and sum(map(len, sent)) > self.limit:
            raise ContextWindowOverflowException("input is too long for the model")
        yield {"messageStart": {"role": "assistant"}}
        yield {"contentBlockDelta": {"delta": {"text": self.reply(sent)}}}
        yield {"contentBlockStop": {}}
        yield {"messageStop": {"stopReason": "end_turn"}}


async def main():
    summarizer = FakeModel(lambda sent: f"summary {len(summarizer.requests)}")
    model = FakeModel(lambda sent: "a long answer " * 5)
    agent = Agent(
        model=model,
        aux_model=summarizer,  # the model the summarizing manager calls
        conversation_manager=SummarizingConversationManager(
            summary_ratio=0.5, preserve_recent_messages=2
        ),
        callback_handler=None,
    )
    for n in (1, 2):
        await agent.invoke_async(f"question {n}")
    model.limit = 150  # from now on the two kept messages alone are too long
    error = None
    try:
        await agent.invoke_async("question 3 " + "x" * 100)
    except BaseException as exc:
        error = exc
    # each summarizer request is the messages to summarize plus the SDK's own instruction
    only_a_summary = [r for r in summarizer.requests if len(r) == 2 and r[0].startswith("summary")]
    print("summarizer calls:", len(summarizer.requests))
    print("calls given nothing but the previous summary:", len(only_a_summary))
    print("the turn ended with:", type(error).__name__, str(error)[:80])
    if len(only_a_summary) >= 10 and isinstance(error, RecursionError):
        print("REPRODUCED: the manager re-summarized its own summary until the recursion limit")
        return 0
    print("NOT REPRODUCED")
    return 1


sys.exit(asyncio.run(main()))
