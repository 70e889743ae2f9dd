"""`jfsm conformance`: run the suite and write the per-requirement report.

```
jfsm conformance [--driver SPEC] [--profile quick|standard|thorough] [--select PREFIX]
                 [--expected-failures FILE] [--report-dir DIR] [--seed N] [--[no-]shrink]
jfsm conformance replay TRACE [--driver SPEC]
```

Exit codes: 0 every covered requirement passed, 1 a requirement failed (or a trace still
fails), 2 harness error (the driver could not be started, died or stopped answering; bad
usage).
"""

from __future__ import annotations

import argparse
import json
import sys
import tomllib
from pathlib import Path

__all__ = ["load_expected_failures", "main"]


def load_expected_failures(path: str) -> dict[str, str]:
    """Entries `{id, reason}` from a JSON list (or `{"failures": [...]}`) or a TOML file with
    `[[failure]]` tables; returns id -> reason."""
    text = Path(path).read_text(encoding="utf-8")
    data = tomllib.loads(text) if path.endswith(".toml") else json.loads(text)
    if isinstance(data, dict):
        data = data.get("failure") or data.get("failures") or data.get("expected_failures") or []
    out = {}
    for entry in data:
        if not isinstance(entry, dict) or "id" not in entry or "reason" not in entry:
            raise ValueError(f"{path}: every entry needs an id and a reason: {entry!r}")
        out[str(entry["id"])] = str(entry["reason"])
    return out


def build_parser() -> argparse.ArgumentParser:
    from conformance.runner import DEFAULT_DRIVER, PROFILES

    parser = argparse.ArgumentParser(prog="jfsm conformance", description=__doc__.split("\n\n")[0])
    parser.add_argument(
        "--driver",
        default=DEFAULT_DRIVER,
        help="python:MODULE:FACTORY, stdio:COMMAND or http:URL (default: %(default)s)",
    )
    parser.add_argument("--profile", default="quick", choices=sorted(PROFILES))
    parser.add_argument("--select", default="", help="only requirements whose ID starts with this")
    parser.add_argument("--expected-failures", help="JSON or TOML file of {id, reason} entries")
    parser.add_argument(
        "--report-dir",
        default="conformance-report",
        help="where report.json, report.md and traces go",
    )
    parser.add_argument(
        "--seed", type=int, help="random seed for the state machines (default: derandomized)"
    )
    parser.add_argument(
        "--shrink",
        action=argparse.BooleanOptionalAction,
        default=None,
        help="shrink failing random sequences (default: yes, except in the quick profile)",
    )
    return parser


def main(argv: list[str] | None = None) -> int:
    argv = list(sys.argv[1:] if argv is None else argv)
    if argv[:1] == ["replay"]:
        from conformance.runner import replay

        parser = argparse.ArgumentParser(prog="jfsm conformance replay")
        parser.add_argument("trace")
        parser.add_argument("--driver", help="replay against another driver than the recorded one")
        try:
            args = parser.parse_args(argv[1:])
        except SystemExit as exc:
            return 0 if exc.code == 0 else 2
        return replay(args.trace, driver=args.driver)
    try:
        args = build_parser().parse_args(argv)
    except SystemExit as exc:
        return 0 if exc.code == 0 else 2
    from conformance.report import summary_lines, write_report
    from conformance.runner import Options, run

    try:
        expected = load_expected_failures(args.expected_failures) if args.expected_failures else {}
    except (OSError, ValueError) as exc:
        print(f"jfsm conformance: {exc}", file=sys.stderr)
        return 2
    options = Options(
        driver=args.driver,
        profile=args.profile,
        select=args.select,
        expected_failures=expected,
        report_dir=Path(args.report_dir),
        seed=args.seed,
        shrink=args.shrink,
    )
    result = run(options)
    json_path, md_path = write_report(result, options.report_dir)
    for line in summary_lines(result):
        print(line, file=sys.stderr)
    print(f"report: {md_path} and {json_path}", file=sys.stderr)
    return result.exit_code
