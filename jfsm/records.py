"""The stored records of agent memory (decision D8), as frozen pydantic models.

Field names on the wire and in the store are camelCase (`nextSeq`, `throughSeq`...). Texts
are validated as Unicode scalar strings; a bad record raises `InvalidInput`.
"""

from __future__ import annotations

from typing import Any, Literal, Self, TypeVar

from pydantic import BaseModel, ConfigDict, Field, ValidationError, field_validator
from pydantic.alias_generators import to_camel

from jfsm.errors import InvalidInput
from jfsm.jcs import canonical_bytes, key_order, string_bytes
from jfsm.text import require_text

__all__ = [
    "ArchiveRecord",
    "Chunk",
    "Participant",
    "Record",
    "Round",
    "SceneMeta",
    "StackMeta",
    "Summary",
    "parse_record",
]


class Record(BaseModel):
    """A stored record: frozen, strict, camelCase on the wire."""

    model_config = ConfigDict(
        frozen=True,
        extra="forbid",
        alias_generator=to_camel,
        populate_by_name=True,
        strict=True,
    )

    def to_json(self) -> dict[str, Any]:
        """The record as stored: camelCase keys, absent optionals omitted."""
        return self.model_dump(mode="json", by_alias=True, exclude_none=True)

    def jcs(self) -> bytes:
        """The record's canonical JCS bytes, built straight from its fields (equal to
        `canonical_bytes(self.to_json())`, without the intermediate dict)."""
        parts = []
        for name, head in _layout(type(self)):
            value = getattr(self, name)
            if value is None:
                continue
            if value is True or value is False:
                parts.append(head + (b"true" if value else b"false"))
            elif isinstance(value, str):
                parts.append(head + string_bytes(value))
            else:
                parts.append(head + canonical_bytes(value))
        return b"{" + b",".join(parts) + b"}"

    @classmethod
    def trusted(cls, **fields: Any) -> Self:
        """Build a record from fields the caller has already validated, without validating
        them again (the engine checks each text once, where it enters: decision R34).
        Anything else must go through the constructor or `parse_record`."""
        return cls.model_construct(**fields)


def _text(value: Any, info: Any) -> Any:
    return require_text(value, info.field_name)


class Chunk(Record):
    """One exact exchange of a stack, numbered by a `seq` never reused in that stack."""

    seq: int = Field(ge=1)
    user: str
    assistant: str
    origin: Literal["round", "catalyst", "intervene", "seed"]
    round_id: int | None = Field(default=None, ge=1)
    catalyst_id: str | None = None

    _texts = field_validator("user", "assistant", mode="before")(_text)


class Summary(Record):
    """The one summary of a stack: it represents every chunk with `seq <= through_seq`."""

    text: str
    through_seq: int = Field(ge=1)
    compression_call_id: str
    kind: str

    _texts = field_validator("text", mode="before")(_text)


class StackMeta(Record):
    """Bookkeeping of the game stack (`jfGameStack.meta`)."""

    next_seq: int = Field(default=1, ge=1)
    epoch: int = Field(default=0, ge=0)
    forced_compression: bool = False


class SceneMeta(Record):
    """Bookkeeping of a running scene's stack (`jfCatalystStack.<id>.meta`)."""

    next_seq: int = Field(default=1, ge=1)
    epoch: int = Field(default=0, ge=0)
    state: Literal["created", "running"] = "created"


class ArchiveRecord(Record):
    """What survives of a scene after its stack is removed (`jfCatalystArchives[<id>]`).

    `after_round` is the number of canonical rounds recorded when the scene ended;
    `outcome_seq` is the game chunk that carries a published outcome.
    """

    state: Literal["published", "cancelled"]
    after_round: int = Field(ge=0)
    closing_summary: str | None = None
    meanwhile_event: str | None = None
    outcome_seq: int | None = Field(default=None, ge=1)
    order: int = Field(ge=1)

    _texts = field_validator("closing_summary", "meanwhile_event", mode="before")(
        lambda v, info: None if v is None else _text(v, info)
    )


class Round(Record):
    """One canonical game round (`jfRounds.<n>`): kept outside AI memory.

    An intervened round stores only the revealed prefix as its output.
    """

    n: int = Field(ge=1)
    input: str
    output: str
    intervened: bool = False

    _texts = field_validator("input", "output", mode="before")(_text)


class Participant(Record):
    """A game participant, as the executor sees it when choosing beneficiaries."""

    id: str
    human: bool
    spectator: bool = False

    _texts = field_validator("id", mode="before")(_text)


_LAYOUTS: dict[type[Record], tuple[tuple[str, bytes], ...]] = {}


def _layout(model: type[Record]) -> tuple[tuple[str, bytes], ...]:
    """(field name, `"alias":` bytes) of a record class, in JCS member order."""
    layout = _LAYOUTS.get(model)
    if layout is None:
        fields = [(name, info.alias or name) for name, info in model.model_fields.items()]
        fields.sort(key=lambda item: key_order(item[1]))
        layout = tuple((name, string_bytes(alias) + b":") for name, alias in fields)
        _LAYOUTS[model] = layout
    return layout


R = TypeVar("R", bound=Record)


def parse_record(model: type[R], data: Any) -> R:
    """Validate `data` as `model`; raise `InvalidInput` with pydantic's reasons."""
    try:
        return model.model_validate(data)
    except ValidationError as exc:
        cause = exc.errors(include_url=False)
        inner = [e.get("ctx", {}).get("error") for e in cause]
        for err in inner:
            if isinstance(err, InvalidInput):
                raise InvalidInput(err.message, **err.details) from exc
        raise InvalidInput(f"invalid {model.__name__}: {exc}", model=model.__name__) from exc
