"""The `jfsm` command line.

```
jfsm conformance [...]        run the conformance suite (default: the reference engine)
jfsm conformance smoke       a handshake and one op of each kind against a driver
jfsm conformance replay TRACE run a recorded failing trace again
jfsm driver [--state DIR]     the reference engine over the driver protocol on stdio
            [--http PORT]   ... or over HTTP on 127.0.0.1 (token: $JFSM_DRIVER_TOKEN)
            [--metrics]     ... with GET /metrics (Prometheus text) beside it
jfsm driver --store URL       the same with every game in PostgreSQL (URL or host=... dbname=...)
jfsm driver --state DIR --shared  ... or in DIR, shared by several driver processes on this host
jfsm fake-compress [--port N] serve the fake compress.v2 on 127.0.0.1 until interrupted
jfsm inspect PATH [--json]    a durable store's stacks, lengths, footprint and flags
jfsm inspect URL --game ID    the same for a game in PostgreSQL (read without taking it over)
jfsm pg-migrate URL           create or upgrade the PostgreSQL store's tables
            [--clear-history-lost]  ... and delete the marks of a lost history (R182)
jfsm pg-server [COMMAND...]   a throwaway PostgreSQL server: print its URL (or run COMMAND)
jfsm profile --adapter NAME   the compaction safety profile against an agent-memory adapter
```

`jfsm --version` prints the version. `jfsm conformance`, `jfsm profile` and
`jfsm fake-compress` are not the engine's: the conformance suite registers them in the
entry-point group `jfsm.commands` (decision R104), and this module imports nothing of it. A
registered command whose extra is not installed (`jfsm[conformance]`) answers one line, with
an install command that resolves where this copy of jfsm came from (the wheel file or
checkout it was installed from, else the package index), and exit 2. A closed stdout
(`jfsm inspect ... | head`) ends the command quietly. Exit codes: 0 success, 1 failure
(conformance: a requirement failed), 2 usage or harness error.

Every usage error is one line on stderr and exit 2, never a traceback (decision R160): a
bad option or argument (`jfsm CMD: error: ... (see jfsm CMD --help)`), a file, folder or
connection string that cannot be used. Ctrl-C (or SIGTERM) stops a serving command
(`driver`, `pg-server`, `fake-compress`) with exit 0; any other command it interrupts ends
with one line and exit 130. An exception nothing expected is a bug of jfsm: its traceback,
then one line saying so, and exit 2, so that exit 1 keeps meaning "a requirement failed".
"""

from __future__ import annotations

import argparse
import contextlib
import os
import sys
from typing import TYPE_CHECKING

from jfsm.usage import UsageParser, install_hint, port_number

if TYPE_CHECKING:
    from importlib.metadata import EntryPoint

__all__ = ["COMMANDS_GROUP", "install_hint", "main", "plugin_commands"]

#: The entry-point group through which other packages add `jfsm` subcommands: each entry is
#: a loader `() -> main(argv) -> int`, and may name the extra it needs (`module:attr [extra]`).
COMMANDS_GROUP = "jfsm.commands"
_ENGINE_COMMANDS = ("driver", "inspect", "pg-migrate", "pg-server")


def plugin_commands() -> dict[str, EntryPoint]:
    """The subcommands other installed packages register in `COMMANDS_GROUP`, by name (the
    engine's own names win a clash)."""
    from importlib.metadata import entry_points

    return {
        ep.name: ep for ep in entry_points(group=COMMANDS_GROUP) if ep.name not in _ENGINE_COMMANDS
    }


def _run_plugin(name: str, entry: EntryPoint, argv: list[str]) -> int:
    """Load a registered command and run it; an import that fails while loading is one line
    naming the extra the entry declares (exit 2)."""
    try:
        command = entry.load()()
    except ImportError as exc:
        missing = getattr(exc, "name", None) or str(exc)
        extra = entry.extras[0] if entry.extras else None
        needs = f"the extra jfsm[{extra}]" if extra else f"the module {missing}"
        hint = f": {install_hint(extra)}" if extra else ""
        print(f"jfsm {name} needs {needs} (missing: {missing}){hint}", file=sys.stderr)
        return 2
    return int(command(argv))


