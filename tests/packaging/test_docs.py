"""The rendered spec site: it builds strictly, its links resolve, it is generated from
`spec/`, its diagrams render in a browser, and its code examples run.

The site is built once per test session with `mkdocs build --strict` (which also fails on
broken internal links and anchors, see `validation:` in `mkdocs.yml`) into a temporary
directory; the tests then read the built HTML. Its cost is measured, not timed here: the
`docs` section of `benchmarks/` (`benchmarks/docs.py`) reports its CPU time.
"""

from __future__ import annotations

import html
import json
import os
import re
import shutil
import subprocess
import sys
import textwrap
import tomllib
from html.parser import HTMLParser
from pathlib import Path
from types import ModuleType
from typing import Any
from urllib.parse import unquote, urlsplit

import pytest
from chromium_pages import FLAGS, Chromium

ROOT = Path(__file__).resolve().parents[2]
SPEC = ROOT / "spec"
DOCS = ROOT / "docs"
CHROMIUM = Path("/usr/bin/chromium")


def _jfdocs() -> ModuleType:
    """The generator package `docs/hooks/jfdocs` (not an installed package)."""
    hooks = str(DOCS / "hooks")
    if hooks not in sys.path:
        sys.path.insert(0, hooks)
    import jfdocs.diagrams
    import jfdocs.traceability

    return jfdocs


