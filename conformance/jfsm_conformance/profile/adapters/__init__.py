"""The profile's adapters, by name. Each module defines `scope()` and `factory(summarizer)`;
`scope()` raises `Unavailable` when its library is not installed.

| name | library, entry point |
|---|---|
| `toy`, `toy:BUG` | a list-backed toy memory, correct or with one switchable bug |
| `reference` | the jfsm reference engine (`GameEngine.before_generation`) |
| `langchain` | LangChain v1 `SummarizationMiddleware.abefore_model` (async hook) |
| `langchain-sync` | LangChain v1 `SummarizationMiddleware.before_model` (sync hook) |
| `langchain-trim` | as `langchain`, with a small `trim_tokens_to_summarize` (#39261's path) |
| `openai-agents` | openai-agents `OpenAIResponsesCompactionSession.run_compaction` |
| `langmem` | langmem `asummarize_messages` with a running summary |
| `llamaindex-summary` | LlamaIndex `ChatSummaryMemoryBuffer.get` (sync) |
| `llamaindex-memory` | LlamaIndex `Memory`, `FactExtractionMemoryBlock` (`_manage_queue`) |
| `adk` | Google ADK events compaction, sliding window (the runner's post-invocation step) |

Any other name of the form `module:attr` is a user's adapter: `resolve` imports `module`
(the current directory comes first on `sys.path`, as for `python -m`) and takes `attr`, an
`AdapterSpec`, any object with `factory` and `scope` attributes, or a callable (an adapter
class, say) with a `scope` attribute.
"""

from __future__ import annotations

import importlib
import os
import sys
from types import ModuleType

from ..adapter import AdapterFactory, Scope

__all__ = ["ADAPTERS", "load", "load_user_adapter", "resolve"]

ADAPTERS: dict[str, tuple[str, str]] = {
    "toy": ("toy", ""),
    "reference": ("reference", ""),
    "langchain": ("langchain_v1", "async"),
    "langchain-sync": ("langchain_v1", "sync"),
    "langchain-trim": ("langchain_v1", "trim"),
    "openai-agents": ("openai_agents", ""),
    "langmem": ("langmem_summary", ""),
    "llamaindex-summary": ("llamaindex_summary", ""),
    "llamaindex-memory": ("llamaindex_memory", ""),
    "adk": ("adk_compaction", ""),
}


def load(name: str) -> tuple[ModuleType, str]:
    """The adapter module of `name` (`toy:BUG` picks a toy bug) and its variant; `KeyError`
    for an unknown name."""
    if name.startswith("toy:"):
        return importlib.import_module(".toy", __package__), name[4:]
    module, variant = ADAPTERS[name]
    return importlib.import_module(f".{module}", __package__), variant


def is_user_ref(name: str) -> bool:
    """Whether `name` names a user's adapter (`module:attr`) rather than a registered one."""
    return ":" in name and not name.startswith("toy:")


def load_user_adapter(ref: str) -> tuple[AdapterFactory, Scope]:
    """The factory and scope of the user's adapter `module:attr` (see the module docs).
    Raises `KeyError` (with what is wrong) if the reference is malformed, the module cannot
    be imported, or `attr` is missing or has no `Scope`."""
    module_name, _, attr = ref.partition(":")
    if not module_name or not attr:
        raise KeyError(f"{ref!r}: an adapter reference is module:attr")
    cwd = os.getcwd()
    if cwd not in sys.path:
        sys.path.insert(0, cwd)
    try:
        module = importlib.import_module(module_name)
    except ImportError as exc:
        raise KeyError(f"{ref!r}: cannot import {module_name}: {exc}") from exc
    obj: object = module
    for part in attr.split("."):
        if not hasattr(obj, part):
            raise KeyError(f"{ref!r}: {module_name} has no attribute {attr}")
        obj = getattr(obj, part)
    scope = getattr(obj, "scope", None)
    if callable(scope) and not isinstance(scope, Scope):
        scope = scope()
    factory = getattr(obj, "factory", None)
    if factory is None and callable(obj):
        factory = obj
    if not isinstance(scope, Scope) or not callable(factory):
        raise KeyError(
            f"{ref!r}: expected an AdapterSpec (or an object with a callable `factory` and a "
            f"`scope: Scope`, or a callable with a `scope`), got {type(obj).__name__}"
        )
    return factory, scope


def resolve(name: str) -> tuple[AdapterFactory, Scope]:
    """The factory and scope of a registered adapter (`toy:BUG` included) or of a user's
    `module:attr`. Raises `KeyError` for an unknown or broken name, `Unavailable` when the
    adapter's library is not installed."""
    if is_user_ref(name):
        return load_user_adapter(name)
    module, variant = load(name)
    scope = module.scope(variant)  # first: it raises Unavailable without the library
    return module.factory(variant), scope
