"""The conformance report: JSON for machines, Markdown for people, a summary for the terminal,
JUnit XML for CI, and GitHub annotations.

Every format says what was exercised (`RunResult.exercised`: how often each machine rule,
session step, compress.v2 reply and compression outcome happened), so a pass is never empty.

Every format is rendered from the same `RunResult` and its verdict rows: a verdict, its
`why` and `reason`, and the first failure's blame (`first_failure`) read the same in JSON,
Markdown, JUnit XML, GitHub annotations and on the terminal. A run still going writes a
partial report whose not-covered rows say "not reached yet".

- `report.json` (`to_json`): the verdicts, the judges and what was exercised, for machines;
- `report.md` (`to_markdown`): the same for people, with the rule and workers tables;
- the terminal (`summary_lines`): the harness error first, then the first failures, the
  not-covered lines with their reasons, and the counts;
- JUnit XML (`to_junit`) and GitHub annotations (`github_annotations`) for CI.

**The one concept:** one run's result rendered for its readers; the formats stay together
so that no format can say something another does not.
"""

from __future__ import annotations

import json
import os
import re
import shlex
import sys
from collections import Counter
from pathlib import Path
from typing import Any
from xml.etree import ElementTree as ET

from jfsm_conformance.run.model import selected
from jfsm_conformance.run.runner import (
    DEFAULT_DRIVER,
    DEFAULT_DRIVER_NOTE,
    RunResult,
    implementation_label,
)

__all__ = [
    "EXERCISE_KINDS",
    "FIRST_FAILURES_SHOWN",
    "first_failure",
    "first_failure_lines",
    "github_annotations",
    "invoked_as",
    "replay_command",
    "summary_lines",
    "to_json",
    "to_junit",
    "to_markdown",
    "unjudged_lines",
    "verdict_lines",
    "versions",
    "workers_table",
    "write_junit",
    "write_report",
]

EXERCISE_KINDS = {
    "rule": "machine rules called",
    "rule_idle": "machine rules that found nothing to do (no step ran; among the calls above)",
    "step": "session steps run (scenarios and machines)",
    "message": "protocol messages sent to the driver, by op",
    "reply": "compress.v2 replies served by the fake",
    "outcome": "compressions settled, by outcome",
    "kill": "kills (SIGKILL or an injected crash), by the state reopened",
    "workers": "the workers machine's events, per worker (opens, takeovers, refusals...)",
}
FAKE_NOTE = (
    "The fake compress.v2 refuses, fails, holds and garbles replies on purpose; log lines "
    "about those (WARNING ... outcome=refused/transport/...) are expected."
)


FIRST_FAILURES_SHOWN = 3  # failures the terminal shows in full (message, diff, trace, replay)
_MESSAGE_LINES = 30  # lines of a failure's message (its diff included) the terminal shows
_MESSAGE_CHARS = 3000


def invoked_as() -> str:
    """The words the user typed to start `jfsm`, as a shell command: `uvx --from SPEC jfsm`,
    `uv run --project DIR jfsm` when uv started this process (read from the parent's command
    line on Linux), else `jfsm`. Never raises."""
    try:
        with open(f"/proc/{os.getppid()}/cmdline", "rb") as f:
            parent = [a.decode("utf-8", "surrogateescape") for a in f.read().split(b"\0")[:-1]]
    except OSError:
        return "jfsm"
    ours = sys.argv[1:]
    if not sys.argv or os.path.basename(sys.argv[0]) != "jfsm":
        return "jfsm"  # not the `jfsm` command (pytest, an embedding): the plain command
    if not parent or os.path.basename(parent[0]) not in ("uv", "uvx") or len(parent) <= len(ours):
        return "jfsm"
    if ours and parent[-len(ours) :] != ours:
        return "jfsm"
    words = parent[: len(parent) - len(ours)]
    if os.path.basename(words[-1]) != "jfsm":
        return "jfsm"
    words[0] = os.path.basename(words[0])
    if words[:3] == ["uv", "tool", "uvx"]:  # how `uvx` runs a tool
        words[:3] = ["uvx"]
    return shlex.join(words)


def replay_command(trace: str) -> str:
    """The shell command that replays `trace` (quoted for any POSIX shell), started the way
    this run was (`invoked_as`)."""
    return f"{invoked_as()} conformance replay {shlex.quote(trace)}"


