"""The profile's adapters, by name, each one an `AdapterSpec` that `--adapter module:attr`
takes as it is: a registered name is only a short name for its `module:attr` reference.

| name | `module:attr` in this package | what it drives |
|---|---|---|
| `toy`, `toy:BUG` | `toy:adapter`, `toy:<bug>` | a toy memory, correct or with one bug |
| `reference` | `reference:adapter` | the jfsm reference engine |
| `langchain` | `langchain_v1:adapter` | `SummarizationMiddleware.abefore_model` |
| `langchain-sync` | `langchain_v1:sync_adapter` | the same, `before_model` |
| `langchain-trim` | `langchain_v1:trim_adapter` | with `trim_tokens_to_summarize` |
| `openai-agents` | `openai_agents:adapter` | `OpenAIResponsesCompactionSession` |
| `langmem` | `langmem_summary:adapter` | `asummarize_messages` |
| `llamaindex-summary` | `llamaindex_summary:adapter` | `ChatSummaryMemoryBuffer.get` |
| `llamaindex-memory` | `llamaindex_memory:adapter` | `Memory` with a fact block |
| `adk` | `adk_compaction:adapter` | ADK events compaction |
| `semantic-kernel` | `semantic_kernel_reducer:adapter` | `ChatHistorySummarizationReducer` |
| `strands` | `strands_summary:adapter` | `SummarizingConversationManager` |
| `agno` | `agno_compaction:adapter` | Agno `Compaction` |
| `autogen-*` | `autogen_context:<context>` | AutoGen model contexts |
| `pydantic-ai` | `pydantic_ai_history:adapter` | the docs' summarizing history processor |
| `maf`, `maf-default-history` | `maf_compaction:<config>` | Agent Framework `CompactionProvider` |
| `crewai`, `crewai-strict` | `crewai_context:<config>` | crewAI `respect_context_window` |
| `camel` | `camel_summary:adapter` | CAMEL `ChatAgent` summarization |

A library adapter imports its library at the top, as an adapter of your own would: its
module does not import without the library, and `resolve` turns that `ImportError` into
`Unavailable` naming the extra to install. Any other name of the form `module:attr` is a
user's adapter: `load_user_adapter` imports `module` (the current directory comes first on
`sys.path`, as for `python -m`) and takes `attr`, an `AdapterSpec`, any object with
`factory` and `scope` attributes, or a callable (an adapter class, say) with a `scope`.
"""

from __future__ import annotations

import importlib
import os
import sys
from dataclasses import dataclass

from ..adapter import AdapterFactory, Scope, Unavailable

__all__ = [
    "ADAPTERS",
    "Registered",
    "UnknownAdapter",
    "adapter_error",
    "load_user_adapter",
    "resolve",
]


@dataclass(frozen=True)
class Registered:
    """A registered adapter: its `module:attr` reference in this package, the extra that
    installs its library and the distribution `--version` pins ("" for none)."""

    ref: str
    extra: str = ""
    package: str = ""

    @property
    def qualified(self) -> str:
        """The reference as `--adapter` takes it from anywhere: `jfsm_conformance...:attr`."""
        return f"{__name__}.{self.ref}"


_LANGCHAIN = ("profile-langchain", "langchain")
_LLAMAINDEX = ("profile-llamaindex", "llama-index-core")
_AUTOGEN = ("profile-autogen", "autogen-agentchat")
_MAF = ("profile-agent-framework", "agent-framework-core")
_CREWAI = ("profile-crewai", "crewai")
_CAMEL = ("profile-camel", "camel-ai")

