"""The seam to compress.v2: request and result types and the `Compressor` protocol.

The workflow owns stack shape, canonical text, thresholds and publication; a compressor only
carries one request to compress.v2 and reports what came back (decisions D16 to D18). It
never chooses payers, models or prompts. Beneficiaries are read from a participants source
*immediately before each attempt*, retries included.

The compression modules, one idea each: this seam; `jfsm.compression`, the judge of a reply
and the flight of one compression (the engine's); `jfsm.transport`, the HTTP executor;
`jfsm.testing`, an in-process fake for tests and demos. The conformance suite has its
own HTTP fake (`jfsm_conformance.fake.compress`, whose behaviour is one `answer` function) and the
one vocabulary that scripts both fakes (`jfsm_conformance.model.replies`).

A compressor never raises for a failed call: it returns a `CompressionResult` whose
`outcome` is `ok`, `refused` or `transport`, with one `Attempt` per HTTP attempt. The engine
then validates an ok summary (empty, not smaller) and checks staleness.
"""

from __future__ import annotations

import hashlib
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Literal, Protocol

from jfsm.errors import InvalidInput
from jfsm.jcs import canonicalize
from jfsm.records import Participant

__all__ = [
    "Attempt",
    "CompressionRequest",
    "CompressionResult",
    "Compressor",
    "ParticipantSource",
    "beneficiaries",
    "check_thresholds",
    "idempotency_key",
]

ParticipantSource = Callable[[], Sequence[Participant]]
AttemptOutcome = Literal["ok", "refused", "transport"]


def beneficiaries(participants: Iterable[Participant]) -> list[str]:
    """Ids of the participants who are human and not spectators, sorted (D17)."""
    return sorted({p.id for p in participants if p.human and not p.spectator})


def check_thresholds(thresholds: Mapping[str, object] | None) -> None:
    """Check threshold overrides (decision R9): keys `game` and `catalyst`, each value a
    positive integer of canonical characters. Raises `InvalidInput` otherwise (JF-STORE-027)."""
    if thresholds is None:
        return
    if not isinstance(thresholds, Mapping):
        raise InvalidInput(f"thresholds must be a mapping, not {type(thresholds).__name__}")
    for name, value in thresholds.items():
        if name not in ("game", "catalyst"):
            raise InvalidInput(f"unknown threshold {name!r} (game or catalyst)", field=str(name))
        if type(value) is not int or value <= 0:
            raise InvalidInput(
                f"threshold {name} must be a positive integer, not {value!r}", field=name
            )


def idempotency_key(
    game_id: str,
    catalyst_id: str | None,
    epoch: int,
    through_seq: int,
    text: str,
    retry: int = 0,
) -> str:
    """The deterministic `Idempotency-Key` of one ask of a logical compression (D16).

    SHA-256 over the JCS of `[gameId, catalystId, epoch, throughSeq, sha256(text), retry]`,
    hex; `retry` counts the completed replies that ended the same logical compression
    without publishing (see `spec/compress-v2.json`).
    """
    text_hash = hashlib.sha256(text.encode("utf-8")).hexdigest()
    material = canonicalize([game_id, catalyst_id, epoch, through_seq, text_hash, retry])
    return "jfsm-" + hashlib.sha256(material.encode("utf-8")).hexdigest()


@dataclass(frozen=True, slots=True)
class CompressionRequest:
    """One logical compression: the represented prefix of one stack at one epoch."""

    kind: str
    game_id: str
    catalyst_id: str | None
    text: str
    chars: int
    through_seq: int
    epoch: int
    retry: int = 0

    @property
    def idempotency_key(self) -> str:
        return idempotency_key(
            self.game_id, self.catalyst_id, self.epoch, self.through_seq, self.text, self.retry
        )

    def scope(self) -> dict[str, str]:
        """The wire `scope` object."""
        out = {"gameId": self.game_id}
        if self.catalyst_id is not None:
            out["catalystId"] = self.catalyst_id
        return out

    def body(self, beneficiary_ids: Sequence[str]) -> dict[str, Any]:
        """The closed JSON body of `POST /v2/compress` (no payer, model or provider)."""
        return {
            "kind": self.kind,
            "scope": self.scope(),
            "input": {"text": self.text, "chars": self.chars, "throughSeq": self.through_seq},
            "beneficiaries": list(beneficiary_ids),
        }


@dataclass(frozen=True, slots=True)
class Attempt:
    """One HTTP attempt, as telemetry records it: sizes and codes, never text."""

    number: int
    outcome: AttemptOutcome
    call_id: str | None
    duration_ms: float
    output_chars: int | None = None
    detail: str | None = None


@dataclass(frozen=True, slots=True)
class CompressionResult:
    """What came back from compress.v2 after all attempts.

    `summary` is set only when `outcome == "ok"`; `error_code` names the refusal or the
    transport failure (`connect`, `timeout`, `http_500`, `malformed`...).
    """

    outcome: AttemptOutcome
    attempts: tuple[Attempt, ...]
    call_id: str | None = None
    summary: str | None = None
    error_code: str | None = None


class Compressor(Protocol):
    """Carries one compression request to compress.v2."""

    async def compress(
        self, request: CompressionRequest, participants: ParticipantSource
    ) -> CompressionResult:
        """Send `request`; never raises for a failed call (see `CompressionResult`)."""
        ...
