"""Generated fragments inside hand-written pages (pure).

A hand-written page includes a fragment with a line holding only `<!-- jfsm:NAME -->`; the
hook replaces it at build time. An unknown NAME raises `KeyError`, failing the build.
"""

from __future__ import annotations

import json
import re
from collections.abc import Callable
from pathlib import Path

from jfdocs.render import cell, table
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


# The API pages under docs/api/ and the module each renders (keep in step with the nav).
API_PAGES = {
    "jfsm.engine": "engine.md",
    "jfsm.sync": "sync.md",
    "jfsm.errors": "errors.md",
    "jfsm.stores": "stores.md",
    "jfsm.transport": "transport.md",
    "jfsm.compressor": "compressor.md",
}


def _public_api(spec: Path) -> str:
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


def _store_ownership_diagram(spec: Path) -> str:
    """The ownership machine's diagram, for the deploying guide."""
    from jfdocs.diagrams import mermaid_state_diagram

    data = json.loads((spec / "machines" / "store_ownership.json").read_text(encoding="utf-8"))
    return "```mermaid\n" + mermaid_state_diagram(data) + "```\n"


FRAGMENTS: dict[str, Callable[[Path], str]] = {
    "public-api": _public_api,
    "constants": _constants,
    "bcp14": lambda spec: BCP14 + "\n",
    "counts": _counts,
    "store-ownership-diagram": _store_ownership_diagram,
}


def expand_fragments(markdown: str, spec: Path) -> str:
    """Replace every fragment marker line of `markdown`."""
    return _MARKER.sub(lambda m: FRAGMENTS[m.group(1)](spec), markdown)
