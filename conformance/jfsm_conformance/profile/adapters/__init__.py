"""The profile's adapters, by name. Each module defines `scope()` and `factory(summarizer)`;
`scope()` raises `Unavailable` when its library is not installed.

| name | library, entry point |
|---|---|
| `toy`, `toy:BUG` | a list-backed toy memory, correct or with one switchable bug |
| `reference` | the jfsm reference engine (`GameEngine.before_generation`) |
| `langchain` | LangChain v1 `SummarizationMiddleware.abefore_model` (async hook) |
| `langchain-sync` | LangChain v1 `SummarizationMiddleware.before_model` (sync hook) |
| `openai-agents` | openai-agents `OpenAIResponsesCompactionSession.run_compaction` |
| `langmem` | langmem `asummarize_messages` with a running summary |
"""

from __future__ import annotations

import importlib
from types import ModuleType

__all__ = ["ADAPTERS", "load"]

ADAPTERS: dict[str, tuple[str, str]] = {
    "toy": ("toy", ""),
    "reference": ("reference", ""),
    "langchain": ("langchain_v1", "async"),
    "langchain-sync": ("langchain_v1", "sync"),
    "openai-agents": ("openai_agents", ""),
    "langmem": ("langmem_summary", ""),
}


def load(name: str) -> tuple[ModuleType, str]:
    """The adapter module of `name` (`toy:BUG` picks a toy bug) and its variant; `KeyError`
    for an unknown name."""
    if name.startswith("toy:"):
        return importlib.import_module(".toy", __package__), name[4:]
    module, variant = ADAPTERS[name]
    return importlib.import_module(f".{module}", __package__), variant