ADAPTERS: dict[str, Registered] = {
    "toy": Registered("toy:adapter"),
    "reference": Registered("reference:adapter"),
    "langchain": Registered("langchain_v1:adapter", *_LANGCHAIN),
    "langchain-sync": Registered("langchain_v1:sync_adapter", *_LANGCHAIN),
    "langchain-trim": Registered("langchain_v1:trim_adapter", *_LANGCHAIN),
    "openai-agents": Registered("openai_agents:adapter", "profile-openai-agents", "openai-agents"),
    "langmem": Registered("langmem_summary:adapter", "profile-langmem", "langmem"),
    "llamaindex-summary": Registered("llamaindex_summary:adapter", *_LLAMAINDEX),
    "llamaindex-memory": Registered("llamaindex_memory:adapter", *_LLAMAINDEX),
    "adk": Registered("adk_compaction:adapter", "profile-adk", "google-adk"),
    "semantic-kernel": Registered(
        "semantic_kernel_reducer:adapter", "profile-semantic-kernel", "semantic-kernel"
    ),
    "strands": Registered("strands_summary:adapter", "profile-strands", "strands-agents"),
    "agno": Registered("agno_compaction:adapter", "profile-agno", "agno[sqlite]"),
    "autogen-unbounded": Registered("autogen_context:unbounded", *_AUTOGEN),
    "autogen-buffered": Registered("autogen_context:buffered", *_AUTOGEN),
    "autogen-head-tail": Registered("autogen_context:head_and_tail", *_AUTOGEN),
    "autogen-token-limited": Registered("autogen_context:token_limited", *_AUTOGEN),
    "pydantic-ai": Registered(
        "pydantic_ai_history:adapter", "profile-pydantic-ai", "pydantic-ai-slim"
    ),
    "maf": Registered("maf_compaction:adapter", *_MAF),
    "maf-default-history": Registered("maf_compaction:default_history_adapter", *_MAF),
    "crewai": Registered("crewai_context:adapter", *_CREWAI),
    "crewai-strict": Registered("crewai_context:strict_adapter", *_CREWAI),
    "camel": Registered("camel_summary:adapter", *_CAMEL),
}


class UnknownAdapter(KeyError):
    """`--adapter` names nothing registered and is no `module:attr` (the message is one line
    saying what to give instead)."""

    def __str__(self) -> str:
        return str(self.args[0]) if self.args else ""


def adapter_error(exc: BaseException) -> str:
    """What `resolve` raised, as the one line a user reads (a `KeyError`'s message unquoted)."""
    return str(exc.args[0]) if isinstance(exc, KeyError) and exc.args else str(exc)


def registered(name: str) -> Registered | None:
    """The registered adapter `name` (`toy:BUG` picks a toy bug), if there is one."""
    if name.startswith("toy:"):
        return Registered(f"toy:{name[4:].replace('-', '_') or 'adapter'}")
    return ADAPTERS.get(name)


def is_user_ref(name: str) -> bool:
    """Whether `name` names a user's adapter (`module:attr`) rather than a registered one."""
    return ":" in name and not name.startswith("toy:")


def load_user_adapter(ref: str) -> tuple[AdapterFactory, Scope]:
    """The factory and scope of the adapter `module:attr` (see the module docs). Raises
    `KeyError` (with what is wrong) if the reference is malformed, the module cannot be
    imported, or `attr` is missing or has no `Scope`."""
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
    `module:attr`. Raises `UnknownAdapter` for a name that is neither, `KeyError` for a
    broken reference, `Unavailable` when a registered adapter's library is not installed."""
    if is_user_ref(name):
        return load_user_adapter(name)
    entry = registered(name)
    if entry is None:
        raise UnknownAdapter(
            f"unknown adapter {name!r}: `jfsm profile --list` shows the registered ones; "
            "an adapter of your own is given as module:attr (an AdapterSpec)"
        )
    module_name = f"{__name__}.{entry.ref.partition(':')[0]}"
    try:
        importlib.import_module(module_name)
    except ImportError as exc:
        raise Unavailable(
            f"adapter {name!r} needs {exc.name or 'its library'}, which is not installed: "
            f"install the extra {entry.extra} (uv sync --extra {entry.extra})"
        ) from exc
    try:
        return load_user_adapter(entry.qualified)
    except KeyError as exc:
        if name.startswith("toy:"):
            raise UnknownAdapter(f"toy has no bug {name[4:]!r}: `jfsm profile --list`") from exc
        raise
