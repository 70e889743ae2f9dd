"""PostgreSQL connection strings as users write them, and errors that never show a secret.

A *database target* is one of:

- a URL: `postgresql://...` or `postgres://...` (`postgresql://` alone: everything from the
  `PG*` environment variables, as libpq reads them);
- a libpq keyword string: `host=/run/postgresql dbname=jfsm user=app` (at least one
  `keyword=value` pair whose keyword libpq knows).

Anything else that contains `://` or `=` is neither a target nor a directory path and is
refused with `InvalidInput` (one line, without the string's password), so no code path turns
a connection string into a folder (issue 21).

`scrub(text, conninfo)` removes the password of `conninfo` and any `password=...` pair from
`text`; every message of the PostgreSQL store goes through it. It masks by *parsing*
(decision R213): `conninfo` is split as libpq reads it (a URL's user information and query,
or a keyword string's `key=value` pairs, quotes and backslashes included), the password is
replaced by `***` where the string is shown, and elsewhere in `text` the password (as written
or percent-decoded) is masked only where it stands as a whole token, never inside another
word: `postgres:postgres` keeps its user name and scheme, and a one-letter password leaves
the words that contain that letter alone.

`is_permanent(exc)` tells the errors that retrying cannot fix (authentication, a missing
database or role, a malformed string) from those of a server that is down.
"""

from __future__ import annotations

import re
from urllib.parse import unquote

from jfsm.errors import InvalidInput

__all__ = [
    "TRANSIENT_SQLSTATES",
    "check_host_names",
    "database_target",
    "describe",
    "is_database_target",
    "is_permanent",
    "mask",
    "passwords",
    "refusal_passes",
    "scrub",
]

_SCHEMES = ("postgresql://", "postgres://")
_KEYWORD = re.compile(r"^\s*([A-Za-z_][A-Za-z0-9_]*)\s*=")
_KEY = re.compile(r"([A-Za-z_][A-Za-z0-9_]*)\s*=\s*")
_PAIR_PASSWORD = re.compile(r"(password\s*=\s*)('(?:[^'\\]|\\.)*'|\S*)", re.IGNORECASE)
_URL_PASSWORD = re.compile(r"([A-Za-z][A-Za-z0-9+.-]*://[^:/@?#\s]*:)([^@\s]*)(@)")
_QUERY_PASSWORD = re.compile(r"([?&]password=)([^&\s]*)", re.IGNORECASE)
_KNOWN_KEYWORDS = frozenset(
    [
        "host",
        "hostaddr",
        "port",
        "dbname",
        "user",
        "password",
        "passfile",
        "channel_binding",
        "connect_timeout",
        "client_encoding",
        "options",
        "application_name",
        "fallback_application_name",
        "keepalives",
        "keepalives_idle",
        "keepalives_interval",
        "keepalives_count",
        "tcp_user_timeout",
        "replication",
        "gssencmode",
        "sslmode",
        "requiressl",
        "sslcompression",
        "sslcert",
        "sslkey",
        "sslpassword",
        "sslcertmode",
        "sslrootcert",
        "sslcrl",
        "sslcrldir",
        "sslsni",
        "requirepeer",
        "ssl_min_protocol_version",
        "ssl_max_protocol_version",
        "krbsrvname",
        "gsslib",
        "gssdelegation",
        "service",
        "target_session_attrs",
        "load_balance_hosts",
    ]
)
_PERMANENT = (
    "password authentication failed",
    "no password supplied",
    "does not exist",
    "pg_hba.conf",
    "invalid connection option",
    "invalid uri",
    "invalid percent-encoded",
    'missing "="',
    "unterminated quoted string",
    "invalid integer value",
    "invalid sslmode",
    "authentication failed",
    "permission denied",
    "must be owner",
)


def is_database_target(location: str) -> bool:
    """Whether `location` is written as a PostgreSQL target (URL or keyword string)."""
    if location.startswith(_SCHEMES):
        return True
    match = _KEYWORD.match(location)
    return match is not None and match.group(1).lower() in _KNOWN_KEYWORDS


