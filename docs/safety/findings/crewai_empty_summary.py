"""crewAI: with respect_context_window=True (the default), an empty summary replaces the
whole conversation.

Run: pip install "crewai==1.15.30"; python crewai_empty_summary.py
Exit 0 and "REPRODUCED" when the defect shows, 1 when it does not. Offline: the LLM is a
`BaseLLM` subclass (the base class crewAI documents for custom LLMs) that finishes
normally with an empty completion.
"""

import sys

from crewai.llms.base_llm import BaseLLM
from crewai.utilities.agent_utils import handle_context_length
from crewai.utilities.message_utils import format_message_for_llm
from crewai.utilities.printer import Printer


class EmptyLLM(BaseLLM):
    def call(self, messages, *args, **kwargs):
        return ""

    async def acall(self, messages, *args, **kwargs):
        return ""

    def get_input_tokens_count(self, messages, *args, **kwargs):
        return sum(len(str(m.get("content", ""))) for m in messages) // 4 + 1


def main():
    messages = []
    for n in (1, 2, 3):
        messages.append(format_message_for_llm(f"question {n}", role="user"))
        messages.append(format_message_for_llm(f"answer {n}", role="assistant"))
    before = [m["content"] for m in messages]
    # the executor's recovery step after the model reported a context-length error
    handle_context_length(
        respect_context_window=True,
        printer=Printer(),
        messages=messages,
        llm=EmptyLLM(model="fake"),
        callbacks=[],
        verbose=False,
    )
    after = [m["content"] for m in messages]
    print("before:", before)
    print("after: ", after)
    if not any(t in " ".join(after) for t in before) and after and "<summary>" in after[-1]:
        print(f"REPRODUCED: all {len(before)} messages are gone; an empty summary stands in")
        return 0
    print("NOT REPRODUCED")
    return 1


sys.exit(main())
