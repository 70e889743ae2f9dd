"""`jfsm profile`: the compaction safety profile against one adapter.

```
jfsm profile --adapter NAME|module:attr [--version X] [--report-dir DIR] [--junit-xml PATH]
             [--examples N] [--steps N] [--seed N] [--no-shrink]
             [--allow-not-exercised N]
jfsm profile replay TRACE [--adapter NAME|module:attr]
jfsm profile --list
```

`--adapter` takes a registered name (`--list`: each with the `module:attr` it stands for) or
a user's adapter as `module:attr`: an `AdapterSpec` (factory plus declared scope) importable
from the current directory or the environment (see `docs/safety/adapters.md`). An unknown
name, a broken reference or a missing library is one line on stderr and exit code 2, before
anything runs.

Exit codes: 0 no property failed (by-design findings and not-applicable properties do not
fail) and the search reached what it judges; 1 a property failed, the adapter never reached
the summarizer (JF-SAFE-020), or more applicable properties than `--allow-not-exercised`
stayed not exercised (JF-SAFE-021); 2 harness error (the profile's extra or the adapter's
library is not installed, an unknown or broken adapter, an adapter that hangs, a
`--version` environment that cannot be made, anything else unexpected; bad usage).
`replay` judges the property its trace was recorded for: 1 if it still fails on the
trace's steps, 0 if it no longer does (other properties the steps break are listed after
it, decision R146), 2 if the trace's writers are more than the adapter declares.
"""

from __future__ import annotations

import argparse
import importlib.util
import sys
import traceback
from pathlib import Path

from jfsm_conformance.usage import (
    FolderInUse,
    FolderUnusable,
    UsageParser,
    hold_report_folder,
    usage_error,
)

from .adapter import Unavailable
from .adapters import ADAPTERS, adapter_error, resolve

__all__ = ["main"]


def build_parser() -> argparse.ArgumentParser:
    parser = UsageParser(prog="jfsm profile", description=__doc__.split("\n\n")[0])
    parser.add_argument(
        "--adapter",
        default="reference",
        help="a registered adapter (see --list) or a user's adapter as module:attr",
    )
    parser.add_argument("--list", action="store_true", help="list the adapters and exit")
    parser.add_argument(
        "--version",
        help="run against this release of the adapter's library, in a throwaway venv (uv)",
    )
    parser.add_argument("--report-dir", default="profile-report", help="where the report goes")
    parser.add_argument("--junit-xml", help="also write a JUnit XML file here")
    parser.add_argument("--examples", type=int, default=30, help="random sequences per search")
    parser.add_argument("--steps", type=int, default=16, help="steps per sequence")
    parser.add_argument("--seed", type=int, help="random seed (default: derandomized)")
    parser.add_argument(
        "--allow-not-exercised",
        type=int,
        default=0,
        metavar="N",
        help="applicable properties that may end not exercised before JF-SAFE-021 fails "
        "(default 0)",
    )
    parser.add_argument(
        "--no-shrink",
        action="store_true",
        help="report the first failing example found, not a minimal one (faster)",
    )
    return parser


def main(argv: list[str] | None = None) -> int:
    """Run `jfsm profile` (see the module docs); returns the exit code. Never raises: an
    unexpected exception is printed and is a harness error (2), never a failed property."""
    try:
        return _main(list(sys.argv[1:] if argv is None else argv))
    except Exception:
        traceback.print_exc()
        print("jfsm profile: harness error (the traceback above)", file=sys.stderr)
        return 2


def _main(argv: list[str]) -> int:
    if "--version" not in argv and not any(a.startswith("--version=") for a in argv):
        missing = [m for m in ("hypothesis",) if importlib.util.find_spec(m) is None]
        if missing and not {"-h", "--help", "--list"} & set(argv):
            from jfsm_conformance.usage import install_hint

            print(
                f"jfsm profile needs {install_hint('conformance')} (missing: "
                + ", ".join(missing)
                + ")",
                file=sys.stderr,
            )
            return 2
    if argv[:1] == ["replay"]:
        from .runner import replay

        parser = UsageParser(prog="jfsm profile replay")
        parser.add_argument("trace")
        parser.add_argument("--adapter", help="replay against another adapter than recorded")
        try:
            rargs = parser.parse_args(argv[1:])
        except SystemExit as exc:
            return 0 if exc.code == 0 else 2
        return replay(rargs.trace, adapter=rargs.adapter)
    try:
        args = build_parser().parse_args(argv)
    except SystemExit as exc:
        return 0 if exc.code == 0 else 2
    if args.allow_not_exercised < 0:
        return usage_error("jfsm profile", "--allow-not-exercised must be 0 or more")
    if args.list:
        width = max(len(name) for name in ADAPTERS)
        for name, entry in ADAPTERS.items():
            print(f"{name:<{width}}  {entry.qualified}")
        from .adapters.toy import BUGS

        module = ADAPTERS["toy"].qualified.rsplit(":", 1)[0]
        for bug in filter(None, BUGS):
            print(f"{'toy:' + bug:<{width}}  {module}:{bug.replace('-', '_')}")
        return 0
    if args.version:
        from .isolated import run_isolated

        rest = [a for a in argv if a not in ("--version", args.version)]
        rest = [a for a in rest if not a.startswith("--version=")]
        return run_isolated(args.adapter, args.version, rest)
    from .report import summary_lines, to_junit, write_report
    from .runner import ProfileOptions, run_profile

    try:
        factory, scope = resolve(args.adapter)
    except (KeyError, Unavailable) as exc:
        return usage_error("jfsm profile", adapter_error(exc))
    options = ProfileOptions(
        adapter=args.adapter,
        examples=args.examples,
        steps=args.steps,
        seed=args.seed,
        shrink=not args.no_shrink,
        allow_not_exercised=args.allow_not_exercised,
    )
    try:
        with hold_report_folder(Path(args.report_dir)):  # R161: one run a folder
            result = run_profile(options, factory=factory, scope=scope)
            json_path, md_path = write_report(result, Path(args.report_dir))
    except (FolderUnusable, FolderInUse) as exc:
        return usage_error("jfsm profile", str(exc))
    if args.junit_xml:
        Path(args.junit_xml).parent.mkdir(parents=True, exist_ok=True)
        Path(args.junit_xml).write_text(to_junit(result), encoding="utf-8")
    for line in summary_lines(result):
        print(line, file=sys.stderr)
    print(f"report: {md_path} and {json_path}", file=sys.stderr)
    return result.exit_code
