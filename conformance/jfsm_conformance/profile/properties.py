"""The properties of the compaction safety profile, one per requirement ID (area SAFE).

Each property is one named check with the requirement ID it decides and what it needs from
an adapter's declared scope to be applicable: an outcome the provider can produce (`raise`,
`timeout`, `empty`, `write_fail`), several writers (`multi`), hold/release hooks
(`hold`), or a state during a compaction it can show (`observe`: storage it observes, or a
call it can hold; decision R200). A property whose needs are not declared is *not
applicable*, never failed: the profile does not blame a library for a situation it does not
claim to handle.
"""

from __future__ import annotations

from dataclasses import dataclass

__all__ = ["PROPERTIES", "Property", "by_id"]


@dataclass(frozen=True, slots=True)
class Property:
    """One check: requirement `id`, check `name`, short `title`, scope `needs`."""

    id: str
    name: str
    title: str
    needs: frozenset[str] = frozenset()


PROPERTIES: tuple[Property, ...] = (
    Property("JF-SAFE-001", "nothing-lost", "every appended message stays, verbatim or summarized"),
    Property(
        "JF-SAFE-002",
        "raise-loses-nothing",
        "a raising summarizer leaves the history as it was",
        frozenset({"raise"}),
    ),
    Property(
        "JF-SAFE-003",
        "timeout-loses-nothing",
        "a timed-out summarizer leaves the history as it was",
        frozenset({"timeout"}),
    ),
    Property(
        "JF-SAFE-004",
        "empty-loses-nothing",
        "an empty summary leaves the history as it was",
        frozenset({"empty"}),
    ),
    Property(
        "JF-SAFE-005", "summary-is-summarizer-text", "only the summarizer's reply is published"
    ),
    Property("JF-SAFE-006", "replaces-no-more", "a summary replaces no more than it summarizes"),
    Property("JF-SAFE-007", "replaces-no-fewer", "a summary replaces no fewer than it summarizes"),
    Property("JF-SAFE-008", "order-kept", "kept messages stay in append order"),
    Property(
        "JF-SAFE-009",
        "appends-in-flight-kept",
        "messages appended while a compaction awaits the summarizer are kept",
        frozenset({"multi", "hold"}),
    ),
    Property(
        "JF-SAFE-010",
        "failed-write-leaves-history",
        "a failed replacement write leaves the history as it was",
        frozenset({"write_fail"}),
    ),
    Property(
        "JF-SAFE-011",
        "no-bare-intermediate-state",
        "no observable state lacks both a message and its summary",
        frozenset({"observe"}),
    ),
    Property("JF-SAFE-012", "no-growth", "a compaction does not grow the history"),
    Property(
        "JF-SAFE-013", "settles", "no summarizer call without a verbatim message to summarize"
    ),
    Property("JF-SAFE-014", "summaries-kept", "a published summary stays until summarized"),
)

_BY_ID = {p.id: p for p in PROPERTIES}


def by_id(rid: str) -> Property:
    """The property of requirement `rid`; `KeyError` if the profile has none."""
    return _BY_ID[rid]
