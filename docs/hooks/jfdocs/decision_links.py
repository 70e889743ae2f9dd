"""Decision numbers become links to the Decisions page (pure; decision R226).

Pages, docstrings and the spec's own descriptions cite decisions by number ("decision
R100", "D16 to D18"). A reader who meets a bare number has nowhere to go, so the build
links each one: `link_decisions(html, decisions_url)` wraps every `D<n>` or `R<n>` of the
page's text whose `### D<n>/R<n> Title { #id }` heading exists on `docs/decisions.md` in a
link to that heading, titled with the decision's title. Text inside a link, code, a
preformatted block, a script, a style, an SVG or a Mermaid diagram is left as it is: those
are verbatim (a published spec file, a diagram's source) or already links.

The Decisions page itself is not passed through: its numbers are its own headings.
"""

from __future__ import annotations

import html
import re
from pathlib import Path

__all__ = ["decision_titles", "link_decisions"]

_HEADING = re.compile(r"^### ([DR]\d+) (.+?) \{ #([dr]\d+) \}\s*$", re.M)
# a decision number standing alone: not part of a word, a path, an anchor or an identifier
_NUMBER = re.compile(r"(?<![\w.#/])([DR]\d{1,4})(?![\w])")
_TOKEN = re.compile(r"<!--.*?-->|<(/?)([a-zA-Z][\w:-]*)([^>]*)>|[^<]+|<", re.S)
_VERBATIM = {"a", "code", "pre", "script", "style", "svg", "textarea", "title", "kbd", "samp"}
_VOID = {
    *("area", "base", "br", "col", "embed", "hr", "img", "input", "link", "meta", "source"),
    *("track", "wbr"),
}


def decision_titles(decisions_md: Path) -> dict[str, tuple[str, str]]:
    """`{"R100": ("r100", "Its title"), ...}` from the page's `### ... { #id }` headings."""
    text = decisions_md.read_text(encoding="utf-8")
    return {m.group(1): (m.group(3), m.group(2)) for m in _HEADING.finditer(text)}


def _link(number: str, url: str, titles: dict[str, tuple[str, str]]) -> str:
    anchor, title = titles[number]
    return (
        f'<a class="jf-decision" href="{url}#{anchor}" '
        f'title="{html.escape(f"{number} {title}", quote=True)}">{number}</a>'
    )


def _verbatim_start(name: str, attrs: str) -> bool:
    if name in _VERBATIM:
        return True
    return name == "div" and re.search(r"""class=["'][^"']*\bmermaid\b""", attrs) is not None


def link_decisions(page_html: str, decisions_url: str, titles: dict[str, tuple[str, str]]) -> str:
    """`page_html` with every bare decision number of its text linked (see the module)."""
    out: list[str] = []
    skip: tuple[str, int] | None = None  # the verbatim element we are in, and its depth
    for m in _TOKEN.finditer(page_html):
        token = m.group(0)
        name = (m.group(2) or "").lower()
        if name:
            closing = m.group(1) == "/"
            self_closing = token.endswith("/>") or name in _VOID
            if skip is not None:
                if name == skip[0] and not self_closing:
                    depth = skip[1] + (-1 if closing else 1)
                    skip = None if depth == 0 else (skip[0], depth)
            elif not closing and not self_closing and _verbatim_start(name, m.group(3) or ""):
                skip = (name, 1)
            out.append(token)
        elif skip is None and not token.startswith("<"):
            out.append(
                _NUMBER.sub(
                    lambda n: (
                        _link(n.group(1), decisions_url, titles)
                        if n.group(1) in titles
                        else n.group(1)
                    ),
                    token,
                )
            )
        else:
            out.append(token)
    return "".join(out)
