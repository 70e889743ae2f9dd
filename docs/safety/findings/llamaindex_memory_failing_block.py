"""LlamaIndex `Memory`: a memory block whose model fails loses the flushed messages.

Run: pip install "llama-index-core==0.14.25"; python llamaindex_memory_failing_block.py
Exit 0 and "REPRODUCED" when the defect shows, 1 when it does not. Offline: LlamaIndex's
own `MockLLM`, whose `achat` is made to time out as a provider would, and the default chat
store (SQLite in memory).
"""

import sys

from llama_index.core.llms import ChatMessage, MessageRole, MockLLM
from llama_index.core.memory import FactExtractionMemoryBlock, Memory


class TimingOutLLM(MockLLM):
    async def achat(self, messages, **kwargs):
        raise TimeoutError("the provider did not answer in time")


memory = Memory.from_defaults(
    session_id="repro",
    token_limit=6,  # with the default chat_history_token_ratio 0.7: at most 4 messages
    token_flush_size=2,
    tokenizer_fn=lambda text: [text],  # one token per message, no tokenizer download
    memory_blocks=[FactExtractionMemoryBlock(llm=TimingOutLLM())],
)
for n in (1, 2):
    memory.put(ChatMessage(role=MessageRole.USER, content=f"question {n}"))
    memory.put(ChatMessage(role=MessageRole.ASSISTANT, content=f"answer {n}"))
print("before:", [m.content for m in memory.get()])
try:
    memory.put(ChatMessage(role=MessageRole.USER, content="question 3"))  # over the limit
except TimeoutError as exc:
    print(f"put() raised {type(exc).__name__}: {exc}")
seen = [m.content for m in memory.get()]  # what the model is given next
print("after: ", seen)
lost = [t for t in ("question 1", "answer 1") if not any(t in (s or "") for s in seen)]
if lost:
    print(f"REPRODUCED: {lost} are gone from the memory after the failed fact extraction")
    sys.exit(0)
print("NOT REPRODUCED")
sys.exit(1)