@pytest.fixture(scope="session")
def site(tmp_path_factory: pytest.TempPathFactory) -> Path:
    out = tmp_path_factory.mktemp("site")
    env = {**os.environ, "NO_MKDOCS_2_WARNING": "1"}
    done = subprocess.run(
        [sys.executable, "-m", "mkdocs", "build", "--strict", "--site-dir", str(out)],
        cwd=ROOT,
        env=env,
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert done.returncode == 0, f"mkdocs build --strict failed:\n{done.stdout}\n{done.stderr}"
    warnings = [line for line in done.stderr.splitlines() if line.startswith("WARNING")]
    assert warnings == []
    return out


def _requirements() -> list[dict[str, Any]]:
    with (SPEC / "requirements.toml").open("rb") as handle:
        return tomllib.load(handle)["requirement"]


def _machines() -> list[dict[str, Any]]:
    return [
        json.loads(p.read_text(encoding="utf-8"))
        for p in sorted((SPEC / "machines").glob("*.json"))
    ]


class _Page(HTMLParser):
    """Ids, links and mermaid blocks of one HTML page."""

    def __init__(self) -> None:
        super().__init__(convert_charrefs=True)
        self.ids: set[str] = set()
        self.links: list[str] = []
        self.mermaid: list[str] = []
        self._in_mermaid = 0

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        a = dict(attrs)
        if a.get("id"):
            self.ids.add(a["id"] or "")
        if tag == "a" and a.get("name"):
            self.ids.add(a["name"] or "")
        for key in ("href", "src"):
            value = a.get(key)
            if value is not None and tag in ("a", "link", "script", "img", "source", "iframe"):
                self.links.append(value)
        if self._in_mermaid:
            self._in_mermaid += 1
        elif tag == "div" and "mermaid" in (a.get("class") or "").split():
            self._in_mermaid = 1
            self.mermaid.append("")

    def handle_endtag(self, tag: str) -> None:
        if self._in_mermaid:
            self._in_mermaid -= 1

    def handle_data(self, data: str) -> None:
        if self._in_mermaid:
            self.mermaid[-1] += data


def _parse(path: Path) -> _Page:
    page = _Page()
    page.feed(path.read_text(encoding="utf-8"))
    return page


# ------------------------------------------------------------------------------------------
# the build and its links
# ------------------------------------------------------------------------------------------


def test_every_nav_page_is_built(site: Path) -> None:
    expected = [
        "index.html",
        "concepts/overview.html",
        "concepts/glossary.html",
        "concepts/worked-example.html",
        "reference/index.html",
        "reference/requirements.html",
        "reference/traceability.html",
        "reference/machines/index.html",
        "reference/store-layout.html",
        "reference/canonical-text.html",
        "reference/compress-v2.html",
        "reference/driver-protocol.html",
        "reference/what-a-process-holds.html",
        "reference/errors.html",
        "guide/implementers.html",
        "guide/typescript-driver.html",
        "guide/embedding.html",
        "api/index.html",
        "api/engine.html",
        "decisions.html",
    ]
    expected += [f"reference/machines/{m['machine']}.html" for m in _machines()]
    missing = [p for p in expected if not (site / p).is_file()]
    assert missing == []
    assert not (site / "hooks").exists(), "the generator must not be published"


def test_internal_links_and_anchors_resolve(site: Path) -> None:
    pages = {path: _parse(path) for path in site.rglob("*.html")}
    broken = []
    checked = 0
    for path, page in pages.items():
        for url in page.links:
            parts = urlsplit(url)
            if parts.scheme or parts.netloc or url.startswith("//"):
                continue  # external
            checked += 1
            if not parts.path:
                target = path
            elif parts.path.startswith("/"):  # site-absolute (404.html only)
                target = site / unquote(parts.path.lstrip("/"))
            else:
                target = (path.parent / unquote(parts.path)).resolve()
            if target.is_dir():
                target = target / "index.html"
            if not target.exists():
                broken.append(f"{path.relative_to(site)}: {url} (no such file)")
                continue
            if parts.fragment and target.suffix == ".html":
                ids = pages[target].ids if target in pages else _parse(target).ids
                if unquote(parts.fragment) not in ids:
                    broken.append(f"{path.relative_to(site)}: {url} (no such anchor)")
    assert checked > 1000
    assert broken == []


# ------------------------------------------------------------------------------------------
# generated reference pages
# ------------------------------------------------------------------------------------------


def test_requirements_page_has_every_requirement_as_an_anchor(site: Path) -> None:
    path = site / "reference" / "requirements.html"
    page = _parse(path)
    text = path.read_text(encoding="utf-8")
    reqs = _requirements()
    assert len(reqs) > 50
    for req in reqs:
        assert req["id"] in page.ids, req["id"]
        assert html.escape(req["title"], quote=False) in text or req["title"] in text
    assert "BCP 14" in text and "RFC 8174" in text


def test_traceability_lists_every_untested_must(site: Path) -> None:
    jfdocs = _jfdocs()
    tests = jfdocs.traceability.scan_tests(ROOT)
    untested = [
        r["id"]
        for r in _requirements()
        if r["level"] in ("MUST", "MUST NOT") and not tests.get(r["id"])
    ]
    text = (site / "reference" / "traceability.html").read_text(encoding="utf-8")
    match = re.search(r"<strong>(\d+)</strong> of the (\d+) MUST and MUST NOT", text)
    assert match is not None
    assert int(match.group(1)) == len(untested)
    section = text.split('id="untested"', 1)[1].split("<h2", 1)[0]
    listed = set(re.findall(r"requirements\.html#(JF-[A-Z]+-\d{3})", section))
    assert listed == set(untested)
    for req in _requirements():
        assert f"requirements.html#{req['id']}" in text


def test_each_machine_page_has_its_generated_diagram(site: Path) -> None:
    jfdocs = _jfdocs()
    for table in _machines():
        page = _parse(site / "reference" / "machines" / f"{table['machine']}.html")
        assert len(page.mermaid) == 1, table["machine"]
        block = page.mermaid[0].strip()
        assert block == jfdocs.diagrams.mermaid_state_diagram(table).strip()
        assert block.startswith("stateDiagram-v2")
        for state in table["states"]:
            assert f'state "{state["name"]}" as s_{state["name"]}' in block
        for state in table["states"]:
            assert f"<code>{state['name']}</code>" in (
                site / "reference" / "machines" / f"{table['machine']}.html"
            ).read_text(encoding="utf-8")


def test_vectors_and_constants_are_rendered_from_spec(site: Path) -> None:
    text = html.unescape((site / "reference" / "canonical-text.html").read_text("utf-8"))
    for path in sorted((SPEC / "vectors").glob("*.json")):
        data = json.loads(path.read_text(encoding="utf-8"))
        for case in data["cases"]:
            assert case["description"] in text, (path.name, case["description"])
    constants = json.loads((SPEC / "constants.json").read_text(encoding="utf-8"))
    reference = html.unescape((site / "reference" / "index.html").read_text("utf-8"))
    assert f"{constants['thresholds']['game']:,}" in reference
    assert f"{constants['quota_bytes']:,}" in reference
    errors = html.unescape((site / "reference" / "errors.html").read_text("utf-8"))
    for code in constants["error_codes"]:
        assert code in errors
    assert "Inconsistent error codes" not in errors


def test_driver_and_compress_pages_cover_their_spec_files(site: Path) -> None:
    driver = (site / "reference" / "driver-protocol.html").read_text(encoding="utf-8")
    registry = SPEC / "driver" / "protocol.json"
    if registry.is_file():
        ops = [op["name"] for op in json.loads(registry.read_text("utf-8"))["ops"]]
        assert ops
        page = _parse(site / "reference" / "driver-protocol.html")
        for op in ops:
            assert "op-" + op.replace("_", "-") in page.ids, op
    compress = html.unescape((site / "reference" / "compress-v2.html").read_text("utf-8"))
    contract = json.loads((SPEC / "compress-v2.json").read_text(encoding="utf-8"))
    for code in contract["transport_failures"]:
        assert code in compress
    assert contract["endpoint"]["path"] in compress
    assert "driver-protocol" in driver


def _site_url() -> str:
    config = (ROOT / "mkdocs.yml").read_text(encoding="utf-8")
    match = re.search(r"^site_url: (\S+)$", config, re.M)
    assert match is not None, "mkdocs.yml has no site_url"
    return match.group(1)


def test_spec_files_are_published_at_their_ids(site: Path) -> None:
    """Every file of `spec/` is downloadable from the site, byte for byte, and every JSON
    Schema `$id` is the URL of its own published copy."""
    files = [p for p in sorted(SPEC.rglob("*")) if p.is_file() and "__pycache__" not in p.parts]
    assert len(files) > 15
    for path in files:
        published = site / "spec" / path.relative_to(SPEC)
        assert published.is_file(), published
        assert published.read_bytes() == path.read_bytes(), published
    base = _site_url()
    ids = {}
    for path in files:
        if path.suffix == ".json":
            doc = json.loads(path.read_text(encoding="utf-8"))
            if "$id" in doc:
                ids[doc["$id"]] = path
    assert len(ids) >= 9
    for schema_id, path in ids.items():
        assert schema_id.startswith(base), schema_id
        target = site / unquote(schema_id[len(base) :])
        assert target.is_file(), schema_id
        assert target.read_bytes() == path.read_bytes()
    # The reference pages link to the published copies.
    driver = (site / "reference" / "driver-protocol.html").read_text(encoding="utf-8")
    assert 'href="../spec/driver/ops.schema.json"' in driver


def test_requirement_sources_are_links_the_reader_can_follow(site: Path) -> None:
    """A source `seed:<section>` links to that section of the site's own overview page, a
    decision to its entry on the decisions page; nothing cites a document the site lacks."""
    text = (site / "reference" / "requirements.html").read_text(encoding="utf-8")
    overview = _parse(site / "concepts" / "overview.html")
    seen = set()
    for req in _requirements():
        for source in req["source"]:
            if source.startswith("seed:"):
                anchor = re.sub(r"[^a-z0-9]+", "-", source[5:].lower()).strip("-")
                assert anchor in overview.ids, source
                seen.add(anchor)
                assert f'href="../concepts/overview.html#{anchor}"' in text
            else:
                assert re.fullmatch(r"[DR][0-9]+", source), source
                assert f'href="../decisions.html#{source.lower()}"' in text
    assert len(seen) >= 6
    assert "seed brief" not in text


@pytest.mark.skipif(
    not CHROMIUM.exists(),
    reason="/usr/bin/chromium is not installed (CI: apt-get install -y chromium)",
)
def test_search_works_from_disk_in_headless_chromium(site: Path, tmp_path: Path) -> None:
    """The built site opened as files (file://, no server, no network) finds pages: the
    offline plugin inlines the index and the vendored iframe-worker shim runs the worker."""
    url = (site / "index.html").as_uri() + "?q=footprint"
    done = _chromium("--dump-dom", url, user_data=tmp_path / "profile-search")
    assert done.returncode == 0, done.stderr[-2000:]
    dom = done.stdout
    meta = re.search(r'class="md-search-result__meta">([^<]*)<', dom)
    assert meta is not None, "the search result list was not rendered"
    assert re.fullmatch(r"\d+ matching documents?", meta.group(1).strip()), meta.group(1)
    links = re.findall(r'href="([^"]+)" class="md-search-result__link"', dom)
    assert links
    pages = {urlsplit(link).path.rsplit("/", 1)[-1] for link in links}
    assert "canonical-text.html" in pages, pages
    for link in links:
        assert link.startswith("file://"), link
        assert Path(unquote(urlsplit(link).path)).is_file(), link
    assert "unpkg.com" not in (site / "index.html").read_text(encoding="utf-8")


def test_worked_example_is_produced_by_the_engine(site: Path) -> None:
    raw = (site / "concepts" / "worked-example.html").read_text("utf-8")
    text = html.unescape(re.sub(r"<[^>]+>", "", raw))
    assert "Thresholds overridden for this example" in text
    for key in ("jfGameStack.summary", "jfCatalystArchives", "jfRounds.4", "forcedCompression"):
        assert key in text
    assert '"outcome": "published"' in text
    assert '"outcome": "refused"' in text
    # The discarded continuation of the intervene never reaches any store shown.
    assert "warned by a shepherd" in text  # the code that ran shows the full output...
    stores = re.findall(r'"jfRounds\.4": \{[^}]*\}', text)
    assert stores and all("shepherd" not in s for s in stores)  # ...the store never does


def test_fragment_markers_are_checked() -> None:
    """A block marker stands alone on its line, a value marker sits inside a sentence, and an
    unknown name fails the build instead of leaving the marker in the page."""
    _jfdocs()
    from jfdocs.fragments import expand_fragments

    quota = f"{json.loads((SPEC / 'constants.json').read_text('utf-8'))['quota_bytes']:,}"
    assert expand_fragments("at most <!-- jfsm:quota-bytes --> bytes") == f"at most {quota} bytes"
    block = expand_fragments("Intro\n\n<!-- jfsm:thresholds -->\n\nAfter")
    assert "| game |" in block and "<!--" not in block
    with pytest.raises(ValueError, match="alone on its line"):
        expand_fragments("see <!-- jfsm:thresholds --> here")
    with pytest.raises(KeyError):
        expand_fragments("<!-- jfsm:no-such-fragment -->")


def test_reference_prose_is_markdown_with_markers() -> None:
    """The reference pages' prose is hand-written Markdown; every marker in it is known."""
    _jfdocs()
    from jfdocs.fragments import FRAGMENTS, VALUES

    pages = ["store-layout", "canonical-text", "compress-v2", "driver-protocol", "errors"]
    for name in pages:
        text = (DOCS / "reference" / f"{name}.md").read_text(encoding="utf-8")
        markers = re.findall(r"<!-- jfsm:([a-z0-9-]+) -->", text)
        assert markers, name
        assert set(markers) <= set(FRAGMENTS) | set(VALUES), name


def test_decisions_page_has_every_decision_and_refinement(site: Path) -> None:
    page = _parse(site / "decisions.html")
    assert {f"d{i}" for i in range(1, 21)} <= page.ids
    assert {f"r{i}" for i in range(1, 10)} <= page.ids


# ------------------------------------------------------------------------------------------
# wording
# ------------------------------------------------------------------------------------------

_KEYWORDS = re.compile(r"\b(MUST|SHALL|SHOULD|MAY|REQUIRED|RECOMMENDED|OPTIONAL)\b")


def test_prose_pages_use_no_rfc2119_keywords() -> None:
    """Only requirement statements are normative: the hand-written explanatory pages use no
    capitalized BCP 14 keyword (the reference overview names the levels, nothing more)."""
    prose = [
        DOCS / "index.md",
        DOCS / "concepts" / "glossary.md",
        DOCS / "concepts" / "overview.md",
        DOCS / "decisions.md",
        DOCS / "guide" / "implementers.md",
        DOCS / "guide" / "typescript-driver.md",
        DOCS / "guide" / "embedding.md",
        DOCS / "reference" / "what-a-process-holds.md",
    ]
    found = {p.name: _KEYWORDS.findall(p.read_text(encoding="utf-8")) for p in prose}
    assert {name: words for name, words in found.items() if words} == {}


def test_what_a_process_holds_names_every_op() -> None:
    """The page "What a process holds" (issue 39, R204) says something of every op of the
    protocol, and lists the ops that owe JF-STORE-030's read check as the catalog does."""
    page = (DOCS / "reference" / "what-a-process-holds.md").read_text(encoding="utf-8")
    protocol = json.loads((ROOT / "spec" / "driver" / "protocol.json").read_text("utf-8"))
    taking = {"hello", "create_game", "open_game", "release_game", "forget_games"}
    taking |= {"restart", "shutdown", "crash"}
    ops = {op["name"] for op in protocol["ops"]}
    assert ops and all(f"`{op}`" in page for op in ops), sorted(
        op for op in ops if f"`{op}`" not in page
    )
    catalog = next(r for r in _requirements() if r["id"] == "JF-STORE-030")["statement"]
    section = page.split("## What the read check covers", 1)[1].split("##", 1)[0]
    for op in sorted(ops - taking):
        assert f"`{op}`" in catalog, op
        assert f"`{op}`" in section, op


def test_documented_cli_options_exist() -> None:
    """Every option the implementer's guide documents is offered by `jfsm_conformance/run/cli.py` or
    by the pytest plugin."""
    cli = ROOT / "conformance" / "jfsm_conformance" / "run" / "cli.py"
    guide = (DOCS / "guide" / "implementers.md").read_text(encoding="utf-8")
    documented = set(re.findall(r"`(--[a-z][a-z-]*)", guide))
    source = cli.read_text(encoding="utf-8")
    plugin = (ROOT / "conformance" / "jfsm_conformance" / "pytest_plugin.py").read_text(
        encoding="utf-8"
    )
    offered = set(re.findall(r"""["'](--[a-z][a-z-]*)["']""", source + plugin))
    assert documented and documented <= offered, sorted(documented - offered)
    assert "replay" in source


def test_expected_failure_examples_are_accepted_by_the_cli(tmp_path: Path) -> None:
    from jfsm_conformance.run.cli import load_expected_failures

    guide = (DOCS / "guide" / "implementers.md").read_text(encoding="utf-8")
    examples = re.findall(r'```(toml|json) title="(expected-failures\.\w+)"\n(.*?)```', guide, re.S)
    assert {name for _, name, _ in examples} == {
        "expected-failures.toml",
        "expected-failures.json",
    }
    loaded = []
    for _, name, body in examples:
        path = tmp_path / name
        path.write_text(textwrap.dedent(body), encoding="utf-8")
        loaded.append(load_expected_failures(str(path)))
    assert loaded[0].keys() == loaded[1].keys() == {"JF-CALL-009", "JF-TEXT-003"}
    assert all(reason for entries in loaded for reason in entries.values())


# ------------------------------------------------------------------------------------------
# the diagrams render in a browser, offline
# ------------------------------------------------------------------------------------------


def _chromium(*args: str, user_data: Path) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [
            str(CHROMIUM),
            *(flag for flag in FLAGS if flag != "--remote-debugging-pipe"),
            f"--user-data-dir={user_data}",
            "--window-size=1280,2000",
            "--virtual-time-budget=5000",
            *args,
        ],
        capture_output=True,
        text=True,
        timeout=180,
    )


