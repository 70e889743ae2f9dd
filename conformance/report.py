"""The conformance report: JSON for machines, Markdown for people, a summary for the terminal."""

from __future__ import annotations

import json
from collections import Counter
from pathlib import Path
from typing import Any

from conformance.runner import RunResult

__all__ = ["summary_lines", "to_json", "to_markdown", "write_report"]


def to_json(result: RunResult) -> dict[str, Any]:
    counts = Counter(v["verdict"] for v in result.verdicts)
    return {
        "format": "jfsm-conformance-report/1",
        "driver": result.options.driver,
        "profile": result.options.profile,
        "select": result.options.select or None,
        "implementation": result.implementation,
        "capabilities": result.capabilities,
        "exit_code": result.exit_code,
        "harness_error": result.harness_error,
        "counts": dict(counts),
        "durations_s": {k: round(v, 2) for k, v in result.durations.items()},
        "verdicts": result.verdicts,
        "driver_log": result.driver_log.splitlines()[-40:],
    }


def to_markdown(result: RunResult) -> str:
    counts = Counter(v["verdict"] for v in result.verdicts)
    lines = [
        "# jfsm conformance report",
        "",
        f"- driver: `{result.options.driver}`",
        f"- implementation: {result.implementation or 'unknown'}",
        f"- profile: {result.options.profile}"
        + (f", select `{result.options.select}`" if result.options.select else ""),
        "- verdicts: " + ", ".join(f"{k} {n}" for k, n in sorted(counts.items())),
        f"- exit code: {result.exit_code}",
    ]
    if result.harness_error:
        lines += ["", "## Harness error", "", "```", result.harness_error, "```"]
    failing = [v for v in result.verdicts if v["verdict"] in ("fail", "xfail")]
    if failing:
        lines += ["", "## Failures", ""]
        for v in failing:
            lines.append(f"### {v['id']} ({v['verdict']}): {v['title']}")
            if v.get("reason"):
                lines.append(f"Expected failure: {v['reason']}")
            for f in v["failures"][:3]:
                lines += ["", f"- {f['source']}, check `{f['check']}`", "", "  ```"]
                lines += ["  " + line for line in f["message"].splitlines()[:14]]
                lines += ["  ```"]
                if f.get("trace"):
                    lines.append(
                        f"  trace: `{f['trace']}` (replay: `jfsm conformance replay {f['trace']}`)"
                    )
            lines.append("")
    lines += [
        "",
        "## Verdict per requirement",
        "",
        "| ID | level | verdict | title | checks / reason |",
        "|---|---|---|---|---|",
    ]
    for v in result.verdicts:
        detail = (
            ", ".join(v.get("checks", []))
            if v["verdict"] in ("pass", "fail")
            else (v.get("reason") or "")
        )
        detail = detail.replace("|", "\\|").replace("\n", " ")
        lines.append(f"| {v['id']} | {v['level']} | {v['verdict']} | {v['title']} | {detail} |")
    if result.driver_log.strip():
        lines += [
            "",
            "## Driver log (tail)",
            "",
            "```",
            *result.driver_log.splitlines()[-30:],
            "```",
        ]
    return "\n".join(lines) + "\n"


def write_report(result: RunResult, directory: Path) -> tuple[Path, Path]:
    directory.mkdir(parents=True, exist_ok=True)
    json_path = directory / "report.json"
    md_path = directory / "report.md"
    json_path.write_text(
        json.dumps(to_json(result), ensure_ascii=False, indent=1), encoding="utf-8"
    )
    md_path.write_text(to_markdown(result), encoding="utf-8")
    return json_path, md_path


def summary_lines(result: RunResult) -> list[str]:
    counts = Counter(v["verdict"] for v in result.verdicts)
    out = ["", "Verdicts: " + ", ".join(f"{k} {n}" for k, n in sorted(counts.items()))]
    for v in result.verdicts:
        if v["verdict"] in ("fail", "xpass"):
            first = v["failures"][0] if v["failures"] else None
            why = first["message"].splitlines()[0][:160] if first else v.get("reason", "")
            out.append(f"  {v['verdict'].upper():6} {v['id']}  {v['title']}: {why}")
    if result.harness_error:
        out.append(f"HARNESS ERROR: {result.harness_error.splitlines()[0]}")
    return out
