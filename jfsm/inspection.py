"""`jfsm inspect PATH`: a durable store at a glance, strictly read-only (JF-STORE-024).

Reads the file store without opening it for writing: it takes the store's lock *shared*
(a store in use by a writer gives `store_locked`), creates, truncates, renames and deletes
nothing, so it works on a read-only copy or a backup. It reports every stack with its
summary, chunk count and canonical length against the threshold, the pending
forced-compression flag, the scenes and archives, the footprint against the quota, and the
files: the live generation, whether the store has its manifest (decision R27), and what the
next open would repair (a torn tail or unused preallocation after the last record, leftover
files), without repairing it. A store of a shared directory (the epoch format, decision
R173) is read as its latest established epoch: the report names that epoch, its owner's
lease, and whether a newer owner sealed it.

Exit code 0, or 2 with one line `jfsm inspect: <code>: <message>` on standard error:
`not_a_store` for a directory without a store (or no directory), the error's code for a
damaged (`store_corrupted`), locked (`store_locked`) or unreadable store
(`store_unavailable`, naming the errno).

A game in a PostgreSQL database is read with `jfsm inspect URL --game ID`: one consistent
snapshot, without taking the game from its owner.
"""

from __future__ import annotations

import json
import os
import stat
import sys
from typing import Any

from jfsm.errors import JfsmError, StoreLocked
from jfsm.image import QUOTA_BYTES
from jfsm.memory_index import MemoryIndex, StackState
from jfsm.spec import constants

__all__ = ["NotAStore", "describe", "examine", "inspect_store"]


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
        "meta": None if stack.meta is None else stack.meta.to_json(),
    }