@pytest.mark.skipif(
    not CHROMIUM.exists(),
    reason="/usr/bin/chromium is not installed (CI: apt-get install -y chromium)",
)
def test_machine_diagrams_render_in_headless_chromium(site: Path, tmp_path: Path) -> None:
    for table in _machines():
        url = (site / "reference" / "machines" / f"{table['machine']}.html").as_uri()
        done = _chromium("--dump-dom", url, user_data=tmp_path / f"profile-{table['machine']}")
        assert done.returncode == 0, done.stderr[-2000:]
        dom = done.stdout
        match = re.search(
            r'<div class="mermaid"[^>]*data-processed="true"[^>]*>(.*?)</svg>', dom, re.S
        )
        assert match is not None, f"{table['machine']}: no rendered diagram in the page"
        svg = match.group(1)
        assert "<svg" in svg and 'aria-roledescription="stateDiagram"' in svg
        labels = set(re.findall(r">([^<>]+)<", svg))
        for state in table["states"]:
            assert state["name"] in labels, (table["machine"], state["name"])
        assert "Syntax error" not in dom
    shot = tmp_path / "stack_compression.png"
    done = _chromium(
        f"--screenshot={shot}",
        (site / "reference" / "machines" / "stack_compression.html").as_uri(),
        user_data=tmp_path / "profile-shot",
    )
    assert done.returncode == 0, done.stderr[-2000:]
    data = shot.read_bytes()
    assert data[:8] == b"\x89PNG\r\n\x1a\n"
    width, height = int.from_bytes(data[16:20], "big"), int.from_bytes(data[20:24], "big")
    assert (width, height) == (1280, 2000)
    assert len(data) > 50_000  # a page with text and a diagram, not a blank screen
    keep = os.environ.get("JFSM_DOCS_SCREENSHOT")
    if keep:
        shutil.copyfile(shot, keep)