def _plugin_help(entry: EntryPoint) -> str:
    """The first line of a registered loader's docstring (never raises: a loader that cannot
    be imported is listed with the extra it needs)."""
    try:
        doc = (entry.load().__doc__ or "").strip()
    except Exception:
        return f"needs jfsm[{entry.extras[0]}]" if entry.extras else "cannot be loaded"
    line = doc.splitlines()[0].rstrip(".") if doc else entry.value
    return line[:1].lower() + line[1:]


def _version() -> str:
    from jfsm import __version__

    return __version__


def build_parser(plugins: dict[str, EntryPoint] | None = None) -> argparse.ArgumentParser:
    """The engine's commands, and each registered command (by name, with its help line)."""
    parser = UsageParser(
        prog="jfsm",
        description="Jump Forward agent memory: reference engine and conformance suite.",
    )
    parser.add_argument("--version", action="version", version=f"jfsm {_version()}")
    sub = parser.add_subparsers(dest="command", required=True)
    driver = sub.add_parser("driver", help="serve the reference engine over the driver protocol")
    driver.add_argument(
        "--state",
        help="directory of durable game stores (enables restart); refused if it is a link, "
        "another user's or writable by group or others",
    )
    driver.add_argument(
        "--trust-state",
        action="store_true",
        help="accept a --state directory of another user or writable by group or others "
        "(they can then change your games); links are refused all the same",
    )
    driver.add_argument(
        "--http",
        type=port_number,
        metavar="PORT",
        help="serve HTTP on 127.0.0.1:PORT (0: a free one)",
    )
    driver.add_argument(
        "--token",
        help="bearer token the HTTP driver requires; prefer the environment variable "
        "JFSM_DRIVER_TOKEN: every local user can read --token in the process list "
        "(default: $JFSM_DRIVER_TOKEN, else a random one printed on stderr)",
    )
    driver.add_argument(
        "--shared",
        action="store_true",
        help="with --state: several driver processes on this host serve the games of DIR, "
        "one owner a game, by leases and fencing tokens kept in files (sharedStore; lease "
        "length $JFSM_LEASE_SECONDS, default 30)",
    )
    driver.add_argument(
        "--owner",
        help="with --store or --shared: this driver's owner id, kept across restarts so a "
        "restarted driver reclaims its games at once (default: $JFSM_OWNER, else unique per "
        "process)",
    )
    driver.add_argument(
        "--metrics",
        action="store_true",
        help="with --http: also serve GET /metrics (Prometheus text, the same bearer token) "
        "from the OpenTelemetry SDK; needs the extra jfsm[prometheus]",
    )
    driver.add_argument(
        "--store",
        metavar="URL",
        help="postgresql://..., postgres://... or 'host=... dbname=...': every game in PostgreSQL",
    )
    inspect = sub.add_parser("inspect", help="show a durable store at a glance")
    inspect.add_argument("path", help="the store's directory")
    inspect.add_argument("--json", action="store_true", help="machine-readable output")
    inspect.add_argument("--game", help="the game id, when PATH is a postgresql:// URL")
    migrate = sub.add_parser("pg-migrate", help="create or upgrade the PostgreSQL store's tables")
    migrate.add_argument("url", help="the database, a postgresql:// URL or libpq key=value string")
    migrate.add_argument(
        "--clear-history-lost",
        action="store_true",
        help="also delete the database's marks of a lost history (an operator's act, once "
        "the loss is dealt with: every worker refuses to write while one exists)",
    )
    sub.add_parser(
        "pg-server",
        help="a throwaway PostgreSQL server from this machine's binaries: print its URL, "
        "or run COMMAND with JFSM_PG_URL set (see jfsm pg-server --help)",
        add_help=False,
    )
    for name, entry in sorted((plugin_commands() if plugins is None else plugins).items()):
        sub.add_parser(name, help=_plugin_help(entry), add_help=False)
    return parser