def versions() -> dict[str, str]:
    """The suite's, the spec's and the engine's versions. The suite ships in the `jfsm`
    distribution, so its version is that distribution's (decision R84)."""
    from importlib.metadata import PackageNotFoundError, version

    from jfsm.spec import constants

    try:
        installed = version("jfsm")
    except PackageNotFoundError:  # run from a checkout that was never installed
        installed = "unknown"
    return {"suite": installed, "spec": constants().spec_version, "jfsm": installed}


def first_failure(result: RunResult) -> dict[str, Any] | None:
    """The run's first failure (in the order the run met them): the requirement IDs, where
    (scenario or machine), the check, the message, the trace and its replay command; or None."""
    failing = _run_failures(result)
    if not failing:
        return None
    f = failing[0]
    return {
        "ids": list(f.ids),
        "source": f.source,
        "check": f.check,
        "message": f.message,
        "trace": f.trace,
        "replay": replay_command(f.trace) if f.trace else None,
    }


def _run_failures(result: RunResult) -> list[Any]:
    """The failures that fail the run: those blaming an ID not listed as expected, and, with
    a `--select`, a selected one (or a row of the driver protocol): a check that also saw
    an unselected requirement fail is not shown nor counted (R197)."""
    expected = result.options.expected_failures
    select = result.options.select

    def counts(rid: str) -> bool:
        return rid not in expected and (not rid.startswith("JF-") or selected(rid, select))

    return [f for f in result.failures if any(counts(i) for i in f.ids)]


def _bounded(message: str) -> list[str]:
    lines = message[:_MESSAGE_CHARS].splitlines()
    cut = len(message) > _MESSAGE_CHARS or len(lines) > _MESSAGE_LINES
    lines = lines[:_MESSAGE_LINES]
    if cut:
        lines.append(f"… ({len(message.splitlines())} lines in all; the report has the whole)")
    return lines


def first_failure_lines(result: RunResult, shown: int = FIRST_FAILURES_SHOWN) -> list[str]:
    """The terminal's account of the first `shown` failures: IDs, where, the message with its
    diff (bounded: `_MESSAGE_LINES` lines), the trace and the command that replays it."""
    out: list[str] = []
    failing = _run_failures(result)
    for n, f in enumerate(failing[:shown], start=1):
        out += ["", f"Failure {n} of {len(failing)}: [{', '.join(f.ids)}] {f.source}"]
        out.append(f"  check {f.check}")
        out += ["    " + line for line in _bounded(f.message)]
        if f.trace:
            out += [f"  trace:  {f.trace}", f"  replay: {replay_command(f.trace)}"]
    if len(failing) > shown:
        out += ["", f"{len(failing) - shown} more failure(s): see the report"]
    return out


def verdict_lines(result: RunResult) -> list[str]:
    """One line per requirement: verdict, ID and title, and for one not covered why, in a
    few words. A harness error comes first; when it stopped the run before anything was
    judged, the verdicts are one line (decision R147)."""
    out = []
    if result.harness_error:
        out.append(f"HARNESS ERROR: {result.harness_error.splitlines()[0]}")
        if not any(v["verdict"] != "not covered" for v in result.verdicts):
            return [
                *out,
                f"{len(result.verdicts)} requirements not judged: the run stopped before it "
                "judged any (the harness error above)",
            ]
    for v in result.verdicts:
        line = f"{v['verdict'].upper():12} {v['id']}  {v['title']}"
        if v["verdict"] == "not covered" and v.get("why"):
            line += f"  ({v['why']})"
        out.append(line)
    return out


def unjudged_lines(result: RunResult) -> list[str]:
    """For a `--select`: one line per reason the driver controls (a capability it lacks or
    an op it does not support, its transport) naming the selected requirements it left not
    covered; and a line when the selection judged nothing (decision R142)."""
    if not result.options.select:
        return []
    by_why: dict[str, list[str]] = {}
    for v in result.verdicts:
        why = v.get("why") or ""
        if v["verdict"] == "not covered" and why.startswith(("needs ", "op ")):
            by_why.setdefault(why, []).append(v["id"])
    out = [f"Selected, not judged ({why}): {', '.join(ids)}" for why, ids in sorted(by_why.items())]
    if result.judged_nothing:
        out.append(f"JUDGED NOTHING: {result.judged_nothing}")
    return out