class _Matrix(HTMLParser):
    """The safety matrix of a page: its wrapper's attributes, group rows, and per body row
    its name and cells (class, title, link); the legend's items."""

    def __init__(self) -> None:
        super().__init__(convert_charrefs=True)
        self.wrap: dict[str, str | None] = {}
        self.groups: list[str] = []
        self.rows: list[dict[str, Any]] = []
        self.legend = 0
        self._where = ""  # "body", "group", "name", "legend" or ""

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        a = dict(attrs)
        classes = (a.get("class") or "").split()
        if tag == "div" and "jf-matrix-wrap" in classes:
            self.wrap = a
        elif tag == "tbody" and not self.rows:
            self._where = "body"
        elif tag == "ul" and "jf-matrix-legend" in classes:
            self._where = "legend"
        elif tag == "li" and self._where == "legend":
            self.legend += 1
        elif self._where in ("body", "group") and tag == "tr":
            self._where = "group" if "jf-matrix-group" in classes else "body"
            if self._where == "group":
                self.groups.append("")
            else:
                self.rows.append({"name": "", "cells": []})
        elif self._where == "body" and tag == "th":
            self._where = "name"
        elif self._where == "body" and tag == "td":
            self.rows[-1]["cells"].append(
                {
                    "class": classes[0] if classes else "",
                    "href": None,
                    "title": a.get("title"),
                    "halves": [],
                }
            )
        elif self._where == "body" and tag == "span" and "jf-half" in classes:
            self.rows[-1]["cells"][-1]["halves"].append(classes[1])
        elif self._where == "body" and tag == "a":
            self.rows[-1]["cells"][-1]["href"] = a.get("href")

    def handle_endtag(self, tag: str) -> None:
        if tag == "tbody" or (tag == "ul" and self._where == "legend"):
            self._where = ""
        elif tag == "th" and self._where == "name":
            self._where = "body"

    def handle_data(self, data: str) -> None:
        if self._where == "group":
            self.groups[-1] += data
        elif self._where == "name":
            self.rows[-1]["name"] += data


@pytest.mark.skipif(
    not CHROMIUM.exists(),
    reason="/usr/bin/chromium is not installed (CI: apt-get install -y chromium)",
)
def test_safety_matrix_renders_compact_in_headless_chromium(site: Path, tmp_path: Path) -> None:
    """The results page's matrix is drawn from `docs/safety/results.json` at build time: one
    row per row of the JSON, grouped by library, one coloured cell per property that says
    its verdict, failing and by-design cells linking to their finding, a legend; and in a
    1280-pixel window it fits the page (the page's script finds no sideways scroll)."""
    reports = json.loads((DOCS / "safety" / "results.json").read_text("utf-8"))
    page = site / "safety" / "results.html"
    done = _chromium("--dump-dom", page.as_uri(), user_data=tmp_path / "profile-matrix")
    assert done.returncode == 0, done.stderr[-2000:]
    matrix = _Matrix()
    matrix.feed(done.stdout)
    assert matrix.wrap.get("data-overflow") == "none", matrix.wrap  # the script ran; it fits
    assert len(matrix.rows) == len(reports) >= 18
    libraries = [r["matrix"]["library"] for r in reports]
    runs = [lib for i, lib in enumerate(libraries) if i == 0 or libraries[i - 1] != lib]
    assert [g.strip() for g in matrix.groups] == runs
    kinds = {"pass": "pass", "fail": "fail", "by design": "design", "not applicable": "na"}
    for row, report in zip(matrix.rows, reports, strict=True):
        assert report["adapter"] in row["name"] and report["matrix"]["version"] in row["name"]
        assert report["matrix"]["why"] in row["name"]
        assert len(row["cells"]) == len(report["verdicts"]) == 14
        several = report.get("several_writers")
        assert ("⇉" in row["name"]) == (several is not None)
        others = several["verdicts"] if several else report["verdicts"]
        pairs = zip(report["verdicts"], others, strict=True)
        for cell, (verdict, other) in zip(row["cells"], pairs, strict=True):
            targets = []
            if several is None:
                assert cell["class"] == "jf-v-" + kinds.get(verdict["verdict"], "other")
                assert cell["title"] == f"{verdict['id']}: {verdict['verdict']}"
                if verdict["verdict"] in ("fail", "by design"):
                    targets = [report["matrix"]["links"][verdict["id"]]]
            else:  # one writer left, two overlapping writers right
                assert cell["class"] == "jf-v-split"
                assert cell["halves"] == [
                    "jf-v-" + kinds.get(v["verdict"], "other") for v in (verdict, other)
                ]
                assert cell["title"] == (
                    f"{verdict['id']}: {verdict['verdict']}; two writers: {other['verdict']}"
                )
                for v, key in ((verdict, "links"), (other, "links_several")):
                    if v["verdict"] in ("fail", "by design"):
                        targets.append(report["matrix"][key][v["id"]])
            if targets:
                want = targets[0][:-3] + ".html" if targets[0].endswith(".md") else targets[0]
                assert cell["href"] == want, (report["adapter"], verdict["id"])
            else:
                assert cell["href"] is None
    assert matrix.legend == 6
    assert "<table>" not in page.read_text("utf-8").split('id="findings"')[0].split("Verdicts")[1]


