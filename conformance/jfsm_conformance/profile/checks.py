"""The profile's checks, pure: what a memory view says about the messages and summaries.

A *view* is what `Adapter.read()` returned (or a storage state): a list of texts. Each text
is one of the profile's messages verbatim, an entry holding one of the summarizer's replies
(a library may wrap it: "Here is a summary...: #s3 ..."), or something else (an error text,
an empty summary). A message *holds* in a view when it is there verbatim or covered by a
summary there; a summary covers its call's inputs, transitively through earlier summaries.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field

from .summarizer import MARKER, Call

__all__ = ["View", "analyze", "intact", "missing"]


@dataclass
class View:
    """A view analysed: verbatim markers, summaries found, unknown entries, coverage."""

    entries: list[str]
    verbatim: list[str] = field(default_factory=list)
    summaries: list[str] = field(default_factory=list)
    unknown: list[str] = field(default_factory=list)
    covered: set[str] = field(default_factory=set)

    def holds(self, marker: str) -> bool:
        return marker in self.covered or marker in self.verbatim or marker in self.summaries


def analyze(entries: list[str], texts: Mapping[str, str], summaries: Mapping[str, Call]) -> View:
    """Classify each entry of a view (see the module docs)."""
    by_text = {text: marker for marker, text in texts.items()}
    view = View(list(entries))
    for entry in entries:
        marker = by_text.get(entry)
        if marker is not None:
            view.verbatim.append(marker)
            continue
        found = [
            m.group(1) + m.group(2)
            for m in MARKER.finditer(entry)
            if m.group(1) == "s"
            and (m.group(1) + m.group(2)) in summaries
            and (summaries[m.group(1) + m.group(2)].reply or "\0") in entry
        ]
        if found:
            view.summaries += found
        else:
            view.unknown.append(entry)
    pending = list(view.summaries)
    while pending:
        key = pending.pop()
        for marker in summaries[key].inputs:
            if marker not in view.covered:
                view.covered.add(marker)
                if marker in summaries:
                    pending.append(marker)
    return view


def missing(view: View, markers: Iterable[str]) -> list[str]:
    """The markers that do not hold in `view`, in the given order."""
    return [m for m in markers if not view.holds(m)]


def intact(before: list[str], after: list[str], allowed_new: Iterable[str]) -> str | None:
    """`None` if `after` is `before` plus only entries from `allowed_new`; else what differs."""
    have = Counter(after)
    lost = []
    for entry in before:
        if have[entry] > 0:
            have[entry] -= 1
        else:
            lost.append(entry)
    extra = list((Counter(after) - Counter(before)).elements())
    allowed = set(allowed_new)
    unexpected = [e for e in extra if e not in allowed]
    if not lost and not unexpected:
        return None
    parts = []
    if lost:
        parts.append(f"entries gone: {_brief(lost)}")
    if unexpected:
        parts.append(f"entries added: {_brief(unexpected)}")
    return "; ".join(parts)


def _brief(entries: list[str], limit: int = 6) -> str:
    shown = [e if len(e) <= 70 else e[:67] + "..." for e in entries[:limit]]
    more = f" (+{len(entries) - limit} more)" if len(entries) > limit else ""
    return repr(shown) + more
