"""LangChain #39261: the history is replaced by a placeholder, the summary model never called.

Run: pip install "langchain==1.5.2" "langgraph>=1.0"; python langchain_39261_placeholder.py
Exit 0 and "REPRODUCED" when the defect shows, 1 when it does not. Offline: LangChain's
own `GenericFakeChatModel` is the summary model (it is never reached).
"""

import sys

from langchain.agents.middleware import SummarizationMiddleware
from langchain_core.language_models.fake_chat_models import GenericFakeChatModel
from langchain_core.messages import AIMessage, HumanMessage
from langgraph.graph.message import add_messages

calls = []


class CountingModel(GenericFakeChatModel):
    def _generate(self, *args, **kwargs):
        calls.append(1)
        return super()._generate(*args, **kwargs)


middleware = SummarizationMiddleware(
    model=CountingModel(messages=iter([AIMessage(content="a real summary")])),
    trigger=("messages", 4),
    keep=("messages", 2),
    trim_tokens_to_summarize=40,
)
messages = [
    HumanMessage(content="please read this report: " + "lorem ipsum " * 40),  # a long input
    AIMessage(content="done"),
    HumanMessage(content="question 2"),
    AIMessage(content="answer 2"),
]
update = middleware.before_model({"messages": messages}, None)
history = [m.content for m in add_messages(messages, update["messages"])] if update else []
print("history after the hook:", [h[:60] for h in history])
print("summary model calls:", len(calls))
if any("too long to summarize" in h for h in history) and not calls:
    print("REPRODUCED: the first exchange was replaced by a placeholder; no summary was made")
    sys.exit(0)
print("NOT REPRODUCED")
sys.exit(1)
