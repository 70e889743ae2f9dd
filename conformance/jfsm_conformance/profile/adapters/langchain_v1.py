"""LangChain v1 `SummarizationMiddleware` under the profile, offline.

- Hook: `before_model` (variant `sync`) or `abefore_model` (variant `async`), called with
  the agent state `{"messages": [...]}` as `create_agent`'s graph would call it.
- Storage: the update the hook returns is applied with LangGraph's own `add_messages`
  reducer (the one `AgentState.messages` uses), so `RemoveMessage(REMOVE_ALL_MESSAGES)`
  behaves as in a real graph. LangGraph commits a node's update in one checkpoint write and
  runs one step per thread at a time: the scope is one writer, and storage write failures
  are the checkpointer's, not the middleware's (not claimed).
- Provider: `ProfileChatModel`, a `BaseChatModel` whose `_generate` / `_agenerate` hand the
  prompt's text to the scripted summarizer; a failure raises `SummarizerFailed` (a
  `RuntimeError`), a timeout `SummarizerTimeout` (a `TimeoutError`). Releases that retry
  the summary call (`with_retry`) keep their attempts; only the back-off sleep between
  attempts is switched off, to keep the run fast.
- Thresholds: `trigger=("messages", 4)`, `keep=("messages", 2)`.
- Variant `trim` (`--adapter langchain-trim`): the async hook with
  `trim_tokens_to_summarize=14`, a window one exchange with longer texts overflows, so the
  path where no `HumanMessage` falls in the window and the history is replaced by
  "Previous conversation was too long to summarize." is reached (langchain#39261).
- Your own middleware: `adapter_spec(make)` wraps the `SummarizationMiddleware` (or
  subclass) that `make(model)` configures around the profile's fake model, for
  `jfsm profile --adapter yourmodule:spec` (see `docs/safety/adapters.md`).
"""

from __future__ import annotations

from collections.abc import Callable
from functools import partial
from importlib import metadata
from typing import Any

from langchain.agents.middleware import SummarizationMiddleware
from langchain_core.language_models.chat_models import BaseChatModel
from langchain_core.messages import AIMessage, HumanMessage
from langchain_core.outputs import ChatGeneration, ChatResult
from langgraph.graph.message import add_messages

from jfsm_conformance.profile import AdapterSpec, ObservedStorage, Scope, ScriptedSummarizer

__all__ = [
    "ProfileChatModel",
    "adapter",
    "adapter_spec",
    "confirm_end_to_end",
    "profile_chat_model",
    "scope",
    "sync_adapter",
    "trim_adapter",
]

TRIM_TOKENS = 14  # the `trim` variant's trim_tokens_to_summarize


def scope(variant: str = "async", config: str = "") -> Scope:
    hook = "before_model" if variant == "sync" else "abefore_model"
    if not config:
        config = "trigger=('messages', 4), keep=('messages', 2)"
        if variant == "trim":
            config += f", trim_tokens_to_summarize={TRIM_TOKENS}"
    return Scope(
        library="langchain",
        version=metadata.version("langchain"),
        entry_point=f"SummarizationMiddleware.{hook} + langgraph add_messages",
        writers="single",
        failures=frozenset({"raise", "timeout", "empty"}),
        storage="native",
        hold=variant != "sync",
        notes=(config, "retry back-off sleeps switched off (attempts unchanged)"),
    )


def _text(content: Any) -> str:
    if isinstance(content, str):
        return content
    if isinstance(content, list):
        return "".join(
            part if isinstance(part, str) else str(part.get("text", "")) for part in content
        )
    return str(content)


class ProfileChatModel(BaseChatModel):
    """A `BaseChatModel` whose replies are the scripted summarizer's (see the module docs)."""

    summarizer: Any = None

    @property
    def _llm_type(self) -> str:
        return "jfsm-profile-fake"

    def _generate(self, messages: Any, stop: Any = None, run_manager: Any = None, **kw: Any) -> Any:
        reply = self.summarizer.summarize_sync("\n".join(_text(m.content) for m in messages))
        return ChatResult(generations=[ChatGeneration(message=AIMessage(content=reply))])

    async def _agenerate(
        self, messages: Any, stop: Any = None, run_manager: Any = None, **kw: Any
    ) -> Any:
        reply = await self.summarizer.summarize("\n".join(_text(m.content) for m in messages))
        return ChatResult(generations=[ChatGeneration(message=AIMessage(content=reply))])


def profile_chat_model(summarizer: ScriptedSummarizer) -> ProfileChatModel:
    """A `BaseChatModel` answering with `summarizer` (see the module docs)."""
    return ProfileChatModel(summarizer=summarizer)


def _no_backoff(middleware: Any) -> None:
    retry = getattr(middleware, "_summary_model", None)
    if retry is not None and hasattr(retry, "wait_exponential_jitter"):
        object.__setattr__(retry, "wait_exponential_jitter", False)