def to_json(result: RunResult) -> dict[str, Any]:
    counts = Counter(v["verdict"] for v in result.verdicts)
    return {
        "format": "jfsm-conformance-report/1",
        "first_failure": first_failure(result),
        "versions": versions(),
        "command": result.options.command or None,
        "driver": result.options.driver,
        "profile": result.options.profile,
        "select": result.options.select or None,
        "implementation": result.implementation,
        "implementation_label": implementation_label(result.implementation),
        "capabilities": result.capabilities,
        "exit_code": result.exit_code,
        "partial": result.partial,
        "interrupted": result.interrupted,
        "phase": result.phase,
        "harness_error": result.harness_error,
        "judged_nothing": result.judged_nothing,
        "counts": dict(counts),
        "durations_s": {k: round(v, 2) for k, v in result.durations.items()},
        "exercised": result.exercised,
        "skipped": result.skipped,
        "companions": result.companions,
        "judges": [
            {"what": j.what, "status": j.status, "why": j.why or None, "ids": sorted(j.ids)}
            for j in result.judges
        ],
        "verdicts": result.verdicts,
        "driver_log": result.driver_log.splitlines()[-40:],
    }


def to_markdown(result: RunResult) -> str:
    counts = Counter(v["verdict"] for v in result.verdicts)
    lines = ["# jfsm conformance report", ""]
    first = first_failure(result)
    if first is not None:
        lines += [
            f"**First failure**: [{', '.join(first['ids'])}] in {first['source']}, "
            f"check `{first['check']}`",
            "",
            "```",
            *_bounded(first["message"]),
            "```",
            "",
        ]
        if first["trace"]:
            lines += [f"trace: `{first['trace']}`; replay: `{first['replay']}`", ""]
    ver = versions()
    lines += [
        f"- versions: suite {ver['suite']}, spec {ver['spec']}, jfsm {ver['jfsm']}",
        *([f"- command: `{result.options.command}`"] if result.options.command else []),
        f"- driver: `{result.options.driver}`",
        f"- implementation: {implementation_label(result.implementation)}",
        f"- profile: {result.options.profile}"
        + (f", select `{result.options.select}`" if result.options.select else ""),
        "- verdicts: " + ", ".join(f"{k} {n}" for k, n in sorted(counts.items())),
        f"- exit code: {result.exit_code}",
    ]
    if result.options.driver == DEFAULT_DRIVER:
        lines.append(f"- note: {DEFAULT_DRIVER_NOTE}")
    for label, what in result.companions.items():
        lines.append(f"- companion {label}: {what} (the reference's own process, R92)")
    if result.interrupted:
        lines += ["", f"**Interrupted** (Ctrl-C or SIGTERM) after {result.phase}."]
    if result.partial:
        lines += [
            "",
            f"**Partial report**: the run has not finished (last phase reached: {result.phase}). "
            "Requirements not reached yet read `not covered`.",
        ]
    if result.harness_error:
        lines += ["", "## Harness error", "", "```", result.harness_error, "```"]
    if result.judged_nothing:
        lines += ["", f"**Judged nothing**: {result.judged_nothing}."]
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
                        f"  trace: `{f['trace']}` (replay: `{replay_command(f['trace'])}`)"
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
        if v["verdict"] == "not covered" and v.get("why") and v["why"] not in detail:
            detail = f"{v['why']}: {detail}"
        detail = detail.replace("|", "\\|").replace("\n", " ")
        lines.append(f"| {v['id']} | {v['level']} | {v['verdict']} | {v['title']} | {detail} |")
    lines += exercised_markdown(result)
    if result.driver_log.strip() and result.exit_code != 0:
        lines += [
            "",
            "## Driver log (tail)",
            "",
            FAKE_NOTE,
            "",
            "```",
            *result.driver_log.splitlines()[-30:],
            "```",
        ]
    return "\n".join(lines) + "\n"


def exercised_markdown(result: RunResult) -> list[str]:
    """The "what was exercised" section: one table per kind, plus what was skipped."""
    lines = ["", "## What was exercised", ""]
    if not any(result.exercised.values()):
        lines.append("Nothing: no step ran, so no verdict above rests on an observation.")
    lines += rule_table(result.exercised)
    lines += workers_table(result.exercised)
    for kind, title in EXERCISE_KINDS.items():
        counts = result.exercised.get(kind) or {}
        if not counts or kind == "workers":
            continue
        lines += [f"{title} ({sum(counts.values())}):", ""]
        lines.append(", ".join(f"`{name}` {n}" for name, n in counts.items()))
        lines.append("")
    if result.skipped:
        lines += ["Skipped:", ""]
        lines += [f"- {what}: {why}" for what, why in sorted(result.skipped.items())]
    return lines


