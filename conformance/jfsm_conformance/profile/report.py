"""The profile's report: JSON for machines, Markdown for people, JUnit XML for CI, and a
summary for the terminal. One row per property (requirement ID)."""

from __future__ import annotations

import json
from collections import Counter
from pathlib import Path
from typing import Any
from xml.etree import ElementTree as ET

from .runner import TRACE_FORMAT, ProfileResult

__all__ = ["summary_lines", "to_json", "to_junit", "to_markdown", "write_report", "write_traces"]


def to_json(result: ProfileResult) -> dict[str, Any]:
    scope = result.scope
    rec = result.recorder
    return {
        "format": "jfsm-profile-report/1",
        "adapter": result.options.adapter,
        "scope": None
        if scope is None
        else {
            "library": scope.library,
            "version": scope.version,
            "entry_point": scope.entry_point,
            "writers": scope.writers,
            "writers_claim": scope.writers_claim,
            "failures": sorted(scope.failures),
            "storage": scope.storage,
            "hold": scope.hold,
            "by_design": scope.by_design,
            "not_applicable": scope.not_applicable,
            "notes": list(scope.notes),
        },
        "exit_code": result.exit_code,
        "harness_error": result.harness_error,
        "examples": result.options.examples,
        "steps": result.options.steps,
        "searches": result.searches,
        "duration_s": round(result.duration_s, 2),
        "counts": dict(Counter(v["verdict"] for v in result.verdicts)),
        "summarizer_reached": dict(sorted(rec.reached.items())),
        "outcomes_requested": dict(sorted(rec.requested.items())),
        "adapter_raised": dict(sorted(rec.raised.items())),
        "library_warnings": dict(rec.warnings.most_common()),
        "verdicts": result.verdicts,
        "several_writers": None if result.several is None else _dimension_json(result.several),
    }


def _dimension_json(result: ProfileResult) -> dict[str, Any]:
    """The several-writers search of a `multi` adapter: its own verdicts and counts."""
    rec = result.recorder
    return {
        "exit_code": result.exit_code,
        "harness_error": result.harness_error,
        "searches": result.searches,
        "duration_s": round(result.duration_s, 2),
        "counts": dict(Counter(v["verdict"] for v in result.verdicts)),
        "summarizer_reached": dict(sorted(rec.reached.items())),
        "outcomes_requested": dict(sorted(rec.requested.items())),
        "adapter_raised": dict(sorted(rec.raised.items())),
        "library_warnings": dict(rec.warnings.most_common()),
        "verdicts": result.verdicts,
    }


_SHOWN_WARNINGS = 20


def _cell(text: object) -> str:
    return str(text or "").replace("|", "\\|").replace("\n", " ")


def to_markdown(result: ProfileResult) -> str:
    data = to_json(result)
    scope = data["scope"] or {}
    lines = [
        f"# jfsm profile report: {result.options.adapter}",
        "",
        f"- library: {scope.get('library', '?')} {scope.get('version', '')}",
        f"- entry point: `{scope.get('entry_point', '?')}`",
        f"- scope: {scope.get('writers', '?')} writer(s), storage {scope.get('storage', '?')}, "
        f"provider failures {', '.join(scope.get('failures', [])) or 'none'}, "
        f"hold {'yes' if scope.get('hold') else 'no'}",
        "- verdicts: " + ", ".join(f"{k} {n}" for k, n in sorted(data["counts"].items())),
        "- summarizer reached: "
        + (", ".join(f"{k} {n}x" for k, n in data["summarizer_reached"].items()) or "never"),
        f"- exit code: {result.exit_code}",
    ]
    lines += [f"- note: {n}" for n in scope.get("notes", [])]
    if result.harness_error:
        lines += ["", "## Harness error", "", "```", result.harness_error, "```"]
    lines += [
        "",
        "## Verdict per property",
        "",
        "| ID | check | verdict | detail |",
        "|---|---|---|---|",
    ]
    for v in result.verdicts:
        detail = v["reason"] or v["message"] or f"{v['evaluations']} checks"
        lines.append(f"| {v['id']} | `{v['check']}` | {v['verdict']} | {_cell(detail)} |")
    several = result.several
    if several is not None:
        lines += [
            "",
            "## Verdict per property, two overlapping writers",
            "",
            f"The library lets two runs share a session ({_cell(scope.get('writers_claim'))}): "
            "searched again with a second writer appending while the first one's summarizer "
            "call is held.",
            "",
            "| ID | check | verdict | detail |",
            "|---|---|---|---|",
        ]
        for v in several.verdicts:
            detail = v["reason"] or v["message"] or f"{v['evaluations']} checks"
            lines.append(f"| {v['id']} | `{v['check']}` | {v['verdict']} | {_cell(detail)} |")
    shown = [v for v in result.verdicts if v["example"]]
    shown += [
        {**v, "title": v["title"] + " (two overlapping writers)"}
        for v in (several.verdicts if several is not None else [])
        if v["example"]
    ]
    if shown:
        lines += ["", "## Minimal examples", ""]
        for v in shown:
            lines += [f"### {v['id']} ({v['verdict']}): {v['title']}", "", v["message"], "", "```"]
            lines += v["example"]
            lines += ["```", ""]
            if v.get("trace_path"):
                replay = f"jfsm profile replay {v['trace_path']}"
                lines += [f"Replay: `{replay}`", ""]
    said = result.recorder.warnings
    if said:
        lines += [
            "",
            "## The library's warnings and log records",
            "",
            f"Captured during the search ({sum(said.values())} in all, {len(said)} distinct), "
            "most frequent first:",
            "",
            "| count | warning or log record |",
            "|---|---|",
        ]
        common = said.most_common(_SHOWN_WARNINGS)
        lines += [f"| {n} | {_cell(text)} |" for text, n in common]
        if len(said) > len(common):
            lines.append(f"| ... | {len(said) - len(common)} more distinct, in profile.json |")
    return "\n".join(lines) + "\n"


