"""The compaction safety matrix: the profile against several releases of each library.

```
uv run python -m benchmarks.safety_matrix [--only LIB] [--versions X,Y] [--adapter NAME]
    [--workdir DIR] [--source DIR] [--out docs/safety/results.md]
    [--json docs/safety/results.json] [--merge OLD.json]
```

For every `(library, version)` of `MATRIX` it creates a throwaway virtual environment
(`uv venv`), installs this project (editable) and that exact release (`uv pip install
lib==X`), runs `jfsm profile --adapter NAME` there, and collects its JSON report. It then
writes `docs/safety/results.md`: one row per library, version and property that did not
pass, with the minimal example and the known issue the finding matches (from `KNOWN`), and
a table of verdicts. Slow (minutes: installs and searches); never part of `uv run pytest`
(a smoke test only checks the page writer, `write_results`).

Rows are measured a few at a time: `--only LIB`, `--versions X,Y` (only these releases of
`MATRIX`) and `--adapter NAME` choose the cells to run, and `--merge OLD.json` keeps every
row of an earlier run that was not run again (as it was: the same JSON, the same page row),
so `--merge docs/safety/results.json --json docs/safety/results.json` adds or replaces the
rows just run.
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
import tempfile
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from jfsm_conformance.profile.isolated import install_release

__all__ = ["KNOWN", "MATRIX", "Cell", "known_issue", "main", "write_results"]

ROOT = Path(__file__).resolve().parent.parent


@dataclass(frozen=True)
class Cell:
    """One library release and the adapter(s) that drive it."""

    library: str
    package: str
    version: str
    adapters: tuple[str, ...]
    why: str
    also: tuple[str, ...] = ()  # more requirements installed with the release


_LANGCHAIN = ("langchain", "langchain-sync", "langchain-trim")
_AUTOGEN = ("autogen-unbounded", "autogen-buffered", "autogen-head-tail", "autogen-token-limited")
_MAF = ("maf", "maf-default-history")
_CREWAI = ("crewai", "crewai-strict")
MATRIX: tuple[Cell, ...] = (
    Cell("langchain", "langchain", "1.3.14", _LANGCHAIN, "before #38867's fix"),
    Cell("langchain", "langchain", "1.3.15", _LANGCHAIN, "#38867 fixed (PR #39268)"),
    Cell("langchain", "langchain", "1.5.2", _LANGCHAIN, "current"),
    Cell("openai-agents", "openai-agents", "0.16.0", ("openai-agents",), "before #3116's fix"),
    Cell("openai-agents", "openai-agents", "0.16.1", ("openai-agents",), "#3116 fixed (PR #3117)"),
    Cell("openai-agents", "openai-agents", "0.22.0", ("openai-agents",), "before #4679's fix"),
    Cell("openai-agents", "openai-agents", "0.22.1", ("openai-agents",), "#4679 fixed (PR #4736)"),
    Cell("openai-agents", "openai-agents", "0.24.0", ("openai-agents",), "current"),
    Cell("langmem", "langmem", "0.0.30", ("langmem",), "current"),
    Cell(
        "llama-index-core",
        "llama-index-core",
        "0.14.25",
        ("llamaindex-summary", "llamaindex-memory"),
        "current",
    ),
    Cell("google-adk", "google-adk", "2.13.0", ("adk",), "current"),
    Cell("semantic-kernel", "semantic-kernel", "1.45.0", ("semantic-kernel",), "current"),
    Cell("strands-agents", "strands-agents", "1.62.0", ("strands",), "current"),
    # Agno stores compaction records in SQLite or PostgreSQL: its sqlite extra
    Cell("agno", "agno[sqlite]", "3.1.10", ("agno",), "current"),
    Cell("autogen-core", "autogen-agentchat", "0.7.5", _AUTOGEN, "current"),
    Cell("pydantic-ai-slim", "pydantic-ai-slim", "2.68.0", ("pydantic-ai",), "current"),
    # the last three minor releases of each library added in issue 41
    *(
        Cell("agent-framework-core", "agent-framework-core", version, _MAF, why)
        for version, why in (("1.22.0", "two minors back"), ("1.23.0", "one minor back"))
    ),
    Cell("agent-framework-core", "agent-framework-core", "1.26.0", _MAF, "current"),
    *(
        Cell("crewai", "crewai", version, _CREWAI, why)
        for version, why in (("1.13.0", "two minors back"), ("1.14.7", "one minor back"))
    ),
    Cell("crewai", "crewai", "1.15.30", _CREWAI, "current"),
    # camel-ai imports FastMCP from mcp.server, which mcp 2 removed
    *(
        Cell("camel-ai", "camel-ai", version, ("camel",), why, ("mcp<2",))
        for version, why in (("0.2.87", "two releases back"), ("0.2.89", "one release back"))
    ),
    Cell("camel-ai", "camel-ai", "0.2.90", ("camel",), "current", ("mcp<2",)),
)

# (library, property ID) -> [(issue, versions it affects ("" while unfixed), a text the
# failure message must contain or "")], for findings with a known issue. Anything else is
# "no known issue".
KNOWN: dict[tuple[str, str], list[tuple[str, str, str]]] = {
    ("langchain", "JF-SAFE-002"): [("langchain-ai/langchain#38867", "< 1.3.15", "")],
    ("langchain", "JF-SAFE-003"): [("langchain-ai/langchain#38867", "< 1.3.15", "")],
    ("langchain", "JF-SAFE-005"): [
        ("langchain-ai/langchain#38867", "< 1.3.15", "Error generating summary"),
        ("langchain-ai/langchain#39261", "", "too long to summarize"),
    ],
    ("openai-agents", "JF-SAFE-010"): [("openai/openai-agents-python#3116", "< 0.16.1", "")],
    ("openai-agents", "JF-SAFE-009"): [("openai/openai-agents-python#4679", "< 0.22.1", "")],
}


# (library or adapter, property ID) -> the findings page ready to file upstream
# (docs/safety/findings/); an adapter's entry wins over its library's
FINDINGS: dict[tuple[str, str], str] = {
    ("langchain", "JF-SAFE-004"): "findings/langchain-empty-summary.md",
    ("langmem", "JF-SAFE-004"): "findings/langmem-empty-summary.md",
    ("openai-agents", "JF-SAFE-004"): "findings/openai-agents-empty-summary.md",
    ("llama-index-core", "JF-SAFE-002"): "findings/llamaindex-failing-summarizer.md",
    ("llama-index-core", "JF-SAFE-003"): "findings/llamaindex-failing-summarizer.md",
    ("llamaindex-memory", "JF-SAFE-002"): "findings/llamaindex-memory-failing-block.md",
    ("llamaindex-memory", "JF-SAFE-003"): "findings/llamaindex-memory-failing-block.md",
    ("google-adk", "JF-SAFE-004"): "findings/adk-empty-summary.md",
    ("langchain-trim", "JF-SAFE-006"): "findings/langchain-trim-window-loss.md",
    # one defect (a delete, then a separate write), two observations: one page
    ("llamaindex-summary", "JF-SAFE-010"): "findings/llamaindex-delete-then-set.md",
    ("llamaindex-summary", "JF-SAFE-011"): "findings/llamaindex-delete-then-set.md",
    ("semantic-kernel", "JF-SAFE-004"): "findings/semantic-kernel-empty-summary.md",
    # one defect (the count raised before the summary call), seen at the failed call and after
    **{
        ("strands-agents", rid): "findings/strands-failed-summary-count.md"
        for rid in ("JF-SAFE-001", "JF-SAFE-002", "JF-SAFE-003", "JF-SAFE-004", "JF-SAFE-006")
    },
    ("strands-agents", "JF-SAFE-013"): "findings/strands-resummarize-summary.md",
    ("agno", "JF-SAFE-004"): "findings/agno-blank-summary.md",
    ("pydantic-ai-slim", "JF-SAFE-006"): "findings/pydantic-ai-docs-processor-window.md",
    ("pydantic-ai-slim", "JF-SAFE-004"): "findings/pydantic-ai-blank-summary.md",
    # a `+several` key: a cell of the two-overlapping-writers search
    ("maf", "JF-SAFE-006+several"): "findings/maf-concurrent-run-summary-lost.md",
    ("maf-default-history", "JF-SAFE-007"): "findings/maf-default-history-pitfall.md",
    ("maf-default-history", "JF-SAFE-012"): "findings/maf-default-history-pitfall.md",
    ("crewai", "JF-SAFE-004"): "findings/crewai-empty-summary.md",
    **{
        ("camel-ai", rid): "findings/camel-failed-summary-clears-memory.md"
        for rid in ("JF-SAFE-002", "JF-SAFE-003", "JF-SAFE-004")
    },
}


def _version_key(version: str) -> tuple[int, ...]:
    return tuple(int(p) for p in version.split(".") if p.isdigit())


def known_issue(library: str, rid: str, version: str, message: str = "") -> str | None:
    """The known issue a failing property matches at `version` (and, where the issue has a
    telltale text, with that text in the failure `message`), if any."""
    for issue, bound, needle in KNOWN.get((library, rid), []):
        if needle and needle not in message:
            continue
        if not bound:
            return issue
        limit = bound.removeprefix("< ")
        if _version_key(version) < _version_key(limit):
            return issue
        return f"{issue} (fixed in {limit}, failing again?)"
    return None


def run_cell(
    cell: Cell,
    workdir: Path,
    examples: int,
    source: Path,
    reports_dir: Path | None = None,
    adapters: tuple[str, ...] | None = None,
) -> list[dict[str, Any]]:
    """Install `cell` (and jfsm from `source`) into its own venv under `workdir` (reused if
    it is there) and run the profile once per adapter (of `adapters`, default all the
    cell's); the reports go under `reports_dir` (default `workdir/reports`)."""
    venv = workdir / f"{cell.package}-{cell.version}"
    python = install_release(venv, cell.package, cell.version, source, also=cell.also)
    reports = []
    for adapter in adapters or cell.adapters:
        out = (reports_dir or workdir / "reports") / f"{adapter}-{cell.version}"
        proc = subprocess.run(
            [
                str(venv / "bin" / "jfsm"),
                "profile",
                "--adapter",
                adapter,
                "--examples",
                str(examples),
                "--report-dir",
                str(out),
            ],
            capture_output=True,
            text=True,
            timeout=1800,
        )
        report_path = out / "profile.json"
        if not report_path.exists():
            raise RuntimeError(f"{adapter} {cell.version}: no report\n{proc.stderr[-2000:]}")
        report = json.loads(report_path.read_text("utf-8"))
        report["matrix"] = {"library": cell.library, "version": cell.version, "why": cell.why}
        if cell.library == "langchain":
            report["end_to_end"] = _confirm_langchain(python)
        reports.append(report)
        print(f"{adapter} {cell.version}: exit {proc.returncode}", file=sys.stderr)
    return reports


def _confirm_langchain(python: Path) -> dict[str, Any]:
    """Run `confirm_end_to_end("empty")` (create_agent + checkpointer) inside the venv."""
    code = (
        "import json;"
        " from jfsm_conformance.profile.adapters.langchain_v1 import confirm_end_to_end;"
        " print(json.dumps(confirm_end_to_end('empty')))"
    )
    proc = subprocess.run(
        [str(python), "-c", code], capture_output=True, text=True, timeout=600, cwd=ROOT
    )
    if proc.returncode != 0:
        return {"error": proc.stderr[-500:]}
    return dict(json.loads(proc.stdout.strip().splitlines()[-1]))


def _issue_link(issue: str) -> str:
    """`owner/repo#N rest` as a Markdown link to the issue, then the rest."""
    ref, _, rest = issue.partition(" ")
    repo, _, number = ref.partition("#")
    return f"[{ref}](https://github.com/{repo}/issues/{number})" + (f" {rest}" if rest else "")


def _findings_page(report: dict[str, Any], rid: str, several: bool = False) -> str | None:
    """The findings page of a cell: a several-writers cell's own entry (`ID+several`) wins,
    then the adapter's, then the library's."""
    keys = [rid + "+several"] if several else []
    for key in [*keys, rid]:
        for owner in (report["adapter"], report["matrix"]["library"]):
            if (owner, key) in FINDINGS:
                return FINDINGS[(owner, key)]
    return None


def _confirmation(report: dict[str, Any], rid: str, several: bool = False) -> str:
    """What the page says for a failure with no known issue: its findings page, and the
    end-to-end confirmation through the library's normal entry point, when one was run and
    reproduced it."""
    page = _findings_page(report, rid, several)
    if page:
        same = [
            v["id"]
            for v in (report["several_writers"]["verdicts"] if several else report["verdicts"])
            if v["id"] != rid
            and v["verdict"] == "fail"
            and _findings_page(report, v["id"], several) == page
        ]
        one = f" (one defect with {', '.join(same)}: one page)" if same else ""
        return f"no known issue; ready to file: [{page.removeprefix('findings/')}]({page}){one}"
    e2e = report.get("end_to_end")
    if rid in ("JF-SAFE-004", "JF-SAFE-005") and e2e and e2e.get("gone"):
        return (
            "no known issue; confirmed end to end (create_agent + InMemorySaver, empty summary "
            f"on the third turn): {', '.join(e2e['gone'])} gone, the thread now starts with "
            f"{e2e['messages'][0]!r}"
        )
    return "no known issue"


def _links(report: dict[str, Any], several: bool = False) -> dict[str, str]:
    """Property ID -> where its failing or by-design cell links: the findings page (as a link
    from the results page), else the known issue it matches, else the page's findings table
    (`#findings`). `several`: the cells of the several-writers search."""
    lib, version = report["matrix"]["library"], report["matrix"]["version"]
    links = {}
    verdicts = report["several_writers"]["verdicts"] if several else report["verdicts"]
    for v in verdicts:
        if v["verdict"] not in ("fail", "by design"):
            continue
        issue = known_issue(lib, v["id"], version, v.get("message") or "")
        page = _findings_page(report, v["id"], several)
        if v["verdict"] == "fail" and issue:
            ref, _, _ = issue.partition(" ")
            repo, _, number = ref.partition("#")
            links[v["id"]] = f"https://github.com/{repo}/issues/{number}"
        elif page:
            links[v["id"]] = page
        else:
            links[v["id"]] = "#findings"
    return links


def _cell(text: object) -> str:
    return str(text or "").replace("|", "\\|").replace("\n", "<br>")


def write_results(reports: list[dict[str, Any]], path: Path) -> str:
    """Write the results page for `reports` (profile JSON reports with a `matrix` key)."""
    lines = [
        "# Results: the safety matrix",
        "",
        "<!-- Written by `uv run python -m benchmarks.safety_matrix`. Do not edit by hand. -->",
        "",
        "Each release was installed into its own throwaway environment and run through "
        "`jfsm profile` with faithful offline fakes (see [the adapters](adapters.md)). "
        "✓ pass, ✗ fail, ◐ *by design* a documented behaviour (reason below), · not "
        "applicable: outside the adapter's declared scope (the report gives the reason). The "
        "known issue is the one the failure matches. How often "
        "a fresh random search at the default budget finds each ✗ and *by design* cell: "
        "[Detection rates](detection.md).",
        "",
        "## Verdicts",
        "",
        "One row per adapter and release, grouped by library; one cell per property "
        "(the column's number is its JF-SAFE ID; hover for its title). A ✗ or *by design* "
        "cell links to its finding.",
        "",
        "<!-- jfsm:safety-matrix -->",
    ]
    for rep in reports:
        rep["matrix"]["links"] = _links(rep)
        if rep.get("several_writers"):
            rep["matrix"]["links_several"] = _links(rep, several=True)
    declared = [r for r in reports if r.get("several_writers")]
    claims = {r["adapter"]: (r["scope"] or {}).get("writers_claim", "") for r in declared}
    lines += [
        "",
        "## Several writers",
        "",
        "An adapter whose library lets two runs share a session (or thread, or memory) "
        "declares it; its rows (⇉) are searched twice, with one writer and with a second "
        "writer appending while the first one's summarizer call is held, then released with "
        "a drawn outcome (ok, failure, timeout, empty), and each cell shows both verdicts. "
        "The adapters that declare it, and the library's line that allows it:",
        "",
        "| adapter | why two runs may share a session |",
        "|---|---|",
    ]
    lines += [f"| `{name}` | {_cell(claim)} |" for name, claim in claims.items()]
    lines += [
        "",
        "Every other adapter declares one writer: a graph step, an object in the "
        "application's memory, or a task execution's own list, with no claim to a second "
        "writer.",
    ]
    lines += [
        "",
        "## Findings",
        "",
        "Every failure and by-design finding with its shrunk example. A failure without a known "
        "issue is confirmed through the library's normal entry point: for LangChain by "
        "`create_agent` with an `InMemorySaver` checkpointer (run by this script in each "
        "LangChain environment); the openai-agents, langmem and `llamaindex-summary` adapters "
        "already call the public entry points (`OpenAIResponsesCompactionSession."
        "run_compaction`, `asummarize_messages`, `ChatSummaryMemoryBuffer.get`); "
        "`llamaindex-memory` runs `Memory._manage_queue` (the step `aput_messages` runs after "
        "its write) and `adk` the runner's own post-invocation compaction step, and their "
        "findings scripts confirm through `Memory.put` and `Runner.run_async`. Of the other "
        "adapters, `semantic-kernel` calls `ChatHistorySummarizationReducer.reduce` and "
        "`agno` `Agent.acompact`, both public; `strands` runs the agent's overflow recovery "
        "step (`reduce_context`, then the session sync) and `pydantic-ai` the docs' processor "
        "as `ProcessHistory` runs it, and their findings scripts confirm through "
        "`Agent.invoke_async` with a `FileSessionManager` and `Agent.run` with "
        "`ProcessHistory`. The AutoGen contexts have no summarizer: their rows show what each "
        "view keeps. The ones ready to file upstream have a page with a reproduction script "
        "under [findings](findings/index.md).",
        "",
        "| library | version | adapter | writers | property | verdict | minimal example | known "
        "issue |",
        "|---|---|---|---|---|---|---|---|",
    ]
    for rep in reports:
        lib, version = rep["matrix"]["library"], rep["matrix"]["version"]
        rows = [(v, False) for v in rep["verdicts"]]
        if rep.get("several_writers"):
            rows += [(v, True) for v in rep["several_writers"]["verdicts"]]
        for v, several in rows:
            if v["verdict"] not in ("fail", "by design", "error"):
                continue
            example = "<br>".join(f"`{s}`" for s in v.get("example") or [])
            issue = (
                known_issue(lib, v["id"], version, v["message"] or "")
                if v["verdict"] == "fail"
                else None
            )
            if issue:
                issue_text = _issue_link(issue)
            elif v["verdict"] == "by design":
                issue_text = "by design: " + v["reason"]
            else:
                issue_text = _confirmation(rep, v["id"], several)
            lines.append(
                f"| {lib} | {version} | {rep['adapter']} | {'two' if several else 'one'} | "
                f"[{v['id']}](../reference/requirements.md#{v['id']}) {_cell(v['title'])} | "
                f"{v['verdict']} | {_cell(v['message'])}<br>{example} | {_cell(issue_text)} |"
            )
    lines += [
        "",
        "## Summarizer outcomes reached",
        "",
        "Calls that really reached the scripted summarizer over the whole search, by outcome "
        "(retries count once each; `hold` counts calls held in flight, `hold→X` how they "
        "were released).",
        "",
    ]
    lines += ["| adapter | version | outcomes that reached the summarizer |", "|---|---|---|"]
    for rep in reports:
        reached = ", ".join(f"{k} {n}" for k, n in rep["summarizer_reached"].items())
        lines.append(f"| {rep['adapter']} | {rep['matrix']['version']} | {reached} |")
    text = "\n".join(lines) + "\n"
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(text, encoding="utf-8")
    return text


def _row_key(report: dict[str, Any]) -> tuple[str, str, str]:
    return (report["matrix"]["library"], report["matrix"]["version"], report["adapter"])


# the page's row order: MATRIX's cells, each cell's adapters in order
_ORDER = {
    (c.library, c.version, a): i
    for i, (c, a) in enumerate((c, a) for c in MATRIX for a in c.adapters)
}


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m benchmarks.safety_matrix")
    parser.add_argument("--only", help="only this library")
    parser.add_argument("--versions", help="only these releases (comma-separated)")
    parser.add_argument(
        "--adapter", help="only this adapter (its rows; with --merge the others are kept)"
    )
    parser.add_argument("--workdir", help="where the venvs go (default: a temporary directory)")
    parser.add_argument("--examples", type=int, default=30)
    parser.add_argument("--out", default=str(ROOT / "docs" / "safety" / "results.md"))
    parser.add_argument("--json", help="also write every report into this JSON file")
    parser.add_argument("--source", default=str(ROOT), help="the jfsm checkout to install")
    parser.add_argument(
        "--merge", help="a --json file of an earlier run: keep its rows that were not run again"
    )
    parser.add_argument(
        "--only-page", action="store_true", help="run nothing: rewrite the page from --merge"
    )
    args = parser.parse_args(argv)
    versions = set(args.versions.split(",")) if args.versions else None
    workdir = Path(args.workdir or tempfile.mkdtemp(prefix="jfsm-safety-"))
    reports: list[dict[str, Any]] = []
    for cell in MATRIX:
        if args.only_page or (args.only and cell.library != args.only):
            continue
        if versions is not None and cell.version not in versions:
            continue
        if args.adapter and args.adapter not in cell.adapters:
            continue
        chosen = (args.adapter,) if args.adapter else None
        reports += run_cell(cell, workdir, args.examples, Path(args.source), adapters=chosen)
    if args.merge:
        rerun = {_row_key(r) for r in reports}
        earlier = json.loads(Path(args.merge).read_text("utf-8"))
        reports += [r for r in earlier if _row_key(r) not in rerun and _row_key(r) in _ORDER]
        reports.sort(key=lambda r: _ORDER.get(_row_key(r), 99))
    whys = {(c.library, c.version): c.why for c in MATRIX}
    for report in reports:  # the current MATRIX names each release (merged ones too)
        key = (report["matrix"]["library"], report["matrix"]["version"])
        report["matrix"]["why"] = whys.get(key, report["matrix"]["why"])
    write_results(reports, Path(args.out))
    if args.json:
        Path(args.json).write_text(json.dumps(reports, ensure_ascii=False, indent=1), "utf-8")
    print(f"wrote {args.out}", file=sys.stderr)
    return 0


if __name__ == "__main__":
    sys.exit(main())