def database_target(location: str) -> str | None:
    """`location` if it is a database target, None if it is a directory path.

    Raises `InvalidInput` (one line, no password) for a string that is neither: another
    URL scheme (`mysql://...`), a `key=value` string with a keyword libpq does not know,
    or a target libpq cannot parse (a bad percent-escape, an unterminated quote).
    """
    if not isinstance(location, str) or not location:
        raise InvalidInput("a store location is a directory path or a PostgreSQL target")
    if is_database_target(location):
        try:
            from psycopg.conninfo import conninfo_to_dict
        except ImportError:  # pragma: no cover - depends on the installed extras
            return location
        try:
            params = conninfo_to_dict(location)
        except Exception as exc:  # psycopg.ProgrammingError: the string does not parse
            raise InvalidInput(
                f"store location {describe(location)} is not a valid PostgreSQL target: "
                f"{_first_line(scrub(str(exc), location))}"
            ) from None
        check_host_names(str(params.get("host") or ""), location)
        return location
    if "://" in location or "=" in location.split("/")[0] or _KEYWORD.match(location):
        raise InvalidInput(
            f"store location {describe(location)} is neither a directory path nor a "
            "PostgreSQL target (postgresql://..., postgres://..., or host=... dbname=...)"
        )
    return None


def check_host_names(hosts: str, location: str) -> None:
    """Refuse with `InvalidInput` a host name that no resolver can look up (`a..b`: an empty
    label, or a label over 63 characters), which the `idna` codec would raise as a
    `UnicodeError` at connection time. `hosts` is libpq's `host`: comma-separated names,
    addresses or socket directories (`/...`, `@...`), which pass."""
    for host in hosts.split(","):
        host = host.strip()
        if not host or host.startswith(("/", "@")):
            continue
        try:
            host.encode("idna")
        except UnicodeError:
            raise InvalidInput(
                f"store location {describe(location)} names the host {host[:80]!r}, which is "
                "not a host name (an empty label, or a label longer than 63 characters)"
            ) from None


def describe(location: str) -> str:
    """`location` quoted for a message, its password replaced by `***` (parsed, see `mask`)."""
    shown = mask(location)
    if len(shown) > 120:
        shown = shown[:117] + "..."
    return repr(shown)


def _pair_spans(conninfo: str) -> list[tuple[str, int, int]]:
    """The `(keyword, start, end)` of each value of a libpq keyword string, as libpq splits
    it: `key = value` pairs separated by white space, a value either single-quoted (with
    backslash escapes) or running to the next white space. Stops at what does not parse."""
    spans: list[tuple[str, int, int]] = []
    i, n = 0, len(conninfo)
    while i < n:
        while i < n and conninfo[i].isspace():
            i += 1
        match = _KEY.match(conninfo, i)
        if match is None:
            break
        i = match.end()
        start = i
        if i < n and conninfo[i] == "'":
            i += 1
            while i < n and conninfo[i] != "'":
                i += 2 if conninfo[i] == "\\" else 1
            i = min(i + 1, n)
        else:
            while i < n and not conninfo[i].isspace():
                i += 1
        spans.append((match.group(1).lower(), start, i))
    return spans


def _url_spans(url: str) -> list[tuple[int, int]]:
    """Where a URL's passwords are written: after the user name in its user information,
    and each `password=` value of its query."""
    spans: list[tuple[int, int]] = []
    scheme_end = url.find("://") + 3
    authority_end = len(url)
    for stop in "/?#":
        found = url.find(stop, scheme_end)
        if found != -1:
            authority_end = min(authority_end, found)
    at = url.rfind("@", scheme_end, authority_end)
    if at != -1:
        colon = url.find(":", scheme_end, at)
        if colon != -1:
            spans.append((colon + 1, at))
    query = url.find("?", scheme_end)
    if query != -1:
        end = url.find("#", query)
        end = len(url) if end == -1 else end
        offset = query + 1
        for part in url[query + 1 : end].split("&"):
            key, sep, _ = part.partition("=")
            if sep and unquote(key).strip().lower() == "password":
                spans.append((offset + len(key) + 1, offset + len(part)))
            offset += len(part) + 1
    return spans


def _secret_spans(conninfo: str) -> list[tuple[int, int]]:
    if "://" in conninfo:
        return _url_spans(conninfo)
    return [(start, end) for key, start, end in _pair_spans(conninfo) if key == "password"]


