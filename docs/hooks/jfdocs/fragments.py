"""Generated fragments inside hand-written pages (pure).

A hand-written page includes a fragment with a line holding only `<!-- jfsm:NAME -->`; the
hook replaces it at build time. An unknown NAME raises `KeyError`, failing the build.
"""

from __future__ import annotations

import json
import re
from collections.abc import Callable
from pathlib import Path

from jfdocs.render import table
from jfdocs.spec_pages import BCP14, load_requirements

__all__ = ["FRAGMENTS", "expand_fragments"]

_MARKER = re.compile(r"^<!-- jfsm:([a-z0-9-]+) -->$", re.M)


def _constants(spec: Path) -> str:
    c = json.loads((spec / "constants.json").read_text(encoding="utf-8"))
    rows = [
        ["Spec version", f"`{c['spec_version']}`"],
        ["Game stack threshold", f"{c['thresholds']['game']:,} code points"],
        ["Catalyst stack threshold", f"{c['thresholds']['catalyst']:,} code points"],
        ["Quota", f"{c['quota_bytes']:,} bytes ({c['quota_bytes'] / 1048576:g} MiB)"],
        ["Game kind", f"`{c['kinds']['game']}`"],
        ["Catalyst kind", f"`{c['kinds']['catalyst']}`"],
        [
            "Envelopes",
            f"summary {c['envelopes']['summary']}, exchange "
            f"{c['envelopes']['exchange']} code points",
        ],
        ["Failure outcomes", ", ".join(f"`{o}`" for o in c["failure_outcomes"])],
        ["Error codes", ", ".join(f"`{o}`" for o in c["error_codes"])],
        ["Chunk origins", ", ".join(f"`{o}`" for o in c["chunk_origins"])],
        ["Reserved key prefix", f"`{c['reserved_key_prefix']}`"],
    ]
    return table(["Constant (`spec/constants.json`)", "Value"], rows)


def _counts(spec: Path) -> str:
    reqs = load_requirements(spec)["requirement"]
    machines = sorted(p.stem for p in (spec / "machines").glob("*.json"))
    vectors = sorted(p.name for p in (spec / "vectors").glob("*.json"))
    return (
        f"The specification (version `{load_requirements(spec)['spec_version']}`) holds "
        f"{len(reqs)} requirements, {len(machines)} state machines and {len(vectors)} "
        "files of test vectors.\n"
    )


FRAGMENTS: dict[str, Callable[[Path], str]] = {
    "constants": _constants,
    "bcp14": lambda spec: BCP14 + "\n",
    "counts": _counts,
}


def expand_fragments(markdown: str, spec: Path) -> str:
    """Replace every fragment marker line of `markdown`."""
    return _MARKER.sub(lambda m: FRAGMENTS[m.group(1)](spec), markdown)
