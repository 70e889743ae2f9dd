"""CAMEL: when the summary call fails (raises, times out or answers nothing), ChatAgent
clears its memory anyway and keeps only an empty message and the last user message.

Run: pip install "camel-ai==0.2.90" "mcp<2"; python camel_failed_summary_clears_memory.py
Exit 0 and "REPRODUCED" when the defect shows, 1 when it does not. Offline: the model is a
subclass of CAMEL's own test double, `StubModel`, whose call raises, as a provider's error
does; its token counter counts 10 tokens a message. The summary's markdown file goes to a
temporary directory.
"""

import asyncio
import sys
import tempfile

from camel.agents import ChatAgent
from camel.messages import BaseMessage
from camel.models.stub_model import StubModel
from camel.types import ModelType, OpenAIBackendRole
from camel.utils.context_utils import ContextUtility
from camel.utils.token_counting import BaseTokenCounter


class TenPerMessage(BaseTokenCounter):
    def count_tokens_from_messages(self, messages):
        return 10 * len(messages)

    def encode(self, text):
        return [0] * len(text)

    def decode(self, token_ids):
        return ""


class FailingModel(StubModel):
    async def _arun(self, messages, response_format=None, tools=None):
        raise RuntimeError("the provider is overloaded")

    def _run(self, messages, response_format=None, tools=None):
        raise RuntimeError("the provider is overloaded")


async def main():
    model = FailingModel(ModelType.STUB, token_counter=TenPerMessage())
    agent = ChatAgent(model=model, token_limit=100, summarize_threshold=50)  # 50: the default
    agent._context_utility = ContextUtility(working_directory=tempfile.mkdtemp())
    for n in (1, 2, 3):
        agent.update_memory(
            BaseMessage.make_user_message("user", f"question {n}"), OpenAIBackendRole.USER
        )
        agent.update_memory(
            BaseMessage.make_assistant_message("assistant", f"answer {n}"),
            OpenAIBackendRole.ASSISTANT,
        )
    before = [m["content"] for m in agent.memory.get_context()[0]]
    # the step astep() runs before every model call: 60 tokens > 50% of 100
    await agent._get_context_with_summarization_async()
    after = [m["content"] for m in agent.memory.get_context()[0]]
    print("before:", before)
    print("after: ", after)
    gone = [t for t in before if t not in after]
    if gone and "" in after:
        print(f"REPRODUCED: the summary call failed and {gone} are gone anyway")
        return 0
    print("NOT REPRODUCED")
    return 1


sys.exit(asyncio.run(main()))
