"""Failure traces on disk: shell-safe names, bounded size, one run's traces per directory.

A trace is JSON (`jfsm-conformance-trace/1`): the driver spec, the threshold overrides, the
failure (check, IDs, message), the session's steps (complete: `jfsm conformance replay`
runs them again) and the protocol messages around the failure (for reading only: long
strings are cut to `TEXT_LIMIT` code points with a marker naming their full length and
SHA-256, and at most `MESSAGE_LIMIT` messages are kept, the last ones).

A trace file is capped at `TRACE_LIMIT` bytes (1 MiB; decision R85). A string of a step
longer than `PACK_OVER` code points is stored packed (zlib, base64, with its length and a
preview; `unpack` restores it exactly for the replay): the suite's long texts repeat, so a
300,000-code-point text takes a few KiB. If the trace is still over the cap, the earliest
messages are left out (counted in the leading note) until it fits: the messages nearest the
failure, its window, are kept. Only steps that alone exceed the cap (never seen) would
leave a trace over it.

`TraceDir.clear()` removes the traces of a previous run at the start of a run, so the
report directory only ever holds the current run's traces; while a run goes on, no other
run may start in its report folder (`usage.hold_report_folder`, decision R161), so the
replay commands it prints keep working. Names are `NN-slug.json` where the slug keeps only
`[A-Za-z0-9._-]`: the printed replay command works in any shell.

`read_trace(path)` reads a trace for `jfsm conformance replay`: a file that is missing,
unreadable, not JSON or not this suite's trace is a `TraceError` with a one-line message
(exit 2, decision R160), never a traceback. A trace of the workers machine (K driver
processes on one store) is a history to read, not steps one session can run: it is refused
the same way, saying so.
"""

from __future__ import annotations

import base64
import hashlib
import json
import re
import zlib
from collections import deque
from collections.abc import Iterator
from pathlib import Path
from typing import Any

__all__ = [
    "MESSAGE_LIMIT",
    "PACK_OVER",
    "TEXT_LIMIT",
    "TRACE_FORMAT",
    "TRACE_LIMIT",
    "TraceDir",
    "TraceError",
    "Transcript",
    "compact",
    "pack",
    "read_trace",
    "slug",
    "unpack",
]

TRACE_FORMAT = "jfsm-conformance-trace/1"
TEXT_LIMIT = 2000
MESSAGE_LIMIT = 400
TRACE_LIMIT = 1 << 20  # bytes of one trace file
PACK_OVER = 2048  # code points: a longer string of a step is stored packed
_PACKED = "$jfsm-packed-text"
_NAME = re.compile(r"^(lane-\d+-)?\d{2,}-[A-Za-z0-9._-]*\.json$")


def slug(text: str, limit: int = 60) -> str:
    """`text` reduced to `[A-Za-z0-9._-]` (runs of anything else become one `-`)."""
    return re.sub(r"[^A-Za-z0-9._]+", "-", text).strip("-.")[:limit] or "trace"


def compact(value: Any, limit: int = TEXT_LIMIT) -> Any:
    """A copy of `value` with every string longer than `limit` code points cut, marked with
    its full length and SHA-256 (of its UTF-8 bytes, lone surrogates escaped)."""
    if isinstance(value, str):
        if len(value) <= limit or value.startswith("…[cut: ", limit):
            return value  # short, or cut already
        raw = value.encode("utf-8", "surrogatepass")
        digest = hashlib.sha256(raw).hexdigest()[:16]
        return f"{value[:limit]}…[cut: {len(value)} code points, sha256 {digest}…]"
    if isinstance(value, dict):
        return {k: compact(v, limit) for k, v in value.items()}
    if isinstance(value, list):
        return [compact(v, limit) for v in value]
    return value


def pack(value: Any) -> Any:
    """A copy of `value` with every string longer than `PACK_OVER` code points replaced by
    `{"$jfsm-packed-text": "zlib+base64", "length", "preview", "data"}` (lossless, lone
    surrogates included)."""
    if isinstance(value, str):
        if len(value) <= PACK_OVER:
            return value
        raw = value.encode("utf-8", "surrogatepass")
        return {
            _PACKED: "zlib+base64",
            "length": len(value),
            "preview": value[:120],
            "data": base64.b64encode(zlib.compress(raw, 9)).decode("ascii"),
        }
    if isinstance(value, dict):
        return {k: pack(v) for k, v in value.items()}
    if isinstance(value, list):
        return [pack(v) for v in value]
    return value


