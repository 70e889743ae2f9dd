"""Generated fragments inside hand-written pages (pure).

A hand-written page includes a generated block with a line holding only `<!-- jfsm:NAME -->`,
and a generated value inside a sentence with the same marker inline; the hook replaces both
at build time (`expand_fragments`). An unknown NAME raises `KeyError` and a block marker that
does not stand alone on its line raises `ValueError`, failing the build.
"""

from __future__ import annotations

import re
from collections.abc import Callable

from jfdocs import reference_pages
from jfdocs.render import cell, table
from jfdocs.spec_pages import BCP14
from jfsm.spec import constants, load_json, requirements, spec_dir

__all__ = ["FRAGMENTS", "expand_fragments"]

_MARKER = re.compile(r"<!-- jfsm:([a-z0-9-]+) -->")


def _constants() -> str:
    c = constants()
    rows = [
        ["Spec version", f"`{c.spec_version}`"],
        ["Game stack threshold", f"{c.game_threshold:,} code points"],
        ["Catalyst stack threshold", f"{c.catalyst_threshold:,} code points"],
        ["Quota", f"{c.quota_bytes:,} bytes ({c.quota_bytes / 1048576:g} MiB)"],
        ["Game kind", f"`{c.game_kind}`"],
        ["Catalyst kind", f"`{c.catalyst_kind}`"],
        [
            "Envelopes",
            f"summary {c.summary_envelope}, exchange {c.exchange_envelope} code points",
        ],
        ["Failure outcomes", ", ".join(f"`{o}`" for o in c.failure_outcomes)],
        ["Error codes", ", ".join(f"`{o}`" for o in c.error_codes)],
        ["Chunk origins", ", ".join(f"`{o}`" for o in c.chunk_origins)],
        ["Reserved key prefix", f"`{c.reserved_key_prefix}`"],
        ["Attempts per compression call", str(c.max_attempts)],
    ]
    rows += [[f"Limit `{name}`", cell(str(value))] for name, value in c.limits.items()]
    return table(["Constant (`spec/constants.json`)", "Value"], rows)


def _counts() -> str:
    spec = spec_dir()
    machines = sorted(p.stem for p in (spec / "machines").glob("*.json"))
    vectors = sorted(p.name for p in (spec / "vectors").glob("*.json"))
    return (
        f"The specification (version `{constants().spec_version}`) holds "
        f"{len(requirements())} requirements, {len(machines)} state machines and "
        f"{len(vectors)} files of test vectors.\n"
    )


# The API pages under docs/api/ and the module each renders (keep in step with the nav).
API_PAGES = {
    "jfsm.engine": "engine.md",
    "jfsm.sync": "sync.md",
    "jfsm.errors": "errors.md",
    "jfsm.stores": "stores.md",
    "jfsm.transport": "transport.md",
    "jfsm.compressor": "compressor.md",
}


def _public_api() -> str:
    """The names of `jfsm.__all__`: a table linking each to the page that documents it, then
    a mkdocstrings block for the names no module page covers."""
    import importlib
    import inspect

    import jfsm

    rows = []
    here = []
    for name in jfsm.__all__:
        if name.startswith("__"):
            continue
        obj = getattr(jfsm, name)
        doc = (inspect.getdoc(obj) or "").split("\n\n")[0].replace("\n", " ")
        target = None
        for module, page in API_PAGES.items():
            if name in getattr(importlib.import_module(module), "__all__", ()):
                target = f"{page}#{module}.{name}"
                break
        if target is None:
            here.append(name)
            target = f"#jfsm.{name}"
        kind = "class" if inspect.isclass(obj) else "function"
        rows.append([f"[`{name}`]({target})", kind, cell(doc)])
    out = table(["Name", "Kind", "Summary"], rows)
    if here:
        out += "\n## Also exported here\n\n"
        out += "::: jfsm\n    options:\n      show_root_heading: false\n"
        out += "      heading_level: 3\n      members:\n"
        out += "".join(f"        - {name}\n" for name in here)
    return out


def _safety_matrix() -> str:
    """The safety matrix picture of the results page, from `docs/safety/results.json`."""
    import json
    from pathlib import Path

    from jfdocs.safety_matrix import matrix_html

    path = Path(__file__).resolve().parents[2] / "safety" / "results.json"
    titles = {r["id"]: r["title"] for r in requirements() if r["area"] == "SAFE"}
    return matrix_html(json.loads(path.read_text(encoding="utf-8")), titles)


def _store_ownership_diagram() -> str:
    """The ownership machine's diagram, for the deploying guide."""
    from jfdocs.diagrams import mermaid_state_diagram

    data = load_json("machines/store_ownership.json")
    return "```mermaid\n" + mermaid_state_diagram(data) + "```\n"


FRAGMENTS: dict[str, Callable[[], str]] = {
    "public-api": _public_api,
    "constants": _constants,
    "bcp14": lambda: BCP14 + "\n",
    "counts": _counts,
    "store-ownership-diagram": _store_ownership_diagram,
    "safety-matrix": _safety_matrix,
    **reference_pages.FRAGMENTS,
}
"""Block fragments: each marker stands alone on its line."""

VALUES: dict[str, Callable[[], str]] = dict(reference_pages.VALUES)
"""Inline values: a marker inside a sentence."""


def _expand(match: re.Match[str]) -> str:
    name = match.group(1)
    if name in VALUES:
        return VALUES[name]()
    text = match.string
    start = text.rfind("\n", 0, match.start()) + 1
    end = text.find("\n", match.end())
    if text[start : match.start()].strip() or text[match.end() : None if end < 0 else end].strip():
        raise ValueError(f"block fragment <!-- jfsm:{name} --> must stand alone on its line")
    return FRAGMENTS[name]()


def expand_fragments(markdown: str) -> str:
    """Replace every fragment marker of `markdown` (blocks and inline values)."""
    return _MARKER.sub(_expand, markdown)
