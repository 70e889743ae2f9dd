"""pydantic-ai: a whitespace-only summary replaces the 10 oldest messages (the docs'
summarizing history processor).

Run: pip install "pydantic-ai-slim==2.68.0"; python pydantic_ai_blank_summary.py
Exit 0 and "REPRODUCED" when the defect shows, 1 when it does not. Offline: both agents run
on pydantic-ai's own `FunctionModel`. The processor is the docs' "Summarize Old Messages"
example (docs/message-history.md) verbatim; its agent's model answers " \\n".
"""

import asyncio
import sys

from pydantic_ai import Agent, ModelMessage, ModelResponse, TextPart
from pydantic_ai.capabilities import ProcessHistory
from pydantic_ai.models.function import FunctionModel


def texts(messages):
    parts = [p for m in messages for p in m.parts]
    return [p.content for p in parts if isinstance(getattr(p, "content", None), str)]


summarize_agent = Agent(
    FunctionModel(lambda messages, info: ModelResponse(parts=[TextPart(" \n")])),
    instructions="""
Summarize this conversation, omitting small talk and unrelated topics.
Focus on the technical discussion and next steps.
""",
)


async def summarize_old_messages(messages: list[ModelMessage]) -> list[ModelMessage]:
    # Summarize the oldest 10 messages
    if len(messages) > 10:
        oldest_messages = messages[:10]
        summary = await summarize_agent.run(message_history=oldest_messages)
        # Return the last message and the summary
        return summary.new_messages() + messages[-1:]

    return messages


sent = []


def answer(messages, info):
    sent[:] = texts(messages)
    asked = [t for t in sent if t.startswith("question ")]
    return ModelResponse(parts=[TextPart(f"answer {len(asked)}")])  # numbered: each is named


agent = Agent(FunctionModel(answer), capabilities=[ProcessHistory(summarize_old_messages)])


async def main():
    history = []
    for n in range(1, 6):  # five exchanges: with the next question, 11 messages
        result = await agent.run(f"question {n}", message_history=history)
        history = result.all_messages()
    before = texts(history)  # the ten messages of turns 1 to 5
    result = await agent.run("question 6", message_history=history)
    print("the model was sent:", sent)
    lost = [t for t in before if t not in sent]
    if lost and " \n" in sent:
        print(
            f"REPRODUCED: {len(lost)} of the {len(before)} earlier messages are gone "
            f"({', '.join(lost)}); a whitespace-only summary stands in for them"
        )
        return 0
    print("NOT REPRODUCED")
    return 1


sys.exit(asyncio.run(main()))
