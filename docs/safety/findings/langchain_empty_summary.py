"""LangChain: an empty summary replaces the conversation history.

Run: pip install "langchain==1.5.2" "langgraph>=1.0"; python langchain_empty_summary.py
Exit 0 and "REPRODUCED" when the defect shows, 1 when it does not. Offline: LangChain's
own `GenericFakeChatModel` is both the agent's model and the summary model.
"""

import sys

from langchain.agents import create_agent
from langchain.agents.middleware import SummarizationMiddleware
from langchain_core.language_models.fake_chat_models import GenericFakeChatModel
from langchain_core.messages import AIMessage
from langgraph.checkpoint.memory import InMemorySaver

agent_model = GenericFakeChatModel(
    messages=iter([AIMessage(content=f"answer {n}") for n in (1, 2, 3)])
)
summary_model = GenericFakeChatModel(messages=iter([AIMessage(content="")]))  # an empty summary
middleware = SummarizationMiddleware(
    model=summary_model, trigger=("messages", 4), keep=("messages", 2)
)
agent = create_agent(model=agent_model, middleware=[middleware], checkpointer=InMemorySaver())
config = {"configurable": {"thread_id": "demo"}}
for text in ("question 1", "question 2", "question 3"):
    agent.invoke({"messages": [{"role": "user", "content": text}]}, config)

history = [m.content for m in agent.get_state(config).values["messages"]]
print("thread after the third turn:", history)
lost = [t for t in ("question 1", "answer 1") if t not in history]
if lost:
    print(f"REPRODUCED: {lost} are gone; the thread starts with {history[0]!r}")
    sys.exit(0)
print("NOT REPRODUCED: the history was kept")
sys.exit(1)