def unpack(value: Any) -> Any:
    """The inverse of `pack`; `ValueError` if a packed string is damaged."""
    if isinstance(value, dict):
        if value.get(_PACKED) == "zlib+base64":
            try:
                raw = zlib.decompress(base64.b64decode(value["data"], validate=True))
                text = raw.decode("utf-8", "surrogatepass")
            except (KeyError, TypeError, ValueError, zlib.error) as exc:
                raise ValueError(f"a packed text of the trace is damaged: {exc}") from exc
            if len(text) != value.get("length"):
                raise ValueError("a packed text of the trace does not have its stated length")
            return text
        return {k: unpack(v) for k, v in value.items()}
    if isinstance(value, list):
        return [unpack(v) for v in value]
    return value


class TraceError(ValueError):
    """A file `jfsm conformance replay` cannot replay; the message is one line."""


def read_trace(path: str | Path) -> dict[str, Any]:
    """The trace at `path`, checked to be a trace of this suite that a session can replay:
    `format`, `driver`, `failure` (`ids`, `message`) and `steps` (`{step, args}` each).
    Raises `TraceError` otherwise (module docstring). The step names are checked by the
    replay itself, against the suite's step vocabulary."""
    try:
        text = Path(path).read_text(encoding="utf-8")
    except FileNotFoundError:
        raise TraceError(f"{path}: no such trace file") from None
    except (OSError, UnicodeDecodeError) as exc:
        raise TraceError(f"{path}: cannot read the trace: {_reason(exc)}") from None
    try:
        trace = json.loads(text)
    except ValueError as exc:
        raise TraceError(f"{path}: not JSON ({exc}), so not a {TRACE_FORMAT} trace") from None
    if not isinstance(trace, dict) or trace.get("format") != TRACE_FORMAT:
        raise TraceError(f"{path}: not a {TRACE_FORMAT} trace")
    steps, failure = trace.get("steps"), trace.get("failure")
    shaped = (
        isinstance(trace.get("driver"), str)
        and isinstance(failure, dict)
        and isinstance(failure.get("ids"), list)
        and isinstance(failure.get("message"), str)
        and isinstance(steps, list)
        and all(
            isinstance(s, dict)
            and isinstance(s.get("step"), str)
            and isinstance(s.get("args"), dict)
            for s in steps
        )
    )
    if not shaped:
        raise TraceError(
            f"{path}: a {TRACE_FORMAT} trace needs driver, failure (ids, message) and steps "
            "({step, args} each); this one is damaged"
        )
    if str(trace.get("source", "")).startswith("machine workers"):
        raise TraceError(
            f"{path}: a history of the workers machine (K driver processes on one store), "
            "read, not replayed step by step; run jfsm conformance again (--seed N "
            "repeats the sequences) to see it fail again"
        )
    return trace


def _is_step(step: Any) -> bool:
    return (
        isinstance(step, dict)
        and isinstance(step.get("step"), str)
        and isinstance(step.get("args"), dict)
    )


def _reason(exc: BaseException) -> str:
    return getattr(exc, "strerror", None) or str(exc).splitlines()[0]


def _left_out(n: int) -> dict[str, Any]:
    return {"note": f"{n} earlier message(s) left out of this trace", "leftOut": n}