# ------------------------------------------------------------------------------------------
# code on the site runs
# ------------------------------------------------------------------------------------------


def _python_blocks(markdown: str) -> list[str]:
    return re.findall(r"^```python\n(.*?)^```", markdown, re.S | re.M)


def test_embedding_guide_examples_run(capsys: pytest.CaptureFixture[str]) -> None:
    from jfsm_conformance.fake.compress import FakeCompress

    blocks = _python_blocks((DOCS / "guide" / "embedding.md").read_text(encoding="utf-8"))
    assert len(blocks) >= 4
    with FakeCompress() as fake, pytest.MonkeyPatch.context() as patch:
        patch.setenv("COMPRESS_URL", fake.url)
        for index, block in enumerate(blocks):
            exec(compile(block, f"embedding.md block {index}", "exec"), {"__name__": "__main__"})
        assert fake.violations == []
    out = capsys.readouterr().out
    assert "compression_pending True refused" in out
    assert "published call-1" in out
    # Every `# prints: LINE` comment of the guide is a line the code printed, in that order.
    promised = [
        line.split("# prints:", 1)[1].strip()
        for block in blocks
        for line in block.splitlines()
        if "# prints:" in line
    ]
    assert len(promised) >= 4
    printed = iter(line.strip() for line in out.splitlines())
    missing = [line for line in promised if not any(line == got for got in printed)]
    assert missing == [], f"the guide says it prints {missing}; it printed:\n{out}"


def _typescript_runner(tmp_path: Path) -> list[str] | None:
    """A command that runs `jfsm-driver.ts`, or None when no TypeScript toolchain exists."""
    source = DOCS / "guide" / "jfsm-driver.ts"
    node = shutil.which("node")
    if node is None:
        return None
    version = subprocess.run([node, "--version"], capture_output=True, text=True).stdout
    major, minor = (int(x) for x in version.strip().lstrip("v").split(".")[:2])
    if (major, minor) >= (22, 6):
        return [node, "--experimental-strip-types", "--no-warnings", str(source)]
    tsc = os.environ.get("JFSM_TSC") or shutil.which("tsc")
    if tsc is None:
        return None
    out = tmp_path / "build"
    # node_modules/.bin/tsc, or a global /usr/bin/tsc -> .../node_modules/typescript/bin/tsc
    roots = [Path(tsc).parent.parent / "@types", Path(tsc).resolve().parents[2] / "@types"]
    types = next((r for r in roots if (r / "node").is_dir()), None)
    extra = ["--types", "node", "--typeRoots", str(types)] if types is not None else []
    done = subprocess.run(
        [
            tsc,
            "--strict",
            "--target",
            "es2022",
            "--module",
            "nodenext",
            "--moduleResolution",
            "nodenext",
            *extra,
            "--outDir",
            str(out),
            str(source),
        ],
        capture_output=True,
        text=True,
    )
    assert done.returncode == 0, done.stdout + done.stderr
    return [node, str(out / "jfsm-driver.js")]


def test_typescript_driver_skeleton_speaks_the_protocol(tmp_path: Path) -> None:
    command = _typescript_runner(tmp_path)
    if command is None:
        pytest.skip("needs Node >= 22.6, or tsc on PATH or in JFSM_TSC, to run TypeScript")
    from jsonschema import Draft202012Validator
    from referencing import Registry, Resource

    driver = SPEC / "driver"
    envelope = json.loads((driver / "envelope.schema.json").read_text("utf-8"))
    ops = json.loads((driver / "ops.schema.json").read_text("utf-8"))
    registry = Registry().with_resources(
        [
            (envelope["$id"], Resource.from_contents(envelope)),
            (ops["$id"], Resource.from_contents(ops)),
        ]
    )
    reply_ok = Draft202012Validator({"$ref": envelope["$id"] + "#/$defs/reply"}, registry=registry)
    hello_ok = Draft202012Validator(
        {"$ref": ops["$id"] + "#/$defs/hello_result"}, registry=registry
    )
    requests = [
        {"id": 1, "op": "hello", "args": {"protocol": 1, "compressUrl": "http://127.0.0.1:9"}},
        {"id": 2, "op": "create_game", "args": {"game": "g1"}},
        {"id": 3, "op": "hello", "args": {"protocol": 2, "compressUrl": "http://127.0.0.1:9"}},
        {"id": 4, "op": "constructor", "args": {}},
        {"id": 5, "op": "shutdown", "args": {}},
    ]
    stdin = "".join(json.dumps(r) + "\n" for r in requests)
    done = subprocess.run(command, input=stdin, capture_output=True, text=True, timeout=60)
    assert done.returncode == 0, done.stderr
    replies = [json.loads(line) for line in done.stdout.splitlines()]
    for reply in replies:
        reply_ok.validate(reply)
    by_id = {r["id"]: r for r in replies}
    assert by_id[1]["ok"] is True
    hello_ok.validate(by_id[1]["result"])
    assert by_id[2]["error"]["code"] == "unsupported_op"
    assert by_id[3]["error"]["code"] == "invalid_input"
    assert by_id[4]["error"]["code"] == "unsupported_op"
    assert by_id[5] == {"id": 5, "ok": True, "result": {}}


# ------------------------------------------------------------------------------------------
# the traceability scanner
# ------------------------------------------------------------------------------------------


def test_scanner_attributes_marks_to_node_ids(tmp_path: Path) -> None:
    jfdocs = _jfdocs()
    tests = tmp_path / "tests" / "sub"
    tests.mkdir(parents=True)
    (tests / "test_sample.py").write_text(
        "import pytest\n"
        "from pytest import mark\n"
        "pytestmark = [pytest.mark.req('JF-A-001')]\n"
        "@pytest.mark.req('JF-B-001', 'JF-B-002')\n"
        "def test_one(): pass\n"
        "def test_two(): pass\n"
        "@mark.req('JF-C-001')\n"
        "class TestGroup:\n"
        "    pytestmark = pytest.mark.req('JF-C-002')\n"
        "    @pytest.mark.parametrize('x', [pytest.param(1, marks=pytest.mark.req('JF-D-001'))])\n"
        "    def test_three(self, x): pass\n"
        "TestMachine = pytest.mark.req('JF-E-001')(object)\n"
        "def helper(): pytest.mark.req('JF-Z-999')\n",
        encoding="utf-8",
    )
    (tests / "not_a_test.py").write_text("import pytest\npytest.mark.req('JF-Z-998')\n")
    found = jfdocs.traceability.scan_tests(tmp_path)
    one = "tests/sub/test_sample.py::test_one"
    two = "tests/sub/test_sample.py::test_two"
    three = "tests/sub/test_sample.py::TestGroup::test_three"
    machine = "tests/sub/test_sample.py::TestMachine"
    assert found == {
        "JF-A-001": sorted([one, two, three, machine]),
        "JF-B-001": [one],
        "JF-B-002": [one],
        "JF-C-001": [three],
        "JF-C-002": [three],
        "JF-D-001": [three],
        "JF-E-001": [machine],
    }


