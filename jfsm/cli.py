"""The `jfsm` command line.

```
jfsm conformance [...]        run the conformance suite (default: the reference engine)
jfsm conformance replay TRACE run a recorded failing trace again
jfsm driver [--state DIR]     the reference engine over the driver protocol on stdio
jfsm fake-compress [--port N] serve the fake compress.v2 on 127.0.0.1 until interrupted
jfsm inspect PATH [--json]    a durable store's stacks, lengths, footprint and flags
jfsm profile --adapter NAME   the compaction safety profile against an agent-memory adapter
```

Exit codes: 0 success, 1 failure (conformance: a requirement failed), 2 usage or harness
error.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import sys

__all__ = ["main"]


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="jfsm",
        description="Jump Forward agent memory: reference engine and conformance suite.",
    )
    sub = parser.add_subparsers(dest="command", required=True)
    sub.add_parser(
        "conformance",
        help="run the conformance suite (see `jfsm conformance --help`)",
        add_help=False,
    )
    driver = sub.add_parser("driver", help="serve the reference engine over the driver protocol")
    driver.add_argument("--state", help="directory of durable game stores (enables restart)")
    driver.add_argument("--http", type=int, metavar="PORT", help="serve HTTP on 127.0.0.1:PORT")
    fake = sub.add_parser("fake-compress", help="serve the fake compress.v2 on 127.0.0.1")
    fake.add_argument("--port", type=int, default=0, help="port (default: a free one)")
    inspect = sub.add_parser("inspect", help="show a durable store at a glance")
    inspect.add_argument("path", help="the store's directory")
    inspect.add_argument("--json", action="store_true", help="machine-readable output")
    sub.add_parser(
        "profile",
        help="the compaction safety profile (see `jfsm profile --help`)",
        add_help=False,
    )
    return parser


def main(argv: list[str] | None = None) -> int:
    argv = sys.argv[1:] if argv is None else argv
    if argv[:1] == ["conformance"]:
        from conformance.cli import main as conformance_main

        return conformance_main(argv[1:])
    if argv[:1] == ["profile"]:
        from conformance.profile.cli import main as profile_main

        return profile_main(argv[1:])
    args = build_parser().parse_args(argv)
    if args.command == "driver":
        from jfsm.driver import ReferenceDriver, serve_http, serve_stdio

        driver = ReferenceDriver(args.state)
        if args.http is not None:
            serve_http(driver, args.http)
        else:
            asyncio.run(serve_stdio(driver))
        return 0
    if args.command == "fake-compress":
        from conformance.fake_compress import serve

        with contextlib.suppress(KeyboardInterrupt):
            serve(args.port or None)
        return 0
    if args.command == "inspect":
        from jfsm.inspection import inspect_store

        return inspect_store(args.path, as_json=args.json)
    return 2


if __name__ == "__main__":
    sys.exit(main())
