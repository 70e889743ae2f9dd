"""pydantic-ai: the summarizing history processor of the docs drops every message between
the 10 it summarizes and the last one.

Run: pip install "pydantic-ai-slim==2.68.0"; python pydantic_ai_docs_processor_window.py
Exit 0 and "REPRODUCED" when the defect shows, 1 when it does not. Offline: both agents run
on pydantic-ai's own `FunctionModel`. The processor is the docs' "Summarize Old Messages"
example (docs/message-history.md) verbatim; only its agent's model differs.
"""

import asyncio
import sys

from pydantic_ai import Agent, ModelMessage, ModelRequest, ModelResponse, TextPart, UserPromptPart
from pydantic_ai.capabilities import ProcessHistory
from pydantic_ai.models.function import FunctionModel


def texts(messages):
    parts = [p for m in messages for p in m.parts]
    return [p.content for p in parts if isinstance(getattr(p, "content", None), str)]


summarize_agent = Agent(
    FunctionModel(lambda messages, info: ModelResponse(parts=[TextPart("a summary")])),
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
    return ModelResponse(parts=[TextPart("an answer")])


agent = Agent(FunctionModel(answer), capabilities=[ProcessHistory(summarize_old_messages)])


async def main():
    # a conversation of 6 exchanges (12 messages), as stored by an application, loaded from a
    # database or handed over by another agent
    history = []
    for n in range(1, 7):
        history += [
            ModelRequest(parts=[UserPromptPart(content=f"question {n}")]),
            ModelResponse(parts=[TextPart(content=f"answer {n}")]),
        ]
    result = await agent.run("question 7", message_history=history)
    print("the model was sent:", sent)
    print("the history now:   ", texts(result.all_messages()))
    lost = [t for t in ("question 6", "answer 6") if t not in texts(result.all_messages())]
    if lost and "a summary" in sent:
        print(f"REPRODUCED: {lost} were neither summarized nor kept")
        return 0
    print("NOT REPRODUCED")
    return 1


sys.exit(asyncio.run(main()))