def rule_table(exercised: dict[str, dict[str, int]]) -> list[str]:
    """Markdown table: per machine rule, how often it was called, ran (did a step) and its
    share of the rules that ran."""
    called = exercised.get("rule") or {}
    if not called:
        return []
    idle = exercised.get("rule_idle") or {}
    ran = {name: n - idle.get(name, 0) for name, n in called.items()}
    total = sum(ran.values()) or 1
    lines = ["Machine rules (a rule that ran did one verified step):", ""]
    lines += ["| rule | called | ran | share of steps |", "|---|---|---|---|"]
    for name, n in called.items():
        lines.append(f"| `{name}` | {n} | {ran[name]} | {100 * ran[name] / total:.1f}% |")
    return [*lines, ""]


def workers_table(exercised: dict[str, dict[str, int]]) -> list[str]:
    """Markdown table: what the workers machine made each worker do (kind `workers`, names
    "worker-N what")."""
    counts = exercised.get("workers") or {}
    if not counts:
        return []
    rows: dict[str, dict[str, int]] = {}
    for name, n in counts.items():
        worker, _, what = name.partition(" ")
        rows.setdefault(worker, {})[what] = n
    columns = sorted({what for row in rows.values() for what in row})
    lines = ["Workers machine, per worker:", ""]
    lines += ["| worker | " + " | ".join(columns) + " |", "|---" * (len(columns) + 1) + "|"]
    for worker in sorted(rows, key=lambda w: int(w.rpartition("-")[2] or 0)):
        lines.append(
            f"| {worker} | " + " | ".join(str(rows[worker].get(c, 0)) for c in columns) + " |"
        )
    return [*lines, ""]


def write_report(result: RunResult, directory: Path) -> tuple[Path, Path]:
    """Write `report.json` and `report.md` atomically (a temporary file renamed over the old
    one), so a reader, or a run killed mid-write, never sees half a report."""
    directory.mkdir(parents=True, exist_ok=True)
    json_path = directory / "report.json"
    md_path = directory / "report.md"
    _atomic_write(json_path, json.dumps(to_json(result), ensure_ascii=False, indent=1))
    _atomic_write(md_path, to_markdown(result))
    return json_path, md_path


def _atomic_write(path: Path, text: str) -> None:
    temporary = path.with_name(f".{path.name}.{os.getpid()}.tmp")
    temporary.write_text(text, encoding="utf-8")
    os.replace(temporary, path)


def summary_lines(result: RunResult) -> list[str]:
    counts = Counter(v["verdict"] for v in result.verdicts)
    out = ["", "Verdicts: " + ", ".join(f"{k} {n}" for k, n in sorted(counts.items()))]
    for kind in ("rule", "outcome", "kill"):
        got = result.exercised.get(kind) or {}
        if got:
            out.append(
                f"Exercised {EXERCISE_KINDS[kind]}: "
                + ", ".join(f"{name} {n}" for name, n in got.items())
            )
    if not any(result.exercised.values()) and not result.harness_error:
        out.append("Exercised: nothing ran (every verdict is 'not covered')")
    for v in result.verdicts:
        if v["verdict"] in ("fail", "xpass"):
            first = v["failures"][0] if v["failures"] else None
            why = first["message"].splitlines()[0][:160] if first else v.get("reason", "")
            out.append(f"  {v['verdict'].upper():6} {v['id']}  {v['title']}: {why}")
    out += unjudged_lines(result)
    if result.interrupted:
        out.append(f"INTERRUPTED: {result.harness_error or result.phase} (exit 130)")
    elif result.harness_error:
        out.append(f"HARNESS ERROR: {result.harness_error.splitlines()[0]}")
    return out


_NOT_XML = re.compile("[^\t\n\r\x20-\ud7ff\ue000-\ufffd\U00010000-\U0010ffff]")


def _xml(text: str) -> str:
    """`text` with characters XML 1.0 cannot hold (C0 controls, lone surrogates, U+FFFE/F)
    written as `\\uXXXX`."""
    return _NOT_XML.sub(lambda m: f"\\u{ord(m.group()):04x}", text)