def describe(image: Any) -> dict[str, Any]:
    """The inspection report of a store image, as JSON-ready data."""
    spec = constants()
    index = MemoryIndex(image)
    return {
        "game": _stack(index.game, spec.game_threshold),
        "forcedCompression": index.game.stack_meta().forced_compression,
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


class NotAStore(Exception):
    """The path holds no jfsm file store."""

    code = "not_a_store"


def examine(path: str) -> dict[str, Any]:
    """The inspection report of the file store in directory `path`, read without writing.

    Raises `NotAStore`, `StoreLocked` while a writer holds the store, `StoreCorrupted`,
    or `StoreUnavailable` for a file-system error (naming the errno).
    """
    from jfsm.stores.file.directory import read_contents
    from jfsm.stores.file.fsio import OsFileSystem
    from jfsm.stores.file.manifest import parse_name
    from jfsm.stores.file.store import fs_unavailable

    try:
        mode = os.stat(path).st_mode
    except FileNotFoundError as exc:
        raise NotAStore(f"no store directory at {path}") from exc
    except OSError as exc:  # name too long, not a directory on the way, permission denied
        raise fs_unavailable(path, "be read", exc, "closed") from exc
    if not stat.S_ISDIR(mode):
        raise NotAStore(f"{path} is not a directory")
    fs = OsFileSystem()
    try:
        lock = fs.lock_shared(path)
    except BlockingIOError as exc:
        raise StoreLocked(f"store {path} is locked by a writer", directory=path) from exc
    except OSError as exc:
        raise fs_unavailable(path, "be read", exc, "closed") from exc
    try:
        names = fs.listdir(path)
        kinds = {parsed.kind for parsed in map(parse_name, names) if parsed is not None}
        if not kinds & {"manifest", "snapshot", "log"}:
            raise NotAStore(f"{path} holds no jfsm store (no manifest, snapshot or log)")
        contents = read_contents(path, names, fs.read, quota=QUOTA_BYTES)
    except OSError as exc:
        raise fs_unavailable(path, "be read", exc, "closed") from exc
    finally:
        fs.unlock(lock)
    found = contents.survey
    report = describe(contents.image)
    epoch: dict[str, Any] | None = None
    if contents.epoch is not None:
        from jfsm.stores.file.ownership import current_lease

        lease = current_lease(path)
        epoch = {
            "token": contents.epoch.token,
            "owner": None if lease is None else lease.owner,
            "leaseLive": lease is not None and lease.live(),
        }
    report["files"] = {
        "format": "epochs" if epoch is not None else "single-process",
        "epoch": epoch,
        "generation": found.live.generation,
        "manifest": found.has_manifest,
        "store": found.live.store,
        "snapshot": found.live.snapshot,
        "log": found.live.log,
        "logBytes": contents.log_size,
        "committedBytes": contents.end,
        "tail": contents.tail,
        "leftovers": list(found.leftovers),
    }
    return report


def _render_files(files: dict[str, Any]) -> list[str]:
    manifest = "manifest" if files["manifest"] else "no manifest (written before R27)"
    epoch = files.get("epoch")
    if epoch is not None:
        live = "live" if epoch["leaseLive"] else "over"
        manifest = f"epoch {epoch['token']} of {epoch['owner'] or 'no owner'} (lease {live})"
    lines = [
        f"{'files':<24} generation {files['generation']}, {manifest}, "
        f"log {files['committedBytes']:,} bytes committed"
    ]
    after = files["logBytes"] - files["committedBytes"]
    if files["tail"] == "torn":
        lines.append(
            f"{'torn tail':<24} {after:,} bytes after byte {files['committedBytes']:,} "
            "(an uncommitted write: the next open drops it)"
        )
    elif files["tail"] == "sealed":
        lines.append(
            f"{'sealed':<24} by a newer owner after byte {files['committedBytes']:,} "
            "(what follows counts for no reader)"
        )
    elif files["tail"] == "zeros":
        lines.append(
            f"{'unclosed log':<24} {after:,} zero bytes of preallocation (the next open trims them)"
        )
    if files["leftovers"]:
        lines.append(
            f"{'leftovers':<24} {', '.join(files['leftovers'])} (the next open removes them)"
        )
    return lines


def inspect_store(path: str, *, as_json: bool = False, game: str | None = None) -> int:
    """Print the report of the file store at `path`, or of game `game` in the PostgreSQL
    database at `path` (a `postgresql://` URL; read in one snapshot, without taking the game
    over, with the database's marks of a lost history, `historyLost`); 0 on success, 2 on
    error (one line)."""
    from jfsm.stores.location import is_database_url

    try:
        if is_database_url(path):
            if not game:
                raise NotAStore("a postgresql:// store needs --game ID")
            from jfsm.stores.postgres.history import history_lost_marks
            from jfsm.stores.postgres.store import read_image

            report = describe(read_image(path, game))
            # the database's marks of a lost history (R182): every worker refuses to write
            report["historyLost"] = history_lost_marks(path)
        elif game is not None:  # a directory holds one game: --game would change nothing
            raise NotAStore(f"--game is for a postgresql:// store; {path} is a directory path")
        else:
            report = examine(path)
    except (JfsmError, NotAStore) as exc:
        code = getattr(exc, "code", "error")
        print(f"jfsm inspect: {code}: {exc}", file=sys.stderr)
        return 2
    except ValueError as exc:  # records that do not parse (pydantic's errors are ValueErrors)
        first = str(exc).splitlines()[0] if str(exc) else type(exc).__name__
        print(
            f"jfsm inspect: store_corrupted: {path}: records do not parse: {first}", file=sys.stderr
        )
        return 2
    if as_json:
        print(json.dumps(report, indent=2, ensure_ascii=False))
    elif "files" in report:
        print(_render(report) + "\n" + "\n".join(_render_files(report["files"])))
    else:
        print(_render(report))
        for mark in report.get("historyLost", []):
            print(
                f"HISTORY LOST (every worker refuses to write; jfsm pg-migrate URL "
                f"--clear-history-lost): {mark['detected_at']} by {mark['detected_by']}: "
                f"{mark['reason']}"
            )
    return 0
