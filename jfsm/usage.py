"""Usage errors of the command line: one line on stderr and exit 2 (decision R160).

Exit 1 means "a requirement failed" to a CI, so a usage error (a bad option, a file or
folder that cannot be used, a connection string that does not parse) must never end as a
traceback, which Python exits with 1. `UsageParser` is the `argparse` parser of every `jfsm`
command: its errors are `PROG: error: MESSAGE (see PROG --help)`, where argparse prints the
usage first and the error on a second line. `usage_error(prog, message)` prints such a line
for an error found after parsing and returns 2. `port_number` is the argparse type of every
`--port`/`--http PORT` option (0 to 65535: a port the socket layer would refuse with an
`OverflowError` is a usage error instead). `install_hint(extra)` is the command that installs
an extra for this copy of jfsm, for the message of a command whose extra is missing.
"""

from __future__ import annotations

import argparse
import json
import os
import shlex
import sys
from typing import Any, NoReturn

__all__ = ["UsageParser", "install_hint", "port_number", "usage_error"]


class UsageParser(argparse.ArgumentParser):
    """An `ArgumentParser` whose errors are one line and exit 2 (subparsers inherit it)."""

    def error(self, message: str) -> NoReturn:
        self.exit(2, f"{self.prog}: error: {message} (see {self.prog} --help)\n")


def usage_error(prog: str, message: str) -> int:
    """Print `PROG: MESSAGE` (its first line) on stderr; returns 2, the exit code."""
    first = message.strip().splitlines()[0] if message.strip() else "usage error"
    print(f"{prog}: {first}", file=sys.stderr)
    return 2


def port_number(text: str) -> int:
    """A TCP port number, 0 to 65535 (an argparse `type`: a bad one is a usage error)."""
    if not text.isdigit() or not 0 <= int(text) <= 65535:
        raise argparse.ArgumentTypeError(f"{text!r} is not a port number (0 to 65535)")
    return int(text)


def install_hint(extra: str) -> str:
    """The command that installs jfsm's `extra` for this copy of jfsm: from the wheel file,
    the checkout or the git repository (at the same commit) it was installed from (PEP 610
    `direct_url.json`), else from the index.

    Never raises: unreadable metadata falls back to the index's `pip install 'jfsm[...]'`."""
    url = ""
    vcs: dict[str, Any] = {}
    try:
        from importlib.metadata import distribution

        origin = json.loads(distribution("jfsm").read_text("direct_url.json") or "{}")
        url = str(origin.get("url", ""))
        editable = bool(origin.get("dir_info", {}).get("editable"))
        vcs = dict(origin.get("vcs_info") or {})
    except Exception:  # no metadata (run from a checkout), or damaged: the index
        editable = False
    requirement = f"jfsm[{extra}]"
    if vcs.get("vcs") and url:  # installed from a repository: the same commit again
        at = f"@{vcs['commit_id']}" if vcs.get("commit_id") else ""
        return "pip install " + shlex.quote(f"{requirement} @ {vcs['vcs']}+{url}{at}")
    if url.startswith("file://"):
        from urllib.parse import unquote, urlparse

        path = unquote(urlparse(url).path)
        if editable or os.path.isdir(path):
            return "pip install -e " + shlex.quote(f"{path}[{extra}]")
        return "pip install " + shlex.quote(f"{requirement} @ {url}")
    return f"pip install '{requirement}'"
