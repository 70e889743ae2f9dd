"""The durable file store's file names and its manifest.

Pure functions from bytes to values and back; no file is opened here (`jfsm.stores.file`
does the I/O and holds the lifecycle, `jfsm.stores.file.directory` decides which files are live).
The codecs are split by concept, and their names are re-exported here:

- `jfsm.stores.file.log`: the log's framed records and its header record, `read_log`;
- `jfsm.stores.file.snapshot`: the snapshot object, `read_snapshot`;
- `jfsm.stores.file.scan`: reading JSON out of the bytes in bounded windows (decision R51).

# The manifest

The manifest (`manifest`, decision R27) names the live snapshot and log: one JCS line
`{"format":"jfsm-file-store/1","generation":g,"log":...,"snapshot":...|null,"store":...}`
and a second line with the CRC-32 of the first line's bytes in 8 hex digits.

# Reading

The CRCs vouch for the bytes, and they are JCS written by these modules, so reading does
not re-canonicalize values: it checks that the content is UTF-8 and has the layout written
(each member name a string, each value complete JSON, parsed and dropped, no duplicate
names, nothing after the object) and keeps each value's bytes as they are in the file.
With `verify=True` it checks more, at the cost of re-encoding everything: each value must
be the canonical JCS of what it parses to (so storable I-JSON) and each snapshot and record
must be byte for byte what these modules would write for its content.

Every reader raises `StoreCorrupted` whose message and `details` name the file, the byte
offset and the reason.
"""

from __future__ import annotations

import json
import re
import zlib
from dataclasses import dataclass

from jfsm.jcs import canonical_bytes
from jfsm.stores.file.scan import corrupted

__all__ = [
    "LOCK_NAME",
    "MANIFEST_NAME",
    "MANIFEST_TMP",
    "FileName",
    "Manifest",
    "decode_manifest",
    "encode_epochs_marker",
    "encode_manifest",
    "is_epochs_marker",
    "log_name",
    "parse_name",
    "snapshot_name",
]

LOCK_NAME = "lock"
MANIFEST_NAME = "manifest"
MANIFEST_TMP = "manifest.tmp"
MANIFEST_FORMAT = "jfsm-file-store/1"
#: the manifest of a store in the epoch format of a shared directory (decision R173): it names
#: no file (the latest established epoch is the store, `jfsm.stores.file.epochs`) and keeps a
#: jfsm that knows only `MANIFEST_FORMAT` out (`store_corrupted`, never a write)
EPOCHS_FORMAT = "jfsm-file-store/epochs"

_SNAPSHOT = re.compile(r"snapshot\.(\d{8,})\.([0-9a-f]{8})\.json")
_LOG = re.compile(r"log\.(\d{8,})\.jfl")
_TMP = re.compile(r"snapshot\.(\d{8,})\.tmp")


def snapshot_name(generation: int, crc: int) -> str:
    """The file name of generation `generation`'s snapshot whose bytes have CRC-32 `crc`."""
    return f"snapshot.{generation:08d}.{crc:08x}.json"


def log_name(generation: int) -> str:
    """The file name of generation `generation`'s log."""
    return f"log.{generation:08d}.jfl"


# -- file names ------------------------------------------------------------------------------
@dataclass(frozen=True, slots=True)
class FileName:
    """A store file name, parsed: `kind` is `snapshot`, `log`, `snapshot-tmp`, `manifest`,
    `manifest-tmp` or `lock`; `generation` and `crc` are set where the name carries them."""

    kind: str
    generation: int | None = None
    crc: int | None = None


def parse_name(name: str) -> FileName | None:
    """What the file `name` is in a store directory, or None for a name the store never
    writes (such files are left alone)."""
    if match := _SNAPSHOT.fullmatch(name):
        return FileName("snapshot", int(match[1]), int(match[2], 16))
    if match := _LOG.fullmatch(name):
        return FileName("log", int(match[1]))
    if match := _TMP.fullmatch(name):
        return FileName("snapshot-tmp", int(match[1]))
    kinds = {MANIFEST_NAME: "manifest", MANIFEST_TMP: "manifest-tmp", LOCK_NAME: "lock"}
    return FileName(kinds[name]) if name in kinds else None


# -- the manifest ----------------------------------------------------------------------------
@dataclass(frozen=True, slots=True)
class Manifest:
    """The live files: generation `generation`'s snapshot (None for generation 0, whose base
    is `{}`) and log."""

    generation: int
    snapshot: str | None
    log: str
    store: str | None = None  # the store's id, in every log header; None: a log without one


def encode_manifest(manifest: Manifest) -> bytes:
    """The manifest file's bytes: a JCS line and its CRC-32 line."""
    line = canonical_bytes(
        {
            "format": MANIFEST_FORMAT,
            "generation": manifest.generation,
            "log": manifest.log,
            "snapshot": manifest.snapshot,
            "store": manifest.store,
        }
    )
    return line + b"\n" + f"{zlib.crc32(line):08x}".encode() + b"\n"


def encode_epochs_marker() -> bytes:
    """The manifest of a store in the epoch format: its JCS line and its CRC line."""
    line = canonical_bytes({"format": EPOCHS_FORMAT})
    return line + b"\n" + f"{zlib.crc32(line):08x}".encode() + b"\n"


def is_epochs_marker(data: bytes) -> bool:
    """Whether `data` is the manifest of a store in the epoch format."""
    return data == encode_epochs_marker()


def decode_manifest(path: str, data: bytes) -> Manifest:
    """The manifest in `data`. Raises `StoreCorrupted` naming `path` if it is damaged, of
    another format, or names files that do not belong to its generation."""
    line, newline, rest = data.partition(b"\n")
    if not newline or not re.fullmatch(rb"[0-9a-f]{8}\n", rest):
        raise corrupted(path, len(line), "manifest is not a line and its CRC line")
    if zlib.crc32(line) != int(rest[:8], 16):
        raise corrupted(path, 0, "manifest CRC mismatch")
    try:
        doc = json.loads(line)
    except ValueError as exc:
        raise corrupted(path, 0, f"manifest is not JSON ({exc})") from exc
    if not isinstance(doc, dict) or doc.get("format") != MANIFEST_FORMAT:
        raise corrupted(path, 0, f"manifest is not of format {MANIFEST_FORMAT}")
    generation, log, snapshot = doc.get("generation"), doc.get("log"), doc.get("snapshot")
    store = doc.get("store")
    if (
        set(doc) != {"format", "generation", "log", "snapshot", "store"}
        or not (store is None or (isinstance(store, str) and re.fullmatch("[0-9a-f]{16}", store)))
        or type(generation) is not int
        or generation < 0
        or log != log_name(generation)
        or not (snapshot is None if generation == 0 else isinstance(snapshot, str))
    ):
        raise corrupted(path, 0, "manifest does not name a generation's snapshot and log")
    if snapshot is not None:
        parsed = parse_name(snapshot)
        if parsed is None or parsed.kind != "snapshot" or parsed.generation != generation:
            raise corrupted(
                path, 0, f"manifest names {snapshot!r}, not a snapshot of its generation"
            )
    return Manifest(generation, snapshot, log, store)