def _ignored_driver_options(args: argparse.Namespace) -> str | None:
    """Why an option of `jfsm driver` would change nothing with the others given, or None:
    games live in one place (`--state` or `--store`), `--trust-state` is about `--state`,
    `--owner` names an owner only where several drivers share games, `--token` guards HTTP."""
    if args.store is not None and args.state is not None:
        return (
            "--state and --store both say where the games live: give one (--state DIR for "
            "files, --store URL for PostgreSQL)"
        )
    if args.trust_state and args.state is None:
        return "--trust-state needs --state DIR (it is about that directory)"
    if args.owner is not None and args.store is None and not args.shared:
        return "--owner needs --store URL or --state DIR --shared (a driver alone owns its games)"
    if args.token is not None and args.http is None:
        return "--token needs --http PORT (the stdio driver takes no token)"
    if getattr(args, "metrics", False) and args.http is None:
        return "--metrics needs --http PORT (it serves /metrics there)"
    return None


def main(argv: list[str] | None = None) -> int:
    """Run one `jfsm` command; returns its exit code. A closed stdout ends it quietly: the
    code is then 0 (nothing more was wanted; the `head` convention, cf. `sys.stdout` docs)."""
    argv = sys.argv[1:] if argv is None else argv
    name = f"jfsm {argv[0]}" if argv[:1] and not argv[0].startswith("-") else "jfsm"
    try:
        return _main(argv)
    except BrokenPipeError:
        _quiet_closed_stdout()
        return 0
    except KeyboardInterrupt:
        print(f"{name}: interrupted", file=sys.stderr)
        return 130
    except Exception as exc:  # a bug: its traceback, then one line; never exit 1 (R160)
        import traceback

        traceback.print_exc()
        print(
            f"{name}: internal error (a bug of jfsm, not a failed requirement): "
            f"{type(exc).__name__}: {str(exc).splitlines()[0] if str(exc) else ''}",
            file=sys.stderr,
        )
        return 2


def _quiet_closed_stdout() -> None:
    """Point stdout at /dev/null so the interpreter's final flush raises nothing more."""
    with contextlib.suppress(OSError, ValueError):
        devnull = os.open(os.devnull, os.O_WRONLY)
        os.dup2(devnull, sys.stdout.fileno())
        os.close(devnull)


