"""langmem: an empty summary replaces the messages it was asked to summarize.

Run: pip install "langmem==0.0.30"; python langmem_empty_summary.py
Exit 0 and "REPRODUCED" when the defect shows, 1 when it does not. Offline: LangChain's
own `GenericFakeChatModel` answers the summarization call with an empty text.
"""

import sys

from langchain_core.language_models.fake_chat_models import GenericFakeChatModel
from langchain_core.messages import AIMessage, HumanMessage
from langmem.short_term import summarize_messages

messages = []
for n in (1, 2, 3):
    messages += [
        HumanMessage(content=f"question {n}", id=f"q{n}"),
        AIMessage(content=f"answer {n}", id=f"a{n}"),
    ]
model = GenericFakeChatModel(messages=iter([AIMessage(content="")]))  # an empty summary
result = summarize_messages(
    messages,
    running_summary=None,
    model=model,
    max_tokens=8,
    max_tokens_before_summary=4,
    max_summary_tokens=1,
    token_counter=len,  # one token per message
)
seen = [str(m.content) for m in result.messages]
print("what the model would see next:", seen)
print("running summary:", repr(result.running_summary and result.running_summary.summary))
lost = [t for t in ("question 1", "answer 1") if not any(t in s for s in seen)]
if lost and result.running_summary is not None:
    print(f"REPRODUCED: {lost} are gone, replaced by {seen[0]!r}")
    sys.exit(0)
print("NOT REPRODUCED")
sys.exit(1)