def test_scanner_agrees_with_pytest_collection() -> None:
    """On this repository, the static scan finds the same (test, requirement) pairs as pytest's
    own collection of `req` marks (parametrized ids folded into their test)."""
    jfdocs = _jfdocs()
    scanned = {
        (node, req) for req, nodes in jfdocs.traceability.scan_tests(ROOT).items() for node in nodes
    }
    plugin = ROOT / "tests" / "_collect_req_marks.py"
    assert not plugin.exists()
    code = (
        "import json, sys, pytest\n"
        "pairs = set()\n"
        "files = set()\n"
        "class P:\n"
        "    def pytest_collection_finish(self, session):\n"
        "        for item in session.items:\n"
        "            files.add(item.nodeid.split('::')[0])\n"
        "            node = item.nodeid.split('[')[0]\n"
        "            parts = node.split('::')\n"
        "            if len(parts) > 2 and not parts[1].startswith('Test'):\n"
        "                node = '::'.join(parts[:2])\n"
        "            for mark in item.iter_markers('req'):\n"
        "                for req in mark.args:\n"
        "                    pairs.add((node, req))\n"
        "rc = pytest.main(['--collect-only', '-q', '-p', 'no:cacheprovider', '-n', '0', '-m', '',\n"
        "                  '--continue-on-collection-errors', 'tests'], plugins=[P()])\n"
        "print('PAIRS=' + json.dumps(sorted(pairs)))\n"
        "print('FILES=' + json.dumps(sorted(files)))\n"
    )
    done = subprocess.run(
        [sys.executable, "-c", code], cwd=ROOT, capture_output=True, text=True, timeout=300
    )
    lines = done.stdout.splitlines()
    pairs = next((x for x in lines if x.startswith("PAIRS=")), None)
    files = next((x for x in lines if x.startswith("FILES=")), None)
    assert pairs and files, done.stdout[-3000:] + done.stderr[-3000:]
    # Hypothesis state machines collect as TestX::runTest: fold to the class.
    collected = {(n.removesuffix("::runTest"), r) for n, r in json.loads(pairs[6:])}
    # A test file that fails to import (another change in progress) is compared no further.
    importable = set(json.loads(files[6:]))
    assert len(importable) > 5
    assert {p for p in scanned if p[0].split("::")[0] in importable} == collected


def test_conformance_coverage_never_breaks_the_build() -> None:
    jfdocs = _jfdocs()
    coverage = jfdocs.traceability.conformance_coverage()
    assert coverage.note
    if coverage.available:
        known = {r["id"] for r in _requirements()}
        assert set(coverage.checks) <= known
    else:
        assert coverage.note.startswith("conformance coverage: not yet generated")


DECISION_HEADING = re.compile(r"^### ([DR]\d+) (.+?) \{ #([a-z0-9]+) \}$", re.M)
INDEX_ENTRY = re.compile(r"^    - \[([DR]\d+)\]\(#([a-z0-9]+)\) (.+)$", re.M)


def decisions_index_problems(page: str) -> list[str]:
    """What is wrong with the Decisions page's index by area: a decision missing from it or
    listed twice, a link to no heading, or a title other than the heading's."""
    headings = {m.group(1): (m.group(3), m.group(2)) for m in DECISION_HEADING.finditer(page)}
    start = page.index("## Index by area")
    index = page[start : page.index("\n## ", start + 1)]
    entries = INDEX_ENTRY.findall(index)
    problems: list[str] = []
    seen = [number for number, _, _ in entries]
    problems += [f"{n} is listed twice" for n in sorted(set(seen)) if seen.count(n) > 1]
    problems += [
        f"{n} ({title}) is in no area" for n, (_, title) in headings.items() if n not in seen
    ]
    for number, anchor, title in entries:
        if number not in headings:
            problems.append(f"{number} has no heading")
        elif headings[number] != (anchor, title):
            want = f"    - [{number}](#{headings[number][0]}) {headings[number][1]}"
            problems.append(f"{number}: the index line should read {want!r}")
    return problems


def test_the_decisions_index_lists_every_decision_once_with_its_title() -> None:
    page = (ROOT / "docs" / "decisions.md").read_text(encoding="utf-8")
    assert len(DECISION_HEADING.findall(page)) == page.count("\n### ")  # every heading parsed
    assert decisions_index_problems(page) == []


def test_the_decisions_index_check_can_fail() -> None:
    page = (ROOT / "docs" / "decisions.md").read_text(encoding="utf-8")
    dropped = page.replace(
        "    - [R38](#r38) JCS has an independent oracle: the `rfc8785` package\n", ""
    )
    assert decisions_index_problems(dropped) == [
        "R38 (JCS has an independent oracle: the `rfc8785` package) is in no area"
    ]
    twice = page.replace(
        "    - [D1](#d1) ", "    - [D2](#d2) A character is a code point\n    - [D1](#d1) "
    )
    assert decisions_index_problems(twice) == ["D2 is listed twice"]
    renamed = page.replace(
        "    - [D1](#d1) Texts are exact Unicode strings", "    - [D1](#d1) Texts"
    )
    assert len(decisions_index_problems(renamed)) == 1


# ------------------------------------------------------------------------------------------
# the pages render as written (issue 40): lists are lists, code is whole at 1280 px, and
# decision numbers are links
# ------------------------------------------------------------------------------------------

# A line of a paragraph that starts like a list item: Python-Markdown starts a list only
# after a blank line, so "text:\n- a\n- b" renders as one paragraph, "text: - a - b" on
# screen. Only "1." opens a numbered list ("counts\n2. Count" is a sentence).
_RUN_ON = re.compile(r"\n[ \t]*(?:[-*+]|1[.)])[ \t]+\S")
_FENCE = re.compile(r"^\s*(`{3,}|~{3,})")
_ITEM = re.compile(r"^\s*(?:[-*+]|\d+[.)])[ \t]+\S")
_OPENS_LIST = re.compile(r"^\s*(?:[-*+]|1[.)])[ \t]+\S")
# lines that end a paragraph: headings, tables, admonitions, tabs, HTML, definitions,
# footnotes, quotes, rules
_NOT_PROSE = re.compile(r"^\s*(?:#|\||!!!|\?\?\?|===|<|:[ \t]|\[\^|>|\*\*\*\s*$|---\s*$)")


