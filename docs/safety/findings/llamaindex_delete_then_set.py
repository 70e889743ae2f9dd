"""LlamaIndex: `ChatSummaryMemoryBuffer.get` rewrites the chat store as delete, then set.

Run: pip install "llama-index-core==0.14.25"; python llamaindex_delete_then_set.py
Exit 0 and "REPRODUCED" when the defect shows, 1 when it does not. Offline: LlamaIndex's
own `MockLLM` is the summarizer, and its own `SimpleChatStore` the chat store, with one
change: its `set_messages` first records what a reader would see at that moment, and can
fail once, as a remote chat store's write does when its connection drops.
"""

import sys

from llama_index.core.llms import ChatMessage, MessageRole, MockLLM
from llama_index.core.memory import ChatSummaryMemoryBuffer
from llama_index.core.storage.chat_store import SimpleChatStore

seen_by_a_reader = []


class FlakyChatStore(SimpleChatStore):
    fail_next: bool = False

    def set_messages(self, key, messages):
        seen_by_a_reader.append([m.content for m in self.get_messages(key)])
        if self.fail_next:
            self.fail_next = False
            raise ConnectionError("the chat store's connection dropped")
        super().set_messages(key, messages)


store = FlakyChatStore()
memory = ChatSummaryMemoryBuffer.from_defaults(
    llm=MockLLM(),
    token_limit=4,
    tokenizer_fn=str.split,  # no tokenizer download
    chat_store=store,
)
for n in (1, 2):
    memory.put(ChatMessage(role=MessageRole.USER, content=f"question {n}"))
    memory.put(ChatMessage(role=MessageRole.ASSISTANT, content=f"answer {n}"))

# 1. get() summarizes the older exchange (MockLLM) and writes the result: a reader between
#    its delete and its set sees an empty history
before = [m.content for m in memory.get_all()]
memory.get()
between = seen_by_a_reader[-1]
print("held before get():        ", before)
print("held after get():         ", [m.content[:40] for m in memory.get_all()])
print("a reader during get() saw:", between)

# 2. the next get() (what a chat engine calls before its next model call) when the chat
#    store's write fails: the history is gone, summary and recent messages alike
store.fail_next = True
try:
    memory.get()
except ConnectionError as exc:
    print(f"get() raised {type(exc).__name__}: {exc}")
after = [m.content for m in memory.get_all()]
print("held after the failed write:", after)
if before and not between and not after:
    print(
        "REPRODUCED: get() deletes the chat history before it writes the new one: a reader "
        "in between sees an empty history, and a failed write loses all of it"
    )
    sys.exit(0)
print("NOT REPRODUCED")
sys.exit(1)
