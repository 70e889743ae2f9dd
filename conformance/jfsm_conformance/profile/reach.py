"""Whether a search reached what it judges: the run's own requirements, JF-SAFE-020 and -021.

A property that passes says something only if the search got where it is checked. Two
checks of the whole search, after its verdicts (decision R200):

- **JF-SAFE-020, the summarizer is reached.** Where a property that is decided only on a
  compaction that called the summarizer applies (`NEEDS_A_CALL`), at least one compaction of
  the search must have reached the scripted summarizer. An adapter whose `compact()` forgets
  an `await` reaches nothing: every such property would be *not exercised*, the rest pass on
  a memory that never changed. The message says how many compactions were asked and, when
  the capture saw them, which coroutines were never awaited (decision R201).
- **JF-SAFE-021, what applies is exercised.** At most `allowed` applicable properties may
  end *not exercised* (0 unless `--allow-not-exercised N`); a property the run did not select
  is not counted. Not judged when JF-SAFE-020 failed: the same defect, one ID.

A harness error judges neither (exit 2 says more). Each check is a row like a property's:
`id`, `title`, `verdict` (`pass`, `fail`, `not applicable`, `not judged`) and `message`.
"""

from __future__ import annotations

from collections.abc import Mapping, Set
from typing import Any

__all__ = ["NEEDS_A_CALL", "REACH_IDS", "judge_reach"]

REACH_IDS = ("JF-SAFE-020", "JF-SAFE-021")
TITLES = {
    "JF-SAFE-020": "the summarizer is reached",
    "JF-SAFE-021": "every applicable property is exercised",
}

#: the properties decided only on a compaction whose summarizer call was made
NEEDS_A_CALL = frozenset(
    {
        "JF-SAFE-002",
        "JF-SAFE-003",
        "JF-SAFE-004",
        "JF-SAFE-006",
        "JF-SAFE-007",
        "JF-SAFE-009",
        "JF-SAFE-010",
        "JF-SAFE-012",
        "JF-SAFE-013",
    }
)


def judge_reach(
    verdicts: list[dict[str, Any]],
    *,
    reached: Mapping[str, int],
    requested: Mapping[str, int],
    unawaited: Mapping[str, int],
    allowed: int = 0,
    harness_error: str | None = None,
    stopped_early: bool = False,
    selected: Set[str] | None = None,
) -> list[dict[str, Any]]:
    """The rows of JF-SAFE-020 and -021 for one search (see the module docs)."""
    if harness_error or stopped_early:
        why = "the search stopped early (harness error or first failure)"
        return [_row(rid, "not judged", why) for rid in REACH_IDS]
    applicable = {v["id"] for v in verdicts if v["verdict"] not in ("not applicable",)}
    if selected is not None:
        applicable &= set(selected)
    rows = []
    calls = sum(reached.values())
    if not applicable & NEEDS_A_CALL:
        first = _row("JF-SAFE-020", "not applicable", "no property that needs a summarizer call")
    elif calls:
        first = _row("JF-SAFE-020", "pass", f"the summarizer was reached {calls}x")
    else:
        asked = sum(n for k, n in requested.items() if "→" not in k)
        message = (
            f"the adapter never reached the summarizer: {asked} compactions asked, none called it"
        )
        if unawaited:
            names = ", ".join(f"{name} ({n}x)" for name, n in sorted(unawaited.items()))
            message += f"; coroutines never awaited: {names} (an await missing in compact()?)"
        first = _row("JF-SAFE-020", "fail", message)
    rows.append(first)
    if first["verdict"] == "fail":
        rows.append(_row("JF-SAFE-021", "not judged", "JF-SAFE-020 failed: the same defect"))
        return rows
    idle = [
        v["id"]
        for v in verdicts
        if v["verdict"] == "not exercised" and (selected is None or v["id"] in selected)
    ]
    if len(idle) > allowed:
        message = (
            f"{len(idle)} applicable properties were never exercised ({', '.join(idle)}), "
            f"more than the {allowed} allowed"
        )
        rows.append(_row("JF-SAFE-021", "fail", message))
    else:
        rows.append(_row("JF-SAFE-021", "pass", f"{len(idle)} not exercised, {allowed} allowed"))
    return rows


def _row(rid: str, verdict: str, message: str) -> dict[str, Any]:
    return {"id": rid, "title": TITLES[rid], "verdict": verdict, "message": message}