def passwords(conninfo: str) -> set[str]:
    """The passwords written in `conninfo` (a URL or a keyword string), as written and
    decoded (percent-escapes, quotes); empty when there is none."""
    found: set[str] = set()
    for start, end in _secret_spans(conninfo):
        raw = conninfo[start:end]
        if len(raw) >= 2 and raw[0] == raw[-1] == "'":
            raw = re.sub(r"\\(.)", r"\1", raw[1:-1])
        if raw:
            found.update({raw, unquote(raw)})
    return found


def mask(conninfo: str) -> str:
    """`conninfo` with each password it holds replaced by `***`, found by parsing it (the
    rest of the string exactly as written)."""
    out, last = [], 0
    for start, end in sorted(_secret_spans(conninfo)):
        if end > start:
            out += [conninfo[last:start], "***"]
            last = end
    return "".join(out) + conninfo[last:]


def scrub(text: str, conninfo: str | None = None) -> str:
    """`text` without the password of `conninfo` nor any password written in a URL or a
    `password=` pair within it: `conninfo` itself is shown masked (`mask`); any other
    occurrence of its password is masked only as a whole token (see the module docstring)."""
    secrets = passwords(conninfo) if conninfo else set()
    pieces = text.split(conninfo) if conninfo else [text]
    shown = mask(conninfo) if conninfo else ""
    cleaned = []
    for piece in pieces:
        piece = _URL_PASSWORD.sub(r"\1***\3", piece)
        piece = _QUERY_PASSWORD.sub(r"\1***", piece)
        piece = _PAIR_PASSWORD.sub(r"\1***", piece)
        for secret in sorted(secrets, key=len, reverse=True):
            pattern = rf"(?<![\w%.+-]){re.escape(secret)}(?![\w%.+-])"
            piece = re.sub(pattern, "***", piece)
        cleaned.append(piece)
    return shown.join(cleaned)


def is_permanent(exc: BaseException) -> bool:
    """Whether retrying cannot help: bad credentials, a missing database or role, a
    malformed connection string, a refused privilege (SQLSTATE classes 28, 3D, 42501)."""
    sqlstate = getattr(exc, "sqlstate", None) or ""
    if sqlstate.startswith(("28", "3D")) or sqlstate == "42501":
        return True
    message = str(exc).lower()
    return any(marker in message for marker in _PERMANENT)


#: The SQLSTATE classes and codes of a refusal that passes (decision R184): a connection
#: problem (class 08), a transaction rolled back for a conflict (40: serialization failure,
#: deadlock, a commit whose outcome is unknown), insufficient resources (53: disk full, out of
#: memory, too many connections), an operator's intervention (57: a statement timeout or a
#: cancel, a server shutting down or starting, an idle session ended; but not 57P04, a
#: database dropped), a lock not available (55P03: `lock_timeout`), an object in use (55006),
#: a system error (58: an I/O error). `25006` (a read-only transaction) and `55000` (`recovery
#: is in progress`) pass only on a server in recovery: a standby reached during a failover.
#: Every other refusal is for good: a constraint or a trigger (23, P0), a privilege (42501), a
#: statement the server cannot run (42, 22, 0A), data corrupted (XX).
TRANSIENT_SQLSTATES = (
    "08",
    "40",
    "53",
    "55P03",
    "55006",
    "57P01",
    "57P02",
    "57P03",
    "57P05",
    "57014",
    "58",
)


def refusal_passes(exc: BaseException, *, in_recovery: bool | None = None) -> bool:
    """Whether the server's refusal `exc` of a statement may pass if it is sent again
    (`TRANSIENT_SQLSTATES`); `in_recovery`: whether the server that refused is a standby
    (for 25006 and 55000; None: unknown, taken as passing). An error without a SQLSTATE
    (the client's: a lost connection) passes."""
    sqlstate = getattr(exc, "sqlstate", None) or ""
    if not sqlstate:
        return True
    if sqlstate in ("25006", "55000"):
        return in_recovery is not False
    return sqlstate.startswith(TRANSIENT_SQLSTATES)


def _first_line(text: str) -> str:
    lines = [line.strip() for line in text.splitlines() if line.strip()]
    return lines[0] if lines else "unparsable"
