"""`jfsm conformance`: run the suite and write the per-requirement report.

```
jfsm conformance [--driver SPEC] [--profile quick|standard|thorough] [--select PREFIX]
                 [--expected-failures FILE] [--report-dir DIR] [--junit-xml PATH]
                 [--seed N] [--[no-]shrink] [--serial]
                 [--hello-timeout SECONDS] [--op-timeout SECONDS]
jfsm conformance smoke [--driver SPEC] [--timeout SECONDS] [--hello-timeout SECONDS]
jfsm conformance skeleton > jfsm-driver.ts     the TypeScript driver skeleton
jfsm conformance replay TRACE [--driver SPEC]
```

SPEC is `python:MODULE:FACTORY`, `stdio:COMMAND` or `http://HOST:PORT`. `--select` may be
repeated (the union of the prefixes). The verdicts, the first failures in full (message and
diff, trace, replay command) and the summary go to stdout; progress goes to stderr, so
`> out.txt` keeps the verdicts. `--junit-xml`
writes one JUnit test case per requirement; when `GITHUB_ACTIONS` is set, each failed
requirement is also printed as a GitHub `::error` annotation.

Exit codes: 0 every covered requirement passed, 1 a requirement failed (or a trace still
fails; a driver that died or stopped answering after `hello` fails what it was exercising
and JF-ERR-020, and is started again: decision R194), 2 harness error (the driver could not
be started or did not complete `hello` within `--hello-timeout`, a fault of the suite) or
bad usage (an unknown option, a `--select` prefix
that matches no requirement ID or selects nothing the suite judges, a `--select` that
judged nothing once run (decision R142), a trace that is missing or not a trace, a report
folder that cannot be written). Bad usage is one line on stderr, never a traceback (R160).

A run holds its report folder: a second run pointed at the same folder while the first goes
on is refused in one line (exit 2), so it never deletes the first's traces nor overwrites
its report, and every replay command the first prints keeps working (decision R161).

130 an interrupted run (Ctrl-C or SIGTERM): it stops within 2 s, with a partial report
that says `"interrupted": true` (decision R196).

The report is written as the run goes (atomically, `"partial": true` and the `phase`
reached), so a run killed even by SIGKILL leaves a partial report (decision R55). Every
process the run starts runs in a process group of its own, which the run ends however it
ends (decision R193).
"""

from __future__ import annotations

import argparse
import json
import os
import shlex
import sys
import tomllib
from pathlib import Path

from jfsm_conformance.usage import (
    FolderInUse,
    FolderUnusable,
    UsageParser,
    hold_report_folder,
    usage_error,
)

__all__ = ["load_expected_failures", "main", "skeleton_path"]


def skeleton_path(name: str = "jfsm-driver.ts") -> Path:
    """The driver skeleton shipped in the wheel (`jfsm_conformance/skeletons/`), or the checkout's
    `docs/guide/` copy; `FileNotFoundError` if neither exists."""
    package = Path(__file__).resolve().parents[1]  # jfsm_conformance/
    for candidate in (package / "skeletons" / name, package.parents[1] / "docs" / "guide" / name):
        if candidate.is_file():
            return candidate
    raise FileNotFoundError(f"the driver skeleton {name} is not installed")


def load_expected_failures(path: str) -> dict[str, str]:
    """Entries `{id, reason}` from a JSON list (or `{"failures": [...]}`) or a TOML file with
    `[[failure]]` tables; returns id -> reason. `OSError` if it cannot be read, `ValueError`
    (one line) if it is not such a file."""
    text = Path(path).read_text(encoding="utf-8")
    data = tomllib.loads(text) if path.endswith(".toml") else json.loads(text)
    if isinstance(data, dict):
        data = data.get("failure") or data.get("failures") or data.get("expected_failures") or []
    if not isinstance(data, list):
        raise ValueError(f"{path}: expected a list of {{id, reason}} entries")
    out = {}
    for entry in data:
        if not isinstance(entry, dict) or "id" not in entry or "reason" not in entry:
            raise ValueError(f"{path}: every entry needs an id and a reason: {entry!r}")
        out[str(entry["id"])] = str(entry["reason"])
    return out