def _failure_text(v: dict[str, Any]) -> str:
    parts = []
    for f in v["failures"]:
        parts.append(f"{f['source']} / check {f['check']}:\n{f['message']}")
        if f.get("trace"):
            parts.append(f"trace: {f['trace']}\nreplay: {replay_command(f['trace'])}")
    return "\n\n".join(parts)


def to_junit(result: RunResult) -> str:
    """JUnit XML: one `testcase` per requirement (classname `jfsm.conformance.AREA`); a failed
    requirement has a `failure` with the suite's message (what was expected, what was got)
    and the replay command; not covered and expected failures are `skipped` with the
    reason; a harness error, or a selection that judged nothing, is one extra `testcase` with
    an `error`."""
    counts = Counter(v["verdict"] for v in result.verdicts)
    failures = counts["fail"]
    skipped = counts["not covered"] + counts["xfail"]
    problem = result.harness_error or result.judged_nothing  # exit 2: an error case (R142)
    errors = 1 if problem else 0
    total_time = sum(result.durations.values())
    suites = ET.Element("testsuites", name="jfsm conformance")
    suite = ET.SubElement(
        suites,
        "testsuite",
        name="jfsm-conformance",
        tests=str(len(result.verdicts) + errors),
        failures=str(failures),
        errors=str(errors),
        skipped=str(skipped),
        time=f"{total_time:.3f}",
    )
    props = ET.SubElement(suite, "properties")
    for name, value in (
        ("driver", result.options.driver),
        ("implementation", implementation_label(result.implementation)),
        ("profile", result.options.profile),
        ("select", result.options.select),
    ):
        ET.SubElement(props, "property", name=name, value=_xml(value))
    if problem:
        name, kind = (
            ("harness", "HarnessError") if result.harness_error else ("selection", "JudgedNothing")
        )
        case = ET.SubElement(suite, "testcase", name=name, classname="jfsm.conformance", time="0")
        error = ET.SubElement(case, "error", message=_xml(problem.splitlines()[0]), type=kind)
        error.text = _xml(problem)
    for v in result.verdicts:
        area = v["id"].split("-")[1] if v["id"].startswith("JF-") else "driver"
        case = ET.SubElement(
            suite,
            "testcase",
            name=_xml(f"{v['id']} {v['title']}"),
            classname=f"jfsm.conformance.{area}",
            time="0",
        )
        verdict = v["verdict"]
        if verdict == "fail":
            first = v["failures"][0]["message"].splitlines()[0] if v["failures"] else ""
            failure = ET.SubElement(
                case, "failure", message=_xml(first[:300]), type=v["failures"][0]["check"]
            )
            failure.text = _xml(_failure_text(v))
        elif verdict == "xfail":
            ET.SubElement(case, "skipped", message=_xml(f"expected failure: {v.get('reason')}"))
        elif verdict == "not covered":
            why = f" ({v['why']})" if v.get("why") else ""
            message = f"not covered{why}: {v.get('reason') or ''}"
            ET.SubElement(case, "skipped", message=_xml(message))
        elif verdict == "xpass":
            out = ET.SubElement(case, "system-out")
            out.text = _xml(v.get("reason") or "listed as an expected failure but passed")
    ET.indent(suites)
    return ET.tostring(suites, encoding="unicode", xml_declaration=True) + "\n"


def write_junit(result: RunResult, path: Path) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(to_junit(result), encoding="utf-8")
    return path


def _escape_data(text: str) -> str:
    return text.replace("%", "%25").replace("\r", "%0D").replace("\n", "%0A")


def _escape_property(text: str) -> str:
    return _escape_data(text).replace(":", "%3A").replace(",", "%2C")


def github_annotations(result: RunResult) -> list[str]:
    """GitHub Actions workflow commands (`::error title=...::message`), one per failed
    requirement and one for a harness error; print them to stdout in a workflow step."""
    out = []
    if result.harness_error:
        out.append(
            f"::error title={_escape_property('jfsm conformance: harness error')}::"
            + _escape_data(result.harness_error)
        )
    if result.judged_nothing:
        out.append(
            f"::error title={_escape_property('jfsm conformance: judged nothing')}::"
            + _escape_data(result.judged_nothing)
        )
    for v in result.verdicts:
        if v["verdict"] != "fail":
            continue
        title = _escape_property(f"{v['id']} {v['title']}")
        out.append(f"::error title={title}::" + _escape_data(_failure_text(v)[:4000]))
    return out