def to_junit(result: ProfileResult) -> str:
    """JUnit XML: one `testsuite` per search. An adapter searched with several writers gets a
    `testsuites` root holding both, the second named `….several-writers`, and its totals are
    the sum of the two, so a CI that reads only the root's counts sees every failure."""
    first = _junit_suite(result, result.options.adapter)
    if result.several is None:
        return ET.tostring(first, encoding="unicode")
    second = _junit_suite(result.several, f"{result.options.adapter}.several-writers")
    root = ET.Element("testsuites", name=f"jfsm-profile.{result.options.adapter}")
    for key in ("tests", "failures", "errors", "skipped"):
        root.set(key, str(int(first.get(key, "0")) + int(second.get(key, "0"))))
    root.set("time", f"{result.duration_s:.2f}")
    root.extend([first, second])
    return ET.tostring(root, encoding="unicode")


def _junit_suite(result: ProfileResult, name: str) -> ET.Element:
    suite = ET.Element(
        "testsuite",
        name=f"jfsm-profile.{name}",
        tests=str(len(result.verdicts)),
        failures=str(sum(v["verdict"] == "fail" for v in result.verdicts)),
        errors=str(sum(v["verdict"] == "error" for v in result.verdicts)),
        skipped=str(
            sum(v["verdict"] in ("not applicable", "not exercised") for v in result.verdicts)
        ),
        time=f"{result.duration_s:.2f}",
    )
    for v in result.verdicts:
        case = ET.SubElement(suite, "testcase", classname=f"profile.{name}", name=v["id"])
        body = (v["message"] or "") + "\n" + "\n".join(v["example"] or [])
        if v["verdict"] == "fail":
            ET.SubElement(case, "failure", message=v["message"] or "").text = body
        elif v["verdict"] == "error":
            ET.SubElement(case, "error", message=v["reason"] or "").text = result.harness_error
        elif v["verdict"] in ("not applicable", "not exercised"):
            ET.SubElement(case, "skipped", message=v["reason"] or "")
        elif v["verdict"] == "by design":
            ET.SubElement(case, "system-out").text = f"by design: {v['reason']}\n{body}"
    return suite


def write_traces(result: ProfileResult, directory: Path) -> None:
    """One replayable trace per violated property, `traces/<ID>.json` (the several-writers
    search's under `traces/several-writers/`), each naming the dimension it was recorded in;
    each verdict row gets its path (`jfsm profile replay PATH`)."""
    dimensions = [(result, "traces", result.writers)]
    if result.several is not None:
        dimensions.append((result.several, "traces/several-writers", "multi"))
    for dimension, folder, writers in dimensions:
        _write_dimension_traces(result, dimension.verdicts, directory / folder, writers)


def _write_dimension_traces(
    result: ProfileResult, verdicts: list[dict[str, Any]], folder: Path, writers: str
) -> None:
    for v in verdicts:
        if not v.get("trace"):
            continue
        path = folder / f"{v['id']}.json"
        path.parent.mkdir(parents=True, exist_ok=True)
        trace = {
            "format": TRACE_FORMAT,
            "adapter": result.options.adapter,
            "property": v["id"],
            "message": v["message"],
            "writers": writers,
            "steps": v["trace"],
        }
        path.write_text(json.dumps(trace, ensure_ascii=False, indent=1), encoding="utf-8")
        v["trace_path"] = str(path)


def write_report(result: ProfileResult, directory: Path) -> tuple[Path, Path]:
    """Write `profile.json`, `profile.md` and the failing examples' traces into
    `directory` (made if missing); returns the report's two paths. Raises `OSError` if the
    directory cannot be written."""
    directory.mkdir(parents=True, exist_ok=True)
    write_traces(result, directory)
    json_path, md_path = directory / "profile.json", directory / "profile.md"
    json_path.write_text(json.dumps(to_json(result), ensure_ascii=False, indent=1), "utf-8")
    md_path.write_text(to_markdown(result), encoding="utf-8")
    return json_path, md_path


def summary_lines(result: ProfileResult) -> list[str]:
    counts = Counter(v["verdict"] for v in result.verdicts)
    out = ["", "Verdicts: " + ", ".join(f"{k} {n}" for k, n in sorted(counts.items()))]
    for v in result.verdicts:
        if v["verdict"] in ("fail", "by design", "error"):
            why = (v["message"] or v["reason"] or "").splitlines()[0][:150]
            out.append(f"  {v['verdict'].upper():9} {v['id']}  {v['title']}: {why}")
    if result.several is not None:
        many = result.several.verdicts
        counts = Counter(v["verdict"] for v in many)
        out.append(
            "Two overlapping writers: " + ", ".join(f"{k} {n}" for k, n in sorted(counts.items()))
        )
        for v in many:
            if v["verdict"] in ("fail", "by design", "error"):
                why = (v["message"] or v["reason"] or "").splitlines()[0][:150]
                out.append(f"  {v['verdict'].upper():9} {v['id']}  {v['title']}: {why}")
    said = result.recorder.warnings
    if said:
        out.append(
            f"library warnings and log records: {sum(said.values())} captured "
            f"({len(said)} distinct), listed in the report"
        )
    if result.harness_error:
        out.append(f"HARNESS ERROR: {result.harness_error.splitlines()[0]}")
    return out
