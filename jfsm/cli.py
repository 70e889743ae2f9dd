"""The `jfsm` command line.

```
jfsm conformance [...]        run the conformance suite (default: the reference engine)
jfsm conformance smoke       a handshake and one op of each kind against a driver
jfsm conformance replay TRACE run a recorded failing trace again
jfsm driver [--state DIR]     the reference engine over the driver protocol on stdio
            [--http PORT [--token T]]   ... or over HTTP on 127.0.0.1 (bearer token T)
jfsm driver --store URL       the same with every game in PostgreSQL (URL or host=... dbname=...)
jfsm fake-compress [--port N] serve the fake compress.v2 on 127.0.0.1 until interrupted
jfsm inspect PATH [--json]    a durable store's stacks, lengths, footprint and flags
jfsm inspect URL --game ID    the same for a game in PostgreSQL (read without taking it over)
jfsm pg-migrate URL           create or upgrade the PostgreSQL store's tables
jfsm profile --adapter NAME   the compaction safety profile against an agent-memory adapter
```

`jfsm --version` prints the version. `jfsm conformance` and `jfsm fake-compress` need the
suite's extra (`pip install 'jfsm[conformance]'`); without it they say so in one line and
exit 2. Exit codes: 0 success, 1 failure (conformance: a requirement failed), 2 usage or
harness error.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import importlib.util
import os
import sys

__all__ = ["SUITE_EXTRA", "main", "missing_suite_dependencies"]

SUITE_EXTRA = "jfsm[conformance]"
_SUITE_MODULES = ("hypothesis", "jsonschema", "jfsm_conformance.runner")


def missing_suite_dependencies() -> list[str]:
    """The conformance suite's modules that are not installed (empty on a full install)."""
    return [m for m in _SUITE_MODULES if not _importable(m)]


def _importable(module: str) -> bool:
    try:
        return importlib.util.find_spec(module) is not None
    except (ImportError, ValueError):  # a broken or blocked install counts as missing
        return False


def _suite_or_exit(command: str) -> bool:
    missing = missing_suite_dependencies()
    if missing:
        names = ", ".join(m.split(".")[0] for m in missing)
        print(
            f"jfsm {command} needs the conformance suite's extra (missing: {names})"
            f": pip install '{SUITE_EXTRA}', or uvx --from '{SUITE_EXTRA}' jfsm {command} ...",
            file=sys.stderr,
        )
    return not missing


def _version() -> str:
    from jfsm import __version__

    return __version__


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="jfsm",
        description="Jump Forward agent memory: reference engine and conformance suite.",
    )
    parser.add_argument("--version", action="version", version=f"jfsm {_version()}")
    sub = parser.add_subparsers(dest="command", required=True)
    sub.add_parser(
        "conformance",
        help="run the conformance suite (see `jfsm conformance --help`)",
        add_help=False,
    )
    driver = sub.add_parser("driver", help="serve the reference engine over the driver protocol")
    driver.add_argument("--state", help="directory of durable game stores (enables restart)")
    driver.add_argument("--http", type=int, metavar="PORT", help="serve HTTP on 127.0.0.1:PORT")
    driver.add_argument(
        "--token",
        help="bearer token the HTTP driver requires (default: $JFSM_DRIVER_TOKEN, else a "
        "random one printed on stderr)",
    )
    driver.add_argument(
        "--owner",
        help="with --store: this driver's owner id, kept across restarts so a restarted "
        "driver reclaims its games at once (default: $JFSM_OWNER, else unique per process)",
    )
    driver.add_argument(
        "--store",
        metavar="URL",
        help="postgresql://..., postgres://... or 'host=... dbname=...': every game in PostgreSQL",
    )
    fake = sub.add_parser("fake-compress", help="serve the fake compress.v2 on 127.0.0.1")
    fake.add_argument("--port", type=int, default=0, help="port (default: a free one)")
    inspect = sub.add_parser("inspect", help="show a durable store at a glance")
    inspect.add_argument("path", help="the store's directory")
    inspect.add_argument("--json", action="store_true", help="machine-readable output")
    inspect.add_argument("--game", help="the game id, when PATH is a postgresql:// URL")
    migrate = sub.add_parser("pg-migrate", help="create or upgrade the PostgreSQL store's tables")
    migrate.add_argument("url", help="the database, a postgresql:// URL or libpq key=value string")
    sub.add_parser(
        "profile",
        help="the compaction safety profile (see `jfsm profile --help`)",
        add_help=False,
    )
    return parser


def main(argv: list[str] | None = None) -> int:
    argv = sys.argv[1:] if argv is None else argv
    if argv[:1] == ["conformance"]:
        if not _suite_or_exit("conformance"):
            return 2
        from jfsm_conformance.cli import main as conformance_main

        return conformance_main(argv[1:])
    if argv[:1] == ["profile"]:
        from jfsm_conformance.profile.cli import main as profile_main

        return profile_main(argv[1:])
    args = build_parser().parse_args(argv)
    if args.command == "driver":
        from jfsm.driver import ReferenceDriver, serve_http, serve_stdio

        if args.store is not None:  # checked before serving: hello never meets a bad store
            from jfsm.driver_pg import check_target
            from jfsm.errors import JfsmError

            try:
                args.store = check_target(args.store)
            except JfsmError as exc:
                print(f"jfsm driver: {exc.code}: {exc.message}", file=sys.stderr)
                return 2
        if args.owner:
            os.environ["JFSM_OWNER"] = args.owner
        driver = ReferenceDriver(args.state, store=args.store)
        if args.http is not None:
            token = args.token or os.environ.get("JFSM_DRIVER_TOKEN") or None
            serve_http(driver, args.http, token=token)
        else:
            asyncio.run(serve_stdio(driver))
        return 0
    if args.command == "fake-compress":
        if not _suite_or_exit("fake-compress"):
            return 2
        from jfsm_conformance.fake_compress import serve

        with contextlib.suppress(KeyboardInterrupt):
            serve(args.port or None)
        return 0
    if args.command == "inspect":
        from jfsm.inspection import inspect_store

        return inspect_store(args.path, as_json=args.json, game=args.game)
    if args.command == "pg-migrate":
        from jfsm.errors import JfsmError

        try:
            from jfsm.stores.postgres import migrate as pg_migrate

            version = pg_migrate(args.url)
        except (ImportError, JfsmError) as exc:
            print(f"jfsm pg-migrate: {getattr(exc, 'code', 'error')}: {exc}", file=sys.stderr)
            return 2
        print(f"jfsm schema version {version}")
        return 0
    return 2


if __name__ == "__main__":
    sys.exit(main())
