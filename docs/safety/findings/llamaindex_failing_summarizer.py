"""LlamaIndex: a summarizer that raises or times out loses the most recent messages.

Run: pip install "llama-index-core==0.14.25"; python llamaindex_failing_summarizer.py
Exit 0 and "REPRODUCED" when the defect shows, 1 when it does not. Offline: LlamaIndex's
own `MockLLM`, whose `chat` is made to time out as a provider would.
"""

import sys

from llama_index.core.llms import ChatMessage, MessageRole, MockLLM
from llama_index.core.memory import ChatSummaryMemoryBuffer


class TimingOutLLM(MockLLM):
    def chat(self, messages, **kwargs):
        raise TimeoutError("the provider did not answer in time")


memory = ChatSummaryMemoryBuffer.from_defaults(
    llm=TimingOutLLM(),
    token_limit=4,
    tokenizer_fn=str.split,  # no tokenizer download
)
for n in (1, 2, 3):
    memory.put(ChatMessage(role=MessageRole.USER, content=f"question {n}"))
    memory.put(ChatMessage(role=MessageRole.ASSISTANT, content=f"answer {n}"))
before = [m.content for m in memory.get_all()]
try:
    memory.get()  # what a chat engine calls before each model call
except TimeoutError as exc:
    print(f"get() raised {type(exc).__name__}: {exc}")
after = [m.content for m in memory.get_all()]
print("before:", before)
print("after: ", after)
lost = [t for t in before if t not in after]
if lost:
    print(f"REPRODUCED: {lost} are gone from the chat store after the failed summary")
    sys.exit(0)
print("NOT REPRODUCED")
sys.exit(1)