SUBCOMMANDS = """subcommands:
  jfsm conformance smoke [--driver SPEC]     a handshake and one op of each kind, in seconds
  jfsm conformance replay TRACE [--driver SPEC]   run a recorded failing trace again
  jfsm conformance skeleton > jfsm-driver.ts      the TypeScript driver skeleton

exit codes: 0 every covered requirement passed, 1 a requirement failed (a driver that died
mid-run included), 2 harness error (no hello) or bad usage, 130 interrupted"""


def build_parser() -> argparse.ArgumentParser:
    from jfsm_conformance.run.runner import DEFAULT_DRIVER, PROFILES

    parser = UsageParser(
        prog="jfsm conformance",
        description=__doc__.split("\n\n")[0],
        formatter_class=argparse.RawDescriptionHelpFormatter,
        epilog=SUBCOMMANDS,
    )
    parser.add_argument(
        "--driver",
        default=DEFAULT_DRIVER,
        help="python:MODULE:FACTORY, stdio:COMMAND or http://HOST:PORT (default: %(default)s)",
    )
    parser.add_argument("--profile", default="quick", choices=sorted(PROFILES))
    parser.add_argument(
        "--select",
        action="append",
        default=[],
        metavar="PREFIX",
        help="only requirements whose ID starts with PREFIX (repeatable: any of them)",
    )
    parser.add_argument("--expected-failures", help="JSON or TOML file of {id, reason} entries")
    parser.add_argument(
        "--report-dir",
        default="conformance-report",
        help="where report.json, report.md and traces go",
    )
    parser.add_argument(
        "--junit-xml", metavar="PATH", help="also write a JUnit XML report (one case per ID)"
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
    parser.add_argument(
        "--serial",
        action="store_true",
        help="run the parts that only wait one after another, not beside the rest (the same "
        "report, more slowly)",
    )
    parser.add_argument(
        "--hello-timeout",
        type=_seconds,
        default=10.0,
        metavar="SECONDS",
        help="how long a driver has to answer hello; one that does not is a harness error "
        "(exit 2) (default: %(default)g)",
    )
    parser.add_argument(
        "--op-timeout",
        type=_seconds,
        default=120.0,
        metavar="SECONDS",
        help="how long a driver has to answer any other op; one that does not is blamed on "
        "what it was exercising, then started again (default: %(default)g)",
    )
    parser.add_argument(
        "--workers",
        type=int,
        default=2,
        choices=range(2, 9),
        metavar="K",
        help="processes of a sharedStore driver run as workers of one store (default 2)",
    )
    return parser


def _seconds(text: str) -> float:
    """A positive number of seconds (argparse type)."""
    try:
        value = float(text)
    except ValueError:
        value = float("nan")
    if not value > 0 or value == float("inf"):
        raise argparse.ArgumentTypeError(f"expected a positive number of seconds, not {text!r}")
    return value


def main(argv: list[str] | None = None) -> int:
    argv = list(sys.argv[1:] if argv is None else argv)
    if argv[:1] == ["replay"]:
        return _replay(argv[1:])
    if argv[:1] == ["smoke"]:
        return _smoke(argv[1:])
    if argv[:1] == ["skeleton"]:
        if argv[1:]:
            return usage_error("jfsm conformance skeleton", "takes no arguments")
        try:
            sys.stdout.write(skeleton_path().read_text(encoding="utf-8"))
        except OSError as exc:
            return usage_error("jfsm conformance skeleton", str(exc))
        return 0
    try:
        args = build_parser().parse_args(argv)
    except SystemExit as exc:
        return 0 if exc.code == 0 else 2
    from jfsm_conformance.run.runner import select_error

    select = ",".join(args.select)
    problem = select_error(select)
    if problem:
        return usage_error("jfsm conformance", problem)
    try:
        expected = load_expected_failures(args.expected_failures) if args.expected_failures else {}
    except (OSError, ValueError) as exc:
        return usage_error("jfsm conformance", str(exc))
    if args.junit_xml and Path(args.junit_xml).is_dir():
        return usage_error("jfsm conformance", f"--junit-xml {args.junit_xml} is a folder")
    report_dir = Path(args.report_dir)
    try:
        with hold_report_folder(report_dir):
            return _run(args, argv, select, expected, report_dir)
    except (FolderUnusable, FolderInUse) as exc:
        return usage_error("jfsm conformance", str(exc))


def _run(
    args: argparse.Namespace,
    argv: list[str],
    select: str,
    expected: dict[str, str],
    report_dir: Path,
) -> int:
    """The run itself, in the report folder this process holds."""
    from jfsm_conformance.run.report import (
        first_failure_lines,
        github_annotations,
        invoked_as,
        summary_lines,
        verdict_lines,
        write_junit,
        write_report,
    )
    from jfsm_conformance.run.runner import DEFAULT_DRIVER, Options, interruptible, run

    options = Options(
        driver=args.driver,
        profile=args.profile,
        select=select,
        expected_failures=expected,
        report_dir=report_dir,
        seed=args.seed,
        shrink=args.shrink,
        workers=args.workers,
        companions=args.driver == DEFAULT_DRIVER,
        parallel=not args.serial,
        hello_timeout=args.hello_timeout,
        op_timeout=args.op_timeout,
        checkpoint=lambda partial: write_report(partial, report_dir),
        command=" ".join([invoked_as(), "conformance", *(shlex.quote(a) for a in argv)]),
    )
    with interruptible():
        result = run(options)
    json_path, md_path = write_report(result, options.report_dir)
    for line in [*verdict_lines(result), *first_failure_lines(result), *summary_lines(result)]:
        print(line)
    written = f"report: {md_path} and {json_path}"
    if args.junit_xml:
        try:
            written += f"; JUnit XML: {write_junit(result, Path(args.junit_xml))}"
        except OSError as exc:
            print(written, flush=True)
            return usage_error("jfsm conformance", f"--junit-xml {args.junit_xml}: {exc}")
    print(written, flush=True)
    if os.environ.get("GITHUB_ACTIONS") == "true":
        for line in github_annotations(result):
            print(line, flush=True)
    return result.exit_code


def _replay(argv: list[str]) -> int:
    from jfsm_conformance.record.traces import TraceError, read_trace
    from jfsm_conformance.run.runner import replay

    parser = UsageParser(prog="jfsm conformance replay")
    parser.add_argument("trace")
    parser.add_argument("--driver", help="replay against another driver than the recorded one")
    try:
        args = parser.parse_args(argv)
    except SystemExit as exc:
        return 0 if exc.code == 0 else 2
    try:
        read_trace(args.trace)
    except TraceError as exc:
        return usage_error("jfsm conformance replay", str(exc))
    return replay(args.trace, driver=args.driver)


def _smoke(argv: list[str]) -> int:
    from jfsm_conformance.run.runner import DEFAULT_DRIVER, interruptible
    from jfsm_conformance.run.smoke import smoke

    parser = UsageParser(
        prog="jfsm conformance smoke",
        description="a handshake and one op of each kind, in seconds, with a diagnosis",
    )
    parser.add_argument("--driver", default=DEFAULT_DRIVER, help="as for jfsm conformance")
    parser.add_argument(
        "--timeout", type=_seconds, default=30.0, help="seconds to wait for each reply"
    )
    parser.add_argument(
        "--hello-timeout",
        type=_seconds,
        default=10.0,
        metavar="SECONDS",
        help="seconds to wait for the reply to hello (default: %(default)g)",
    )
    try:
        args = parser.parse_args(argv)
    except SystemExit as exc:
        return 0 if exc.code == 0 else 2
    try:
        with interruptible():
            return smoke(
                args.driver,
                timeout=args.timeout,
                hello_timeout=args.hello_timeout,
                say=lambda line: print(line, flush=True),
            )
    except KeyboardInterrupt:  # its processes are ended on the way out (R193)
        print("smoke: interrupted (exit 130)", flush=True)
        return 130