def compact_messages(messages: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """The last `MESSAGE_LIMIT` messages, compacted, after one note counting every message
    left out: those dropped here and those a leading note (`Transcript.since`) counted."""
    earlier = 0
    if messages and isinstance(messages[0], dict) and "leftOut" in messages[0]:
        earlier, messages = int(messages[0]["leftOut"]), messages[1:]
    dropped = max(0, len(messages) - MESSAGE_LIMIT)
    kept = [compact(m) for m in messages[dropped:]]
    if dropped + earlier:
        kept.insert(0, _left_out(dropped + earlier))
    return kept


class Transcript:
    """The protocol messages of a run, as a trace shows them: each entry compacted when it
    is recorded, and only the last `MESSAGE_LIMIT` kept.

    A run's memory thus stays bounded whatever the driver answers: a dump of a 30 MiB store
    is held as a few KiB (decision R58). `mark()` numbers the next entry; `since(mark)` gives
    the entries recorded after it, with a note naming how many were left out."""

    def __init__(self, limit: int = MESSAGE_LIMIT) -> None:
        self._entries: deque[dict[str, Any]] = deque(maxlen=limit)
        self._total = 0

    def append(self, entry: dict[str, Any]) -> None:
        self._entries.append(compact(entry))
        self._total += 1

    def clear(self) -> None:
        self._entries.clear()

    def mark(self) -> int:
        """The number the next entry will have."""
        return self._total

    def since(self, mark: int) -> list[dict[str, Any]]:
        """The entries from `mark` on that are still held, after a note for those that are not."""
        wanted = self._total - mark
        kept = list(self._entries)[-wanted:] if wanted > 0 else []
        return ([_left_out(wanted - len(kept))] if wanted > len(kept) else []) + kept

    def __iter__(self) -> Iterator[dict[str, Any]]:
        return iter(self._entries)

    def __reversed__(self) -> Iterator[dict[str, Any]]:
        return reversed(self._entries)

    def __len__(self) -> int:
        return len(self._entries)


class TraceDir:
    """Where one run writes its traces (`REPORT_DIR/traces`), numbered in the order written.

    A part of the run that goes on beside the rest (a lane, decision R170) writes under a
    `prefix` (`lane-N-`); `adopt` gives such a trace the run's next number once the lanes
    are put in order."""

    def __init__(self, path: Path, prefix: str = "") -> None:
        self.path = path
        self.prefix = prefix
        self.count = 0

    def clear(self) -> int:
        """Remove trace files of earlier runs (only `NN-*.json` files); returns how many."""
        removed = 0
        if self.path.is_dir():
            for old in self.path.iterdir():
                if old.is_file() and _NAME.match(old.name):
                    old.unlink()
                    removed += 1
        return removed

    def write(
        self,
        *,
        source: str,
        driver: str,
        thresholds: dict[str, int] | None,
        failure: dict[str, Any],
        steps: list[dict[str, Any]],
        messages: list[dict[str, Any]],
        note: str | None = None,
    ) -> Path:
        """Write one trace; `messages` may be compacted already (compacting is idempotent)."""
        self.path.mkdir(parents=True, exist_ok=True)
        self.count += 1
        path = self.path / f"{self.prefix}{self.count:02d}-{slug(source)}.json"
        trace = {
            "format": TRACE_FORMAT,
            "driver": driver,
            "thresholds": thresholds,
            "source": source,
            "failure": failure,
            "note": note,
            "steps": pack(steps),
            "messages": compact_messages(messages),
        }
        path.write_text(_capped(trace), encoding="utf-8")
        return path

    def adopt(self, trace: str, source: str) -> str:
        """Rename `trace` (another `TraceDir`'s file in this folder) to this run's next
        number; its new path. `OSError` if it cannot be renamed."""
        self.count += 1
        path = self.path / f"{self.count:02d}-{slug(source)}.json"
        Path(trace).replace(path)
        return str(path)


def _capped(trace: dict[str, Any]) -> str:
    """The trace as JSON of at most `TRACE_LIMIT` bytes: the earliest messages are left out
    (counted in the leading note) until it fits, keeping those nearest the failure."""
    text = json.dumps(trace, ensure_ascii=True, indent=1)
    if len(text) <= TRACE_LIMIT:
        return text
    messages = list(trace["messages"])
    earlier = 0
    if messages and "leftOut" in messages[0]:
        earlier = int(messages.pop(0)["leftOut"])
    sizes = [len(json.dumps(m, ensure_ascii=True, indent=1)) + 2 for m in messages]
    excess = len(text) - TRACE_LIMIT + 200  # the note's own size
    dropped = 0
    while dropped < len(messages) and excess > 0:
        excess -= sizes[dropped]
        dropped += 1
    kept = messages[dropped:]
    if dropped + earlier:
        kept.insert(0, _left_out(dropped + earlier))
    return json.dumps({**trace, "messages": kept}, ensure_ascii=True, indent=1)
