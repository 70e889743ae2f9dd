"""Semantic Kernel: an empty summary replaces the summarized messages.

Run: pip install "semantic-kernel==1.45.0"; python semantic_kernel_empty_summary.py
Exit 0 and "REPRODUCED" when the defect shows, 1 when it does not. Offline: the summary
service is a `ChatCompletionClientBase` subclass (the connectors' base class) that answers
one assistant message with empty content, as a chat completion can.
"""

import asyncio
import sys

from semantic_kernel.connectors.ai.chat_completion_client_base import ChatCompletionClientBase
from semantic_kernel.contents import AuthorRole, ChatMessageContent
from semantic_kernel.contents.history_reducer.chat_history_summarization_reducer import (
    ChatHistorySummarizationReducer,
)


class EmptySummaryService(ChatCompletionClientBase):
    """Finishes normally with an empty assistant message."""

    async def _inner_get_chat_message_contents(self, chat_history, settings):
        return [ChatMessageContent(role=AuthorRole.ASSISTANT, content="")]


async def main():
    history = ChatHistorySummarizationReducer(
        service=EmptySummaryService(ai_model_id="fake"), target_count=2, threshold_count=2
    )
    for n in (1, 2, 3):
        history.add_user_message(f"question {n}")
        history.add_assistant_message(f"answer {n}")
    before = [str(m.content) for m in history.messages]
    reduced = await history.reduce()  # what an application calls before the next model call
    after = [str(m.content) for m in history.messages]
    print("before:", before)
    print("after: ", after)
    lost = [t for t in before if t not in after]
    if reduced is not None and lost and after[0] == "":
        print(f"REPRODUCED: {lost} are gone; an empty summary stands in for them")
        return 0
    print("NOT REPRODUCED")
    return 1


sys.exit(asyncio.run(main()))
