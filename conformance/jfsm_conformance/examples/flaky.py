"""Nondeterministic drivers: they misbehave once, so a replay of the failing sequence differs.

```
jfsm conformance --driver python:jfsm_conformance.examples.flaky:glitch_once
```

- `glitch_once`: the first `record_round` of the process answers a wrong `seq`; every later
  call is right, so Hypothesis's replay of the failing sequence passes. The suite must
  report the original failure (JF-STORE-004) with its own trace, and a separate
  NONDETERMINISTIC-IMPLEMENTATION failure; exit 1, never 2.
- `glitch_then_noise`: as `glitch_once`, and from then on every `telemetry` reply carries
  one stray event, so the replay fails another check (JF-CALL-011). The original failure
  (JF-STORE-004) is still the one reported first.
- `glitch_then_other`: as `glitch_once`, and from then on `record_round` stores a changed
  output, so the replay fails the same step with another check (the store comparison).
  Still the original failure is reported, with a note naming the replay's.
"""

from __future__ import annotations

from typing import Any

from jfsm_conformance.examples.broken import BrokenDriver

__all__ = ["glitch_once", "glitch_then_noise", "glitch_then_other"]


class _GlitchOnce(BrokenDriver):
    noise = False

    def __init__(self) -> None:
        super().__init__()
        self.glitched = False

    other = False

    async def bend_record_round(self, message: dict[str, Any]) -> dict[str, Any]:
        if self.other and self.glitched:
            args = dict(message["args"])
            args["output"] = str(args.get("output", "")) + "!"
            return await self.inner.handle({**message, "args": args})
        reply = await self.inner.handle(message)
        if reply.get("ok") and not self.glitched:
            self.glitched = True
            reply["result"] = {**reply["result"], "seq": reply["result"]["seq"] + 7}
        return reply

    async def bend_telemetry(self, message: dict[str, Any]) -> dict[str, Any]:
        reply = await self.inner.handle(message)
        if self.noise and self.glitched and reply.get("ok"):
            stray = {
                "event": "compression_attempt",
                "callId": None,
                "idempotencyKey": "stray",
                "kind": "paxhistoria.game-agent-stack.v1",
                "scope": {"gameId": message["args"]["game"]},
                "attempt": 1,
                "outcome": "transport",
                "inputChars": 1,
                "throughSeq": 1,
                "outputChars": None,
                "durationMs": 0,
            }
            reply["result"] = [*reply["result"], stray]
        return reply


class _GlitchThenNoise(_GlitchOnce):
    noise = True


class _GlitchThenOther(_GlitchOnce):
    other = True


def glitch_once() -> BrokenDriver:
    return _GlitchOnce()


def glitch_then_noise() -> BrokenDriver:
    return _GlitchThenNoise()


def glitch_then_other() -> BrokenDriver:
    return _GlitchThenOther()
