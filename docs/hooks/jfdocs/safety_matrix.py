"""The safety matrix as a picture: `docs/safety/results.json` drawn as one compact HTML table
(pure; the `safety-matrix` fragment of the results page, made at build time).

One row per adapter and release, grouped by library under a group row; a frozen first
column names the adapter, version and release; one small coloured cell per property (pass,
fail, by design, not applicable, anything else as "other"), each with its verdict as text
for screen readers and as a tooltip. A failing or by-design cell links to its finding: the
findings page or known issue the results script recorded for it (`matrix.links`), else the
page's findings table. A row whose adapter declares several writers (`several_writers` in
its report) has split cells: the left half the one-writer search's verdict, the right half
the two-overlapping-writers search's (`matrix.links_several` for its links), and its name
carries the mark ⇉. The legend says what each colour means. The
table never scrolls sideways at the widths the site is read at; `matrix.js` marks it when
it would (a narrow window), so the CSS can show that it scrolls.
"""

from __future__ import annotations

import html
from collections.abc import Mapping, Sequence
from typing import Any

__all__ = ["VERDICT_CLASSES", "matrix_html"]

# verdict -> (CSS class suffix, the cell's mark, the legend's words)
VERDICT_CLASSES: dict[str, tuple[str, str, str]] = {
    "pass": ("pass", "✓", "pass: checked, never violated"),
    "fail": ("fail", "✗", "fail: violated (links to the finding)"),
    "by design": ("design", "◐", "by design: violated, as the library documents"),
    "not applicable": ("na", "·", "not applicable: outside the adapter's declared scope"),
}
_OTHER = ("other", "?", "not exercised or error")
_SPLIT = "split cell (rows marked ⇉ declare several writers): left one writer, right two"


def _esc(text: object) -> str:
    return html.escape(str(text), quote=True)


def _row_anchor(report: Mapping[str, Any]) -> str:
    return f"matrix-{report['adapter']}-{report['matrix']['version']}".replace(".", "-")


def _short(rid: str) -> str:
    """A column's heading: the ID's number without its leading zero (`JF-SAFE-004` -> `04`)."""
    return rid.rsplit("-", 1)[-1][1:]


def _href(target: str) -> str:
    """A page-relative Markdown link as the built site has it (`.md` -> `.html`); raw HTML
    is not rewritten by MkDocs."""
    path, sep, anchor = target.partition("#")
    if path.endswith(".md") and "://" not in path:
        path = path[:-3] + ".html"
    return path + sep + anchor


def matrix_html(
    reports: Sequence[Mapping[str, Any]],
    titles: Mapping[str, str],
    requirements_url: str = "../reference/requirements.html",
) -> str:
    """The matrix of `reports` (the results page's JSON rows) as HTML. `titles`: property ID
    -> its title (column tooltips). Raises `KeyError` for a report without `matrix`."""
    ids = [v["id"] for v in reports[0]["verdicts"]] if reports else []
    head = "".join(
        f'<th scope="col" class="jf-matrix-prop"><a href="{requirements_url}#{rid}" '
        f'title="{_esc(rid + ": " + titles.get(rid, ""))}">{_esc(_short(rid))}</a></th>'
        for rid in ids
    )
    lines = [
        '<div class="jf-matrix-wrap" data-overflow="unknown">',
        '<table class="jf-matrix">',
        "<thead><tr>"
        '<th scope="col" class="jf-matrix-name">adapter · version · release</th>'
        f"{head}</tr></thead>",
        "<tbody>",
    ]
    library = None
    for report in reports:
        matrix = report["matrix"]
        if matrix["library"] != library:
            library = matrix["library"]
            lines.append(
                f'<tr class="jf-matrix-group"><th scope="rowgroup" colspan="{len(ids) + 1}">'
                f"{_esc(library)}</th></tr>"
            )
        links = matrix.get("links", {})
        several = report.get("several_writers")
        cells = []
        if several is None:
            for verdict in report["verdicts"]:
                kind, mark, _ = VERDICT_CLASSES.get(verdict["verdict"], _OTHER)
                label = f"{verdict['id']}: {verdict['verdict']}"
                inner = f'{mark}<span class="jf-sr">{_esc(label)}</span>'
                target = links.get(verdict["id"])
                if verdict["verdict"] in ("fail", "by design"):
                    href = _href(target) if target else "#findings"
                    inner = f'<a href="{_esc(href)}">{inner}</a>'
                cells.append(f'<td class="jf-v-{kind}" title="{_esc(label)}">{inner}</td>')
        else:
            many = matrix.get("links_several", {})
            for one, two in zip(report["verdicts"], several["verdicts"], strict=True):
                label = f"{one['id']}: {one['verdict']}; two writers: {two['verdict']}"
                halves = []
                for verdict in (one, two):
                    kind, mark, _ = VERDICT_CLASSES.get(verdict["verdict"], _OTHER)
                    halves.append(f'<span class="jf-half jf-v-{kind}">{mark}</span>')
                inner = "".join(halves) + f'<span class="jf-sr">{_esc(label)}</span>'
                shown = [
                    lk.get(v["id"])
                    for v, lk in ((one, links), (two, many))
                    if v["verdict"] in ("fail", "by design")
                ]
                if shown:
                    href = _href(shown[0]) if shown[0] else "#findings"
                    inner = f'<a href="{_esc(href)}">{inner}</a>'
                cells.append(f'<td class="jf-v-split" title="{_esc(label)}">{inner}</td>')
        name = (
            f'<th scope="row" class="jf-matrix-name" id="{_row_anchor(report)}">'
            f"<code>{_esc(report['adapter'])}</code> {_esc(matrix['version'])}"
            + (" ⇉" if several is not None else "")
            + f'<span class="jf-matrix-why">{_esc(matrix.get("why", ""))}</span></th>'
        )
        lines.append(f"<tr>{name}{''.join(cells)}</tr>")
    lines += ["</tbody>", "</table>", "</div>"]
    legend = "".join(
        f'<li><span class="jf-v-{kind} jf-swatch">{mark}</span> {_esc(words)}</li>'
        for kind, mark, words in [*VERDICT_CLASSES.values(), _OTHER]
    )
    legend += (
        '<li><span class="jf-v-split jf-swatch"><span class="jf-half jf-v-pass">✓</span>'
        f'<span class="jf-half jf-v-fail">✗</span></span> {_esc(_SPLIT)}</li>'
    )
    lines.append(f'<ul class="jf-matrix-legend">{legend}</ul>')
    return "\n".join(lines) + "\n"
