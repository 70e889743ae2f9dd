"""mkdocs hook: generate every page derivable from `spec/` at build time.

Registered under `hooks:` in `mkdocs.yml`. Nothing is written to `docs/`: generated pages are
added to the build as virtual files (`File.generated`) in `on_files`, so they cannot drift
from the data they render. Inputs are only `spec/`, the test tree (`tests/`, parsed, never
imported), the public functions of `jfsm`, `jfsm_conformance.run.coverage` when it exists, and
the benchmarks' JSON in `docs/benchmarks/`, whose plots are drawn here (`jfdocs.plots`).

Hand-written pages (the reference pages' prose included) embed generated parts with markers
`<!-- jfsm:NAME -->`: a block on its own line or a value inside a sentence (see
`jfdocs.fragments`), replaced in `on_page_markdown`. Every file of the spec directory is
published under the site's `spec/`, so each schema's `$id` (`<site_url>spec/...`) is a URL of
the site. The spec directory is the one `jfsm.spec` finds, as for the engine and the suite.
In `on_page_content` every bare decision number of a page's HTML becomes a link to its
heading on the Decisions page (`jfdocs.decision_links`).
"""

from __future__ import annotations

import logging
import time
from pathlib import Path
from typing import Any

from jfdocs import plots, spec_pages, worked_example
from jfdocs.decision_links import decision_titles, link_decisions
from jfdocs.fragments import expand_fragments
from jfdocs.traceability import conformance_coverage, scan_tests
from mkdocs.structure.files import File, Files
from mkdocs.utils import get_relative_url

from jfsm.spec import spec_dir

log = logging.getLogger("mkdocs.hooks.jfsm")

ROOT = Path(__file__).resolve().parents[2]
SPEC = spec_dir()  # found by the one spec reader, as the engine and the suite find it


def generated_pages() -> dict[str, str]:
    """Page path (relative to docs/) -> Markdown, for every generated page."""
    tests = scan_tests(ROOT)
    conformance = conformance_coverage()
    pages = {
        "reference/requirements.md": spec_pages.requirements_page(SPEC, tests, conformance),
        "reference/traceability.md": spec_pages.traceability_page(SPEC, tests, conformance),
        "reference/engine-guarantees.md": spec_pages.guarantees_page(tests),
        "reference/machines/index.md": spec_pages.machines_index_page(SPEC),
    }
    pages.update(spec_pages.machine_pages(SPEC))
    pages["concepts/worked-example.md"] = worked_example.page()
    return pages


def on_config(config: Any) -> Any:
    """Add a Benchmarks entry to the nav only when real results exist in docs/: the pages of
    `docs/benchmarks/` (the run's, `results.md` first), then its past measurements
    (`docs/benchmarks/history/`) in a section of their own."""
    docs = Path(config["docs_dir"])
    folder = docs / "benchmarks"
    if not folder.is_dir() or config.get("nav") is None:
        return config
    first = ("index.md", "results.md")
    pages = sorted(folder.glob("*.md"), key=lambda p: (p.name not in first, p.name))
    entries: list[Any] = [p.relative_to(docs).as_posix() for p in pages]
    past = sorted((folder / "history").glob("*.md"))
    if past:
        entries.append({"Past measurements": [p.relative_to(docs).as_posix() for p in past]})
    if entries:
        config["nav"].append({"Benchmarks": entries})
    return config


def spec_files() -> dict[str, Path]:
    """Site path -> file, for every file of the spec directory, published under `spec/` so
    that each schema's `$id` (`<site_url>spec/...`) is a URL of the site."""
    return {
        "spec/" + path.relative_to(SPEC).as_posix(): path
        for path in sorted(SPEC.rglob("*"))
        if path.is_file() and "__pycache__" not in path.parts
    }


def on_files(files: Files, config: Any) -> Files:
    started = time.perf_counter()
    for uri, path in spec_files().items():
        files.append(File.generated(config, uri, abs_src_path=str(path)))
    for path, markdown in generated_pages().items():
        existing = files.get_file_from_path(path)
        if existing is not None:
            files.remove(existing)
            log.warning("docs/%s is generated; the hand-written copy is ignored", path)
        files.append(File.generated(config, path, content=markdown))
    for path, svg in plots.plots(Path(config["docs_dir"])).items():  # from the benchmarks' JSON
        files.append(File.generated(config, path, content=svg))
    log.info("jfsm: generated pages in %.2f s", time.perf_counter() - started)
    return files


def on_page_markdown(markdown: str, page: Any, config: Any, files: Files) -> str:
    return expand_fragments(markdown)


def on_page_content(html: str, page: Any, config: Any, files: Files) -> str:
    """Link every bare decision number of a page to its heading on the Decisions page
    (`jfdocs.decision_links`, R226); the Decisions page keeps its own."""
    if page.file.src_uri == "decisions.md":
        return html
    titles = decision_titles(Path(config["docs_dir"]) / "decisions.md")
    return link_decisions(html, get_relative_url("decisions.html", page.url), titles)