def _main(argv: list[str]) -> int:
    plugins = {} if argv[:1] and argv[0] in _ENGINE_COMMANDS else plugin_commands()
    if argv[:1] and argv[0] in plugins:
        return _run_plugin(argv[0], plugins[argv[0]], argv[1:])
    if argv[:1] == ["pg-server"]:
        from jfsm.stores.postgres.server import main as pg_server

        return pg_server(argv[1:], prog="jfsm pg-server")
    parser = build_parser(plugins)
    args, extra = parser.parse_known_args(argv)
    if extra:  # named by the subcommand's parser: `jfsm driver: error: ...`
        commands = next(a for a in parser._actions if isinstance(a, argparse._SubParsersAction))
        commands.choices[args.command].error(f"unrecognized arguments: {' '.join(extra)}")
    if args.command == "driver":
        import asyncio

        from jfsm.driver import ReferenceDriver, serve_http, serve_stdio
        from jfsm.errors import JfsmError

        ignored = _ignored_driver_options(args)
        if ignored:  # an option that would change nothing is a mistake, never silence
            print(f"jfsm driver: {ignored}", file=sys.stderr)
            return 2
        metrics = None
        if args.metrics:  # before anything is opened: a missing extra is a usage error
            try:
                from jfsm.observability import prometheus_text

                metrics = prometheus_text()
            except ImportError as exc:  # the SDK or the exporter is missing
                print(
                    f"jfsm driver: --metrics needs the extra jfsm[prometheus] (missing: "
                    f"{exc.name or exc}): {install_hint('prometheus')}",
                    file=sys.stderr,
                )
                return 2
        if args.owner is not None or os.environ.get("JFSM_OWNER"):
            from jfsm.limits import validate_owner

            given = "--owner" if args.owner is not None else "JFSM_OWNER"
            try:  # one line, never the whole value (R125)
                os.environ["JFSM_OWNER"] = validate_owner(
                    args.owner if args.owner is not None else os.environ["JFSM_OWNER"]
                )
            except JfsmError as exc:
                print(f"jfsm driver: {given}: {exc.message}", file=sys.stderr)
                return 2
        if args.store is not None:  # checked before serving: hello never meets a bad store
            from jfsm.driver.pg import check_target

            try:
                args.store = check_target(args.store)
            except JfsmError as exc:
                print(f"jfsm driver: {exc.code}: {exc.message}", file=sys.stderr)
                return 2
        if args.shared and (args.state is None or args.store is not None):
            print("jfsm driver: --shared needs --state DIR (and no --store)", file=sys.stderr)
            return 2
        counters = ("tokens", "tokens.d")  # R95's counter, R174's sequence
        if (
            args.state
            and not args.shared
            and any(os.path.lexists(os.path.join(args.state, name)) for name in counters)
        ):
            print(  # R95: a plain driver would lock games the shared ones write
                f"jfsm driver: --state {args.state} is shared by several drivers "
                "(it has a token counter): add --shared",
                file=sys.stderr,
            )
            return 2
        try:
            driver = ReferenceDriver(args.state, store_url=args.store, shared=args.shared)
        except JfsmError as exc:  # JFSM_LEASE_SECONDS not a number
            print(f"jfsm driver: {exc.code}: {exc.message}", file=sys.stderr)
            return 2
        try:
            directory = driver.state or getattr(driver.db, "directory", None)
            if directory is not None:
                directory.trusted = args.trust_state
                directory.claim()
                driver.claim_directory()  # a plain and a shared driver never mix (R120)
        except OSError as exc:  # one line: a link, another user's, group- or other-writable
            print(f"jfsm driver: --state {args.state}: {exc.strerror or exc}", file=sys.stderr)
            return 2
        except JfsmError as exc:
            print(f"jfsm driver: {exc.code}: {exc.message}", file=sys.stderr)
            return 2
        if args.http is not None:
            token = args.token or os.environ.get("JFSM_DRIVER_TOKEN") or None
            try:
                serve_http(driver, args.http, token=token, metrics=metrics)
            except OSError as exc:  # the port is taken, or not ours to bind (R160)
                reason = exc.strerror or str(exc)
                print(
                    f"jfsm driver: cannot serve on 127.0.0.1:{args.http}: {reason}", file=sys.stderr
                )
                return 2
        else:
            with contextlib.suppress(KeyboardInterrupt):  # Ctrl-C: the way to stop it
                asyncio.run(serve_stdio(driver))
        return 0
    if args.command == "inspect":
        from jfsm.inspection import inspect_store

        return inspect_store(args.path, as_json=args.json, game=args.game)
    if args.command == "pg-migrate":
        from jfsm.errors import JfsmError
        from jfsm.stores.postgres.conninfo import database_target, describe

        try:  # a path or an empty string is no database: one line, before any connection
            if not args.url or database_target(args.url) is None:
                print(
                    f"jfsm pg-migrate: {describe(args.url)} is not a PostgreSQL target "
                    "(postgresql://..., postgres://... or 'host=... dbname=...')",
                    file=sys.stderr,
                )
                return 2
        except JfsmError as exc:
            print(f"jfsm pg-migrate: {exc.code}: {exc.message}", file=sys.stderr)
            return 2
        try:
            from jfsm.stores.postgres.store import migrate as pg_migrate

            version = pg_migrate(args.url)
            cleared = None
            if args.clear_history_lost:
                from jfsm.stores.postgres.history import clear_history_lost

                cleared = clear_history_lost(args.url)
        except (ImportError, JfsmError) as exc:
            print(f"jfsm pg-migrate: {getattr(exc, 'code', 'error')}: {exc}", file=sys.stderr)
            return 2
        print(f"jfsm schema version {version}")
        if cleared is not None:
            print(f"jfsm cleared {cleared} mark(s) of a lost history")
        return 0
    return 2


if __name__ == "__main__":
    sys.exit(main())