def _default_middleware(variant: str) -> Callable[[Any], Any]:
    def make(model: Any) -> Any:
        extra = {"trim_tokens_to_summarize": TRIM_TOKENS} if variant == "trim" else {}
        return SummarizationMiddleware(
            model=model, trigger=("messages", 4), keep=("messages", 2), **extra
        )

    return make


class LangChainAdapter:
    def __init__(
        self,
        summarizer: ScriptedSummarizer,
        variant: str = "async",
        make: Callable[[Any], Any] | None = None,
        declared: Scope | None = None,
    ) -> None:
        self.scope = declared or scope(variant)
        self.variant = variant
        self.middleware: Any = (make or _default_middleware(variant))(
            profile_chat_model(summarizer)
        )
        _no_backoff(self.middleware)
        self.messages: list[Any] = []
        self.observed = ObservedStorage()

    def _apply(self, update: list[Any]) -> None:
        self.messages = list(add_messages(self.messages, update))
        self.observed.record([_text(m.content) for m in self.messages])

    async def append(self, user: str, assistant: str) -> None:
        self._apply([HumanMessage(content=user), AIMessage(content=assistant)])

    async def compact(self) -> None:
        state = {"messages": list(self.messages)}
        if self.variant == "sync":
            update = self.middleware.before_model(state, None)
        else:
            update = await self.middleware.abefore_model(state, None)
        if update and "messages" in update:
            self._apply(update["messages"])

    async def read(self) -> list[str]:
        return [_text(m.content) for m in self.messages]

    def observed_states(self) -> list[list[str]]:
        return self.observed.take()

    def fail_next_write(self, armed: bool = True) -> None:
        return None  # not in scope: the checkpointer writes a node's update atomically

    async def close(self) -> None:
        return None


def adapter_spec(
    make: Callable[[Any], Any], *, sync: bool = False, config: str = "your middleware"
) -> AdapterSpec:
    """An `AdapterSpec` for your own configured `SummarizationMiddleware` (or subclass):
    `make(model)` builds it around `model`, the profile's fake chat model (use it as the
    summary model). `sync=True` drives `before_model` instead of `abefore_model` (no hold).
    `config` goes into the report's scope notes."""
    variant = "sync" if sync else "async"
    declared = scope(variant, config)
    return AdapterSpec(
        factory=lambda summarizer: LangChainAdapter(summarizer, variant, make, declared),
        scope=declared,
    )


def confirm_end_to_end(outcome: str = "empty") -> dict[str, Any]:
    """Confirm a finding through LangChain's normal entry point: `create_agent` with the
    middleware and an `InMemorySaver` checkpointer, three turns on one thread, the summary
    model answering with the scripted `outcome` from the third turn on. Returns the thread's
    messages after the last turn and which of the first turns' texts are gone."""
    from langchain.agents import create_agent
    from langchain_core.language_models.fake_chat_models import GenericFakeChatModel
    from langgraph.checkpoint.memory import InMemorySaver

    summarizer = ScriptedSummarizer()
    replies = iter([AIMessage(content=f"#m{n} reply {n}") for n in (2, 4, 6, 8)])
    middleware = SummarizationMiddleware(
        model=profile_chat_model(summarizer), trigger=("messages", 4), keep=("messages", 2)
    )
    _no_backoff(middleware)
    agent = create_agent(
        model=GenericFakeChatModel(messages=replies),
        middleware=[middleware],
        checkpointer=InMemorySaver(),
    )
    config: Any = {"configurable": {"thread_id": "profile"}}
    error = None
    for n, text in enumerate(("#m1 hello", "#m3 and more", "#m5 the third turn"), start=1):
        summarizer.script(outcome if n == 3 else "ok")
        try:
            agent.invoke({"messages": [{"role": "user", "content": text}]}, config)
        except Exception as exc:
            error = f"{type(exc).__name__}: {exc}"
    messages = [_text(m.content) for m in agent.get_state(config).values["messages"]]
    early = ["#m1 hello", "#m2 reply 2", "#m3 and more", "#m4 reply 4"]
    covered = {m for call in summarizer.summaries.values() for m in call.inputs}
    gone = [
        t
        for t in early
        if t not in messages
        and not any(
            c.reply and c.reply in " ".join(messages) for c in summarizer.summaries.values()
        )
    ]
    return {
        "outcome": outcome,
        "messages": messages,
        "gone": gone,
        "summarized_before": sorted(covered),
        "error": error,
        "summarizer": dict(summarizer.counts),
    }


def _variant(variant: str) -> AdapterSpec:
    return AdapterSpec(factory=partial(LangChainAdapter, variant=variant), scope=scope(variant))


adapter = _variant("async")
sync_adapter = _variant("sync")
trim_adapter = _variant("trim")
