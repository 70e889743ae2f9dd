"""openai-agents: an empty compaction result empties the session.

Run: pip install "openai-agents==0.24.0"; python openai_agents_empty_summary.py
Exit 0 and "REPRODUCED" when the defect shows, 1 when it does not. Offline: the SDK has no
fake OpenAI client, so a ten-line fake `responses.compact` answers with the real reply type
(`CompactedResponse`) and an empty `output` (no compaction item: an empty summary). The
store is the SDK's own `SQLiteSession` (in memory).
"""

import asyncio
import sys

from agents import SQLiteSession
from agents.memory import OpenAIResponsesCompactionSession
from openai.types.responses import CompactedResponse


class FakeResponses:
    async def compact(self, **kwargs):
        return CompactedResponse.construct(
            id="resp_compact_1",
            created_at=0,
            object="response.compaction",
            output=[],  # the model produced nothing to keep
            usage={
                "input_tokens": 10,
                "input_tokens_details": {"cached_tokens": 0},
                "output_tokens": 0,
                "output_tokens_details": {"reasoning_tokens": 0},
                "total_tokens": 10,
            },
        )


class FakeClient:
    responses = FakeResponses()


async def main() -> int:
    session = OpenAIResponsesCompactionSession(
        "demo",
        SQLiteSession("demo"),
        client=FakeClient(),
        compaction_mode="input",
        should_trigger_compaction=lambda ctx: True,
    )
    for n in (1, 2):
        await session.add_items(
            [
                {"role": "user", "content": f"question {n}"},
                {"role": "assistant", "content": f"answer {n}"},
            ]
        )
    before = await session.get_items()
    await session.run_compaction({"compaction_mode": "input"})
    after = await session.get_items()
    print(f"items before: {len(before)}, after: {len(after)}: {after}")
    if before and not after:
        print("REPRODUCED: the empty compaction result replaced the whole history")
        return 0
    print("NOT REPRODUCED")
    return 1


sys.exit(asyncio.run(main()))
