"""`jfsm inspect PATH`: a durable store at a glance.

Opens the file store (taking its lock: a store in use by a writer gives `store_locked`), or
reads one game of a PostgreSQL database (`jfsm inspect URL --game ID`: one consistent
snapshot, without taking the game from its owner),
and reports every stack with its summary, chunk count and canonical length against the
threshold, the pending forced-compression flag, the scenes and archives, and the footprint
against the quota. Exit code 0, or 2 with the error's code and message.
"""

from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import Any

from jfsm.errors import JfsmError
from jfsm.memory_index import MemoryIndex, StackState
from jfsm.spec import constants

__all__ = ["describe", "inspect_store"]


def _stack(stack: StackState, threshold: int) -> dict[str, Any]:
    return {
        "summary": None
        if stack.summary is None
        else {
            "chars": len(stack.summary.text),
            "throughSeq": stack.summary.through_seq,
            "compressionCallId": stack.summary.compression_call_id,
        },
        "chunks": len(stack.chunks),
        "seqs": [min(stack.chunks), max(stack.chunks)] if stack.chunks else [],
        "length": stack.length,
        "threshold": threshold,
        "due": stack.length > threshold and bool(stack.chunks),
        "meta": stack.meta,
    }


def describe(image: Any) -> dict[str, Any]:
    """The inspection report of a store image, as JSON-ready data."""
    spec = constants()
    index = MemoryIndex(image)
    return {
        "game": _stack(index.game, spec.game_threshold),
        "forcedCompression": bool((index.game.meta or {}).get("forcedCompression")),
        "rounds": len(index.rounds),
        "scenes": {
            sid: _stack(stack, spec.catalyst_threshold) for sid, stack in index.scenes.items()
        },
        "archives": {sid: record.state for sid, record in index.archives.items()},
        "keys": len(image),
        "changeLogEntries": len(image.change_log()),
        "footprint": image.footprint(),
        "quota": image.quota,
    }


def _render(report: dict[str, Any]) -> str:
    def stack_line(name: str, s: dict[str, Any]) -> str:
        summary = "no summary"
        if s["summary"] is not None:
            summary = (
                f"summary {s['summary']['chars']:,} chars through seq {s['summary']['throughSeq']}"
            )
        due = "  COMPRESSION DUE" if s["due"] else ""
        span = f" (seq {s['seqs'][0]}..{s['seqs'][1]})" if s["seqs"] else ""
        return (
            f"{name:<24} {s['length']:>9,} / {s['threshold']:,} chars  "
            f"{s['chunks']} chunks{span}, {summary}{due}"
        )

    used = report["footprint"] / report["quota"] * 100
    lines = [
        stack_line("game stack", report["game"]),
        f"{'forced compression':<24} {'PENDING' if report['forcedCompression'] else 'clear'}",
        f"{'rounds':<24} {report['rounds']}",
    ]
    lines += [stack_line(f"scene {sid}", s) for sid, s in sorted(report["scenes"].items())]
    if report["archives"]:
        archived = ", ".join(
            f"{sid} ({state})" for sid, state in sorted(report["archives"].items())
        )
        lines.append(f"{'archived scenes':<24} {archived}")
    lines.append(
        f"{'footprint':<24} {report['footprint']:,} / {report['quota']:,} bytes ({used:.1f}%), "
        f"{report['keys']} keys, {report['changeLogEntries']} change-log entries"
    )
    return "\n".join(lines)


def inspect_store(path: str, *, as_json: bool = False, game: str | None = None) -> int:
    """Print the report of the file store at `path`, or of game `game` in the PostgreSQL
    database at `path` (a `postgresql://` URL; read in one snapshot, without taking the
    game over); 0 on success, 2 on error."""
    from jfsm.stores.file import FileStore
    from jfsm.stores.location import is_database_url

    try:
        if is_database_url(path):
            if not game:
                raise FileNotFoundError("a postgresql:// store needs --game ID")
            from jfsm.stores.postgres import read_image

            report = describe(read_image(path, game))
        elif not Path(path).is_dir():
            raise FileNotFoundError(f"no store directory at {path}")
        else:
            with FileStore.open(path) as store:
                report = describe(store.image)
    except (JfsmError, FileNotFoundError, NotADirectoryError) as exc:
        code = getattr(exc, "code", "not_found")
        print(f"jfsm inspect: {code}: {exc}", file=sys.stderr)
        return 2
    print(json.dumps(report, indent=2, ensure_ascii=False) if as_json else _render(report))
    return 0