def lists_without_blank_line(markdown: str) -> list[int]:
    """The numbers (1-based) of the lines of `markdown` that start a list right under a
    paragraph's line, with no blank line between, outside code fences. A list item's own
    continuation lines and nested items are no paragraph."""
    hits: list[int] = []
    fence: str | None = None
    opened_by: str | None = None  # the open paragraph's first line: "item" or "prose"
    for number, line in enumerate(markdown.splitlines(), 1):
        if fence is not None:
            if line.strip().startswith(fence):
                fence = None
            continue
        if match := _FENCE.match(line):
            fence, opened_by = match.group(1), None
        elif not line.strip() or _NOT_PROSE.match(line):
            opened_by = None
        elif _ITEM.match(line):
            if opened_by == "prose" and _OPENS_LIST.match(line):
                hits.append(number)
            opened_by = "item"
        elif opened_by is None:
            opened_by = "prose"
    return hits


class _Prose(HTMLParser):
    """The text of every paragraph and list item inside a page's `<article>`, its code
    spans and blocks left out."""

    def __init__(self) -> None:
        super().__init__(convert_charrefs=True)
        self.texts: list[str] = []
        self._open: list[list[str]] = []
        self._article = self._code = 0

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        if tag == "article":
            self._article += 1
        elif tag in ("code", "pre"):
            self._code += 1
        elif tag in ("p", "li") and self._article:
            self._open.append([tag, ""])

    def handle_endtag(self, tag: str) -> None:
        if tag == "article":
            self._article -= 1
        elif tag in ("code", "pre"):
            self._code -= 1
        elif tag in ("p", "li") and self._open and self._open[-1][0] == tag:
            self.texts.append(self._open.pop()[1])

    def handle_data(self, data: str) -> None:
        if self._open:
            self._open[-1][1] += "`…`" if self._code else data


def run_on_lists(page_html: str) -> list[str]:
    """The paragraphs and list items of a built page that hold a list as run-on text."""
    prose = _Prose()
    prose.feed(page_html)
    return [" ".join(t.split())[:120] for t in prose.texts if _RUN_ON.search(t)]


def _site_pages(site: Path) -> list[Path]:
    """Every page of the built site a reader opens (not the published spec files)."""
    return [
        p
        for p in sorted(site.rglob("*.html"))
        if p.relative_to(site).parts[0] not in ("spec", "search", "assets") and p.name != "404.html"
    ]


def test_no_page_renders_a_list_as_run_on_text(site: Path) -> None:
    found = {
        page.relative_to(site).as_posix(): hits
        for page in _site_pages(site)
        if (hits := run_on_lists(page.read_text(encoding="utf-8")))
    }
    assert found == {}


def test_markdown_sources_put_a_blank_line_before_each_list() -> None:
    found = {
        path.relative_to(DOCS).as_posix(): hits
        for path in sorted(DOCS.rglob("*.md"))
        if (hits := lists_without_blank_line(path.read_text(encoding="utf-8")))
    }
    assert found == {}, "add a blank line above these lines (file: line numbers)"


def test_the_run_on_list_checks_can_fail() -> None:
    """Both checks on Python-Markdown's own rendering of the mistake and of its fixes; a
    dash inside a sentence, a sentence starting with a number, nested items and list
    items' continuation lines are no mistake."""
    import markdown

    def rendered(source: str) -> str:
        return "<article>" + markdown.markdown(source, extensions=["admonition"]) + "</article>"

    wrong = [
        "**Alternatives.**\n- one\n- two\n",
        "Para text\nwrapped:\n* one\n* two\n",
        "Steps:\n1. one\n2. two\n",
        "- item\n\n    Para in the item:\n    - nested\n",
        '!!! note "A note"\n    Text:\n    - one\n',
    ]
    for source in wrong:
        assert lists_without_blank_line(source), source
        assert run_on_lists(rendered(source)), source
    right = [
        "**Alternatives.**\n\n- one\n- two\n",
        "A dash - inside - a sentence, and\n-1 degrees at the start of a line.\n",
        "The length counts\n2. Count code points.\n",
        "- item\n  continued\n- next\n    - nested\n",
        "```\nText:\n- not markdown\n```\n",
        "| a |\n|---|\n| - b |\n",
    ]
    for source in right:
        assert lists_without_blank_line(source) == [], source
        assert run_on_lists(rendered(source)) == [], source
    assert lists_without_blank_line("Text\n\nMore text:\n- a\n") == [4]


# -- decision numbers ----------------------------------------------------------------------

_DECISION_NUMBER = re.compile(r"(?<![\w.#/])([DR]\d{1,4})(?![\w])")


class _BareDecisions(HTMLParser):
    """Decision numbers in a page's `<article>` text outside any link; a `<pre>` block
    (a published spec file shown verbatim) is left out."""

    def __init__(self, known: set[str]) -> None:
        super().__init__(convert_charrefs=True)
        self.known, self.found = known, []
        self._article = self._link = self._pre = 0

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        self._article += tag == "article"
        self._link += tag == "a"
        self._pre += tag == "pre"

    def handle_endtag(self, tag: str) -> None:
        self._article -= tag == "article"
        self._link -= tag == "a"
        self._pre -= tag == "pre"

    def handle_data(self, data: str) -> None:
        if self._article and not self._link and not self._pre:
            for match in _DECISION_NUMBER.finditer(data):
                if match.group(1) in self.known:
                    around = data[max(0, match.start() - 30) : match.end() + 10]
                    self.found.append(" ".join(around.split()))


def bare_decision_numbers(page_html: str) -> list[str]:
    known = set(_decision_numbers())
    parser = _BareDecisions(known)
    parser.feed(page_html)
    return parser.found


def _decision_numbers() -> list[str]:
    page = (DOCS / "decisions.md").read_text(encoding="utf-8")
    return re.findall(r"^### ([DR]\d+) ", page, re.M)


def test_decision_numbers_on_the_site_are_links(site: Path) -> None:
    """Every page but the Decisions page itself: a decision number a reader meets is a link
    to its decision (R226), in hand-written prose, generated pages and docstrings alike."""
    found = {
        page.relative_to(site).as_posix(): hits
        for page in _site_pages(site)
        if page.name != "decisions.html"
        and (hits := bare_decision_numbers(page.read_text(encoding="utf-8")))
    }
    assert found == {}
    stores = (site / "api" / "stores.html").read_text(encoding="utf-8")  # from a docstring
    assert 'href="../decisions.html#r162" title="R162 ' in stores


