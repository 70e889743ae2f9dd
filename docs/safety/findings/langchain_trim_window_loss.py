"""LangChain: messages older than the trim window are removed without being summarized.

Run: pip install "langchain==1.5.2" "langgraph>=1.0"; python langchain_trim_window_loss.py
Exit 0 and "REPRODUCED" when the defect shows, 1 when it does not. Offline: LangChain's
own `GenericFakeChatModel` is the summary model; the script records what it was sent.
"""

import sys

from langchain.agents.middleware import SummarizationMiddleware
from langchain_core.language_models.fake_chat_models import GenericFakeChatModel
from langchain_core.messages import AIMessage, HumanMessage
from langgraph.graph.message import add_messages

prompts = []


class RecordingModel(GenericFakeChatModel):
    def _generate(self, messages, *args, **kwargs):
        prompts.append("\n".join(str(m.content) for m in messages))
        return super()._generate(messages, *args, **kwargs)


middleware = SummarizationMiddleware(
    model=RecordingModel(messages=iter([AIMessage(content="the user asked about Lisbon")])),
    trigger=("messages", 8),
    keep=("messages", 2),
    trim_tokens_to_summarize=40,  # the default is 4000: the same happens past 4000 tokens
)
messages = [
    HumanMessage(content="my flight is on the 14th, booking reference QX7F2L"),
    AIMessage(content="noted: the 14th, reference QX7F2L"),
    HumanMessage(content="and the hotel is the one near the river"),
    AIMessage(content="noted: the hotel by the river"),
    HumanMessage(content="what is there to see in Lisbon?"),
    AIMessage(content="the Alfama, Belem tower, the tram 28"),
    HumanMessage(content="question 4"),
    AIMessage(content="answer 4"),
]
update = middleware.before_model({"messages": messages}, None)
history = [str(m.content) for m in add_messages(messages, update["messages"])] if update else []
print("history after the hook:", [h[:70] for h in history])
print("summary model calls:", len(prompts))
seen = prompts[0] if prompts else ""
lost = [
    str(m.content) for m in messages if str(m.content) not in history and str(m.content) not in seen
]
if prompts and lost:
    print(f"REPRODUCED: {lost} were removed, and the summary model never saw them")
    sys.exit(0)
print("NOT REPRODUCED")
sys.exit(1)