def test_decision_links_leave_code_links_and_diagrams_alone() -> None:
    _jfdocs()
    from jfdocs.decision_links import decision_titles, link_decisions

    titles = decision_titles(DOCS / "decisions.md")
    prose = (
        "<article><p>As R100 says (and D16 to D18; R9999 is none), see "
        '<a href="x">R100</a>.</p><p>R1-R2, FOR1, x.R1</p></article>'
    )
    linked = link_decisions(prose, "../decisions.html", titles)
    assert len(bare_decision_numbers(prose)) == 5
    assert bare_decision_numbers(linked) == []
    assert linked.count('class="jf-decision"') == 5  # R100, D16, D18, R1 and R2 of "R1-R2"
    assert '<a class="jf-decision" href="../decisions.html#r100" title="R100 ' in linked
    assert '<a href="x">R100</a>' in linked
    assert "R9999 is none" in linked and "FOR1" in linked and "x.R1" in linked
    verbatim = (
        '<article><p><code>R100</code></p><pre><code>"R79"</code></pre>'
        '<div class="mermaid"><div>R1 --> R2</div> R3</div><svg><text>R4</text></svg></article>'
    )
    assert link_decisions(verbatim, "../decisions.html", titles) == verbatim
    # the check still sees an inline code span's number: write it as a link instead
    assert bare_decision_numbers("<article><p><code>R100</code></p></article>") == ["R100"]


# -- code at 1280 px -----------------------------------------------------------------------

# Per code block of a page's article: its text, how many columns of its font fit in it,
# whether it scrolls sideways, and whether text of it is hidden with no way to scroll to it
# (its own overflow hidden, or a hiding ancestor narrower than it before any scrolling one,
# or it spills past the article into the table of contents).
_MEASURE_CODE = """(() => {
  const article = document.querySelector("article");
  if (!article) return [];
  const edge = article.getBoundingClientRect().right;
  const ruler = document.createElement("canvas").getContext("2d");
  const out = [];
  for (const code of article.querySelectorAll("pre > code, code")) {
    const block = code.parentElement.tagName === "PRE";
    const style = getComputedStyle(code);
    let hidden = ["hidden", "clip"].includes(style.overflowX)
      && code.scrollWidth > code.clientWidth + 1;
    const range = document.createRange();
    range.selectNodeContents(code);
    const right = Math.max(...[...range.getClientRects()].map(r => r.right), 0);
    let scroller = block && ["auto", "scroll"].includes(style.overflowX);
    for (let el = code.parentElement; el && el !== article && !scroller; el = el.parentElement) {
      const ox = getComputedStyle(el).overflowX;
      if (["auto", "scroll"].includes(ox)) scroller = true;
      else if (["hidden", "clip"].includes(ox) && right > el.getBoundingClientRect().right + 1)
        hidden = true;
    }
    if (!scroller && right > edge + 1) hidden = true;
    const scrolls = block && code.scrollWidth > code.clientWidth + 1;
    if (!hidden && !scrolls) continue;
    ruler.font = `${style.fontStyle} ${style.fontWeight} ${style.fontSize} ${style.fontFamily}`;
    const column = ruler.measureText("0".repeat(100)).width / 100;
    const inner = code.clientWidth - parseFloat(style.paddingLeft)
      - parseFloat(style.paddingRight);
    out.push({text: code.textContent, block, hidden, scrolls,
              columns: Math.floor(inner / column + 0.05)});
  }
  return out;
})()"""


def _written_code_lines(page: Path) -> set[str]:
    """The lines of the code fences of a page's Markdown source under `docs/` (and of the
    files it includes with `--8<--`), stripped; empty for a generated page."""
    if not page.is_file():
        return set()
    source = page.read_text(encoding="utf-8")
    lines: set[str] = set()
    fence: str | None = None
    for line in source.splitlines():
        if fence is not None:
            if line.strip().startswith(fence):
                fence = None
            else:
                lines.add(line.strip())
        elif match := _FENCE.match(line):
            fence = match.group(1)
        elif match := re.match(r'\s*--8<-- "([^"]+)"', line):
            included = DOCS / match.group(1)
            lines |= {x.strip() for x in included.read_text(encoding="utf-8").splitlines()}
    return lines


def cut_off_code(page: str, blocks: list[dict[str, Any]], written: set[str]) -> list[str]:
    """What a reader at 1280 px cannot see of a page's code: any code whose text is hidden
    with no way to scroll to it, on every page; and on a page written by hand, a line of a
    code block it wrote that is wider than the block (R227). Generated blocks (the spec's
    files, the worked example's records) may scroll."""
    problems: list[str] = []
    for block in blocks:
        if block["hidden"]:
            problems.append(f"{page}: code hidden past its box: {block['text'][:60]!r}")
            continue
        for line in block["text"].splitlines():
            if len(line) > block["columns"] and line.strip() in written:
                problems.append(
                    f"{page}: a code line of {len(line)} columns where {block['columns']} fit:"
                    f" {line.strip()[:60]!r}"
                )
    return problems


@pytest.mark.skipif(
    not CHROMIUM.exists(),
    reason="/usr/bin/chromium is not installed (CI: apt-get install -y chromium)",
)
def test_no_code_is_cut_off_at_1280_px(site: Path, tmp_path: Path) -> None:
    """Every page in one headless Chromium at 1280 x 2000 px (R227)."""
    problems: list[str] = []
    measured = 0
    with Chromium(CHROMIUM, tmp_path / "profile-code", width=1280, height=2000) as browser:
        for page in _site_pages(site):
            name = page.relative_to(site).as_posix()
            blocks = browser.measure(page.as_uri(), _MEASURE_CODE)
            written = _written_code_lines(DOCS / (name.removesuffix(".html") + ".md"))
            problems += cut_off_code(name, blocks, written)
            measured += 1
        # the measure itself: a block made too narrow for its lines scrolls, one whose
        # overflow is hidden hides them
        probe = tmp_path / "probe.html"
        probe.write_text(
            "<article style='width:300px'><pre><code style='overflow:auto;display:block'>"
            + "x" * 80
            + "</code></pre><pre style='overflow:hidden'><code style='overflow:hidden;"
            "display:block'>"
            + "y" * 80
            + "</code></pre><p><code style='white-space:nowrap'>"
            + "z" * 80
            + "</code></p></article>",
            encoding="utf-8",
        )
        scrolled, clipped, spilled = browser.measure(probe.as_uri(), _MEASURE_CODE)
    assert measured >= 50
    assert (scrolled["scrolls"], scrolled["hidden"]) == (True, False)
    assert 10 < scrolled["columns"] < 80
    assert clipped["hidden"] and spilled["hidden"] and not spilled["block"]
    assert cut_off_code("p", [scrolled], {"x" * 80}) != []
    assert cut_off_code("p", [scrolled], set()) == []  # a generated block may scroll
    assert problems == [], "\n".join(problems)
