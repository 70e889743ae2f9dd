"""The epoch format of a game's store in a directory that several processes share: each
ownership of the game is an *epoch* with files of its own (decision R173).

**The one concept: the bytes of an epoch store, and what a reader makes of them.** Pure
functions from names and bytes to values and back: nothing is opened here
(`jfsm.stores.file.ownership` does the I/O of taking, writing and sealing an epoch;
`jfsm.stores.file.directory` reads a store of either format).

# Files (in the game's store directory)

- `epoch.<T>.<g>.jfl`: generation `g` (8 digits, from 0) of epoch `T` (the fencing token of
  that ownership, 20 digits). Only `T`'s owner writes its *own records*, each with one
  `O_APPEND` write; anyone may append a *foreign record* (a veto or a seal, below).
- `base.<T>.<g>.<crc>.json`: the checkpoint base of log `T.g` (the snapshot codec,
  `jfsm.stores.file.snapshot`; `crc` the CRC-32 of its bytes). None for an empty base.
- `lease.<T>`: epoch `T`'s lease (`jfsm.stores.file.lease`), replaced by rename.
- `manifest`: `{"format":"jfsm-file-store/epochs"}` and its CRC line, so that a jfsm that
  knows only the single-process format refuses the store (`store_corrupted`) instead of
  writing files nobody reads (`jfsm.stores.file.manifest`).

# Records

Own records are framed as the single-process log's (`jfsm.stores.file.log`: magic `JFr1`,
length, CRCs), payloads in JCS:

- the header, first in every log: `{"epoch":{"base":...,"generation":g,"initial":n,
  "sides":{...},"store":...,"token":T}}` naming the log's base, the store's id, the side
  values (named JSON values the store keeps beside its image: the shared driver's
  participants, R173) and the length `n` of the record that follows it in the same write
  (0: none). That *initial* record is the change log carried over from the previous owner:
  the projection from the base to the current store, so a takeover keeps the checkpoint
  base and the change log exactly (JF-STORE-015);
- a projection (`{"deletes":...,"sets":...}`), as in the single-process log;
- a side value: `{"side":{"name":...,"value":...}}`;
- a continuation: `{"continued":g}`, the commit point of a checkpoint inside the epoch:
  from it on, the epoch goes on in log `g` (whose header names the new base).

Foreign records are 28 bytes: a 16-byte magic (a zero byte, `jfsm-seal/1` or
`jfsm-veto/1`, four zero bytes: no JCS payload holds a zero byte), the appender's token
(u64, big-endian) and the CRC-32 of those 24 bytes.

- A **seal** ends the log: every own record after the first seal is void, for every reader.
- A **veto** matters only at offset 0: a log that begins with one never becomes an epoch
  (its owner's header, appended after it, fails its position check). A veto anywhere else
  is skipped.

# Reading

An epoch is *established* when its lowest present log begins with a whole header (and the
initial record it announces). The store is the *latest established epoch*: follow its logs
from the lowest through the continuations committed before each log's first seal; the last
one holds the state: its base, its initial record, then its projections and side values up
to its first seal. Bytes that are no valid record end the content (a torn tail, a writer
killed mid-append) unless an own valid record follows them: that is damage,
`StoreCorrupted` naming the file and offset, unless a seal with the epoch's own token
follows (an owner that found foreign bytes it could not read gave its epoch up). Epochs
below the latest established one, and logs after a chain's end, are leftovers.

Errors: every reader raises `StoreCorrupted` naming the file, the byte offset and the
reason; `OSError` (`FileNotFoundError` for a file removed meanwhile) from `read`.
"""

from __future__ import annotations

import json
import os
import re
import struct
import zlib
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, field

from jfsm.image import StoreImage
from jfsm.jcs import canonical_bytes, string_bytes
from jfsm.projection import Projection
from jfsm.stores.file.log import MAGIC, decode_projection, encode_record, frame, record_at
from jfsm.stores.file.scan import corrupted
from jfsm.stores.file.snapshot import object_bytes, read_snapshot

__all__ = [
    "FOREIGN_SIZE",
    "EpochFiles",
    "EpochHeader",
    "EpochLog",
    "EpochName",
    "EpochState",
    "base_name",
    "changes",
    "encode_changes",
    "encode_continued",
    "encode_header",
    "encode_side",
    "epochs_of",
    "follow",
    "foreign_verdict",
    "has_seal",
    "latest_established",
    "lease_name",
    "log_name",
    "parse_epoch_name",
    "parse_log",
    "read_state",
    "seal_record",
    "veto_record",
]

_LOG = re.compile(r"epoch\.(\d{20})\.(\d{8})\.jfl")
_BASE = re.compile(r"base\.(\d{20})\.(\d{8})\.([0-9a-f]{8})\.json")
_LEASE = re.compile(r"lease\.(\d{20})")
_LEASE_TMP = re.compile(r"\.lease\.(\d{20})\.[0-9a-f]+\.tmp")

_FOREIGN = struct.Struct(">16sQ")
SEAL = b"\x00jfsm-seal/1\x00\x00\x00\x00"
VETO = b"\x00jfsm-veto/1\x00\x00\x00\x00"
assert len(SEAL) == len(VETO) == 16
FOREIGN_SIZE = _FOREIGN.size + 4

_HEADER_HEAD = b'{"epoch":'
_SIDE_HEAD = b'{"side":'
_CONTINUED_HEAD = b'{"continued":'
_PROJECTION_HEAD = b'{"deletes":'


# -- names -----------------------------------------------------------------------------------
def log_name(token: int, generation: int) -> str:
    """The file name of generation `generation` of epoch `token`'s log."""
    return f"epoch.{token:020d}.{generation:08d}.jfl"


def base_name(token: int, generation: int, crc: int) -> str:
    """The file name of the base of log `token.generation` whose bytes have CRC-32 `crc`."""
    return f"base.{token:020d}.{generation:08d}.{crc:08x}.json"


def lease_name(token: int) -> str:
    """The file name of epoch `token`'s lease."""
    return f"lease.{token:020d}"


@dataclass(frozen=True, slots=True)
class EpochName:
    """An epoch file's name, parsed: `kind` is `log`, `base`, `lease` or `lease-tmp`."""

    kind: str
    token: int
    generation: int | None = None
    crc: int | None = None


def parse_epoch_name(name: str) -> EpochName | None:
    """What `name` is in an epoch store, or None for a name the epoch format never writes."""
    if match := _LOG.fullmatch(name):
        return EpochName("log", int(match[1]), int(match[2]))
    if match := _BASE.fullmatch(name):
        return EpochName("base", int(match[1]), int(match[2]), int(match[3], 16))
    if match := _LEASE.fullmatch(name):
        return EpochName("lease", int(match[1]))
    if match := _LEASE_TMP.fullmatch(name):
        return EpochName("lease-tmp", int(match[1]))
    return None


@dataclass(slots=True)
class EpochFiles:
    """The files of one epoch found in a directory: its logs and bases by generation, and
    its other files (lease, lease being written)."""

    token: int
    logs: dict[int, str] = field(default_factory=dict)
    bases: dict[int, str] = field(default_factory=dict)
    others: list[str] = field(default_factory=list)

    def lowest(self) -> str | None:
        """The name of its lowest present log (where a chain of logs starts)."""
        return self.logs[min(self.logs)] if self.logs else None

    def names(self) -> list[str]:
        return [*self.logs.values(), *self.bases.values(), *self.others]


def epochs_of(names: Iterable[str]) -> dict[int, EpochFiles]:
    """The epochs whose files are among `names`, by token."""
    found: dict[int, EpochFiles] = {}
    for name in names:
        parsed = parse_epoch_name(name)
        if parsed is None:
            continue
        files = found.setdefault(parsed.token, EpochFiles(parsed.token))
        if parsed.kind == "log":
            assert parsed.generation is not None
            files.logs[parsed.generation] = name
        elif parsed.kind == "base":
            assert parsed.generation is not None
            files.bases[parsed.generation] = name
        else:
            files.others.append(name)
    return found


# -- records ---------------------------------------------------------------------------------
@dataclass(frozen=True, slots=True)
class EpochHeader:
    """A log's header record: its epoch and generation, its base (None: empty), the side
    values at its start, the store's id, and the length of the initial record after it."""

    token: int
    generation: int
    base: str | None
    sides: Mapping[str, bytes]
    store: str
    initial: int = 0


def encode_header(header: EpochHeader) -> bytes:
    """The framed header record of `header`."""
    base = b"null" if header.base is None else string_bytes(header.base)
    payload = (
        b'{"epoch":{"base":'
        + base
        + b',"generation":'
        + str(header.generation).encode()
        + b',"initial":'
        + str(header.initial).encode()
        + b',"sides":'
        + object_bytes(header.sides)
        + b',"store":'
        + string_bytes(header.store)
        + b',"token":'
        + str(header.token).encode()
        + b"}}"
    )
    return frame(payload)


def encode_side(name: str, value: bytes) -> bytes:
    """The framed record setting side value `name` to `value` (JCS bytes)."""
    return frame(b'{"side":{"name":' + string_bytes(name) + b',"value":' + value + b"}}")


def encode_continued(generation: int) -> bytes:
    """The framed continuation record: the epoch goes on in log `generation`."""
    return frame(b'{"continued":' + str(generation).encode() + b"}")


def _foreign(magic: bytes, token: int) -> bytes:
    head = _FOREIGN.pack(magic, token)
    return head + struct.pack(">I", zlib.crc32(head))


def seal_record(token: int) -> bytes:
    """A seal appended by the holder of `token`: the log ends before it."""
    return _foreign(SEAL, token)


def veto_record(token: int) -> bytes:
    """A veto appended by the holder of `token`: first in a log, the log's epoch never
    becomes established."""
    return _foreign(VETO, token)


def _foreign_at(data: bytes, offset: int) -> tuple[str, int] | None:
    """(`seal` or `veto`, the appender's token) of a valid foreign record at `offset`."""
    if len(data) - offset < FOREIGN_SIZE:
        return None
    magic, token = _FOREIGN.unpack_from(data, offset)
    if magic not in (SEAL, VETO):
        return None
    (crc,) = struct.unpack_from(">I", data, offset + _FOREIGN.size)
    if zlib.crc32(data[offset : offset + _FOREIGN.size]) != crc:
        return None
    return ("seal" if magic == SEAL else "veto"), token


def foreign_verdict(data: bytes) -> str:
    """What the foreign bytes `data` (appended after an owner's last record) are: `vetoes`
    (only whole vetoes: nothing changed), `sealed` (a seal among whole records) or
    `garbage` (bytes that are no whole foreign record)."""
    verdict = "vetoes"
    for offset in range(0, len(data), FOREIGN_SIZE):
        found = _foreign_at(data, offset)
        if found is None:
            return "garbage"
        if found[0] == "seal":
            verdict = "sealed"
    return verdict


def has_seal(data: bytes) -> bool:
    """Whether a valid seal lies anywhere in `data` (bytes after a broken owner's last known
    record, its own torn or unsynced record among them)."""
    return _seal_after(data, 0) is not None


def _decode_header(path: str, data: bytes, start: int, stop: int) -> EpochHeader:
    try:
        doc = json.loads(data[start:stop])["epoch"]
        base, generation, initial = doc["base"], doc["generation"], doc["initial"]
        sides, store, token = doc["sides"], doc["store"], doc["token"]
        if set(doc) != {"base", "generation", "initial", "sides", "store", "token"}:
            raise ValueError("unexpected members")
        if not (base is None or isinstance(base, str)) or not isinstance(sides, dict):
            raise ValueError("base or sides")
        if not all(type(n) is int and n >= 0 for n in (generation, initial, token)):
            raise ValueError("numbers")
        if not isinstance(store, str):
            raise ValueError("store")
    except (ValueError, KeyError, TypeError) as exc:
        raise corrupted(path, 0, f"undecodable epoch header ({exc})") from exc
    values = {name: canonical_bytes(value) for name, value in sides.items()}
    return EpochHeader(token, generation, base, values, store, initial)


def _decode_side(path: str, offset: int, data: bytes, start: int, stop: int) -> tuple[str, bytes]:
    try:
        doc = json.loads(data[start:stop])["side"]
        name, value = doc["name"], doc["value"]
        if set(doc) != {"name", "value"} or not isinstance(name, str):
            raise ValueError("not a name and a value")
    except (ValueError, KeyError, TypeError) as exc:
        raise corrupted(path, offset, f"undecodable side value ({exc})") from exc
    return name, canonical_bytes(value)


def _decode_continued(path: str, offset: int, data: bytes, start: int, stop: int) -> int:
    try:
        generation = json.loads(data[start:stop])["continued"]
        if type(generation) is not int or generation < 1:
            raise ValueError("not a generation")
    except (ValueError, KeyError, TypeError) as exc:
        raise corrupted(path, offset, f"undecodable continuation ({exc})") from exc
    return generation


def changes(base: Mapping[str, bytes], values: Mapping[str, bytes]) -> Projection:
    """The projection that takes the store `base` to `values` (the initial record of a new
    epoch: the change log it carries over)."""
    sets = {key: value for key, value in values.items() if base.get(key) != value}
    return Projection.encoded(sets, [key for key in base if key not in values], label="replay")


def encode_changes(base: Mapping[str, bytes], values: Mapping[str, bytes]) -> bytes:
    """The framed initial record taking `base` to `values`, or b"" when they are equal."""
    projection = changes(base, values)
    return b"" if projection.is_empty() else encode_record(projection)


# -- one log ---------------------------------------------------------------------------------
@dataclass(slots=True)
class EpochLog:
    """One epoch log as read.

    `begins`: `header` (an established log), `foreign` (a veto or seal first: never an
    epoch), `empty`, or `torn` (no whole header and initial record yet: being written, or
    its writer died). `entries`: its projections and side values `(name, bytes)` after the
    header, in order, up to the content's `end`; `initial`: the initial record's
    projection; `continued`: the generation a committed continuation names; `sealed`: the
    offset of its first seal."""

    name: str
    header: EpochHeader | None = None
    begins: str = "empty"
    initial: Projection | None = None
    entries: list[Projection | tuple[str, bytes]] = field(default_factory=list)
    continued: int | None = None
    end: int = 0
    sealed: int | None = None
    size: int = 0
    records: int = 0  # own records after the header (initial and continuation included)
    torn: bool = False  # bytes that are no valid record follow the content


def _valid_own_after(data: bytes, offset: int) -> int | None:
    """The offset of the first valid own record after `offset`, or None."""
    later = data.find(MAGIC, offset + 1)
    while later != -1:
        if not isinstance(record_at(data, later), str):
            return later
        later = data.find(MAGIC, later + 1)
    return None


def _seal_after(data: bytes, offset: int, token: int | None = None) -> int | None:
    """The offset of the first valid seal at or after `offset` (appended by `token`, if
    given), or None."""
    at = data.find(SEAL, offset)
    while at != -1:
        found = _foreign_at(data, at)
        if found is not None and (token is None or found[1] == token):
            return at
        at = data.find(SEAL, at + 1)
    return None


def parse_log(
    path: str,
    data: bytes,
    token: int,
    generation: int,
    *,
    decode: bool = True,
    resume: EpochLog | None = None,
    head: bool = False,
) -> EpochLog:
    """Read epoch log `token.generation` (module docstring). `decode`: decode projections
    and side values (else only find the header, the continuation and the seal). `head`:
    read only how it begins (its header and initial record). `resume`:
    the same log read before (a prefix of `data`), read on from its end. Raises
    `StoreCorrupted` for a header of another log, a damaged record before a valid one, an
    own record after a continuation, or a record that does not decode."""
    name = os.path.basename(path)
    if resume is not None and resume.sealed is None and resume.begins == "header":
        log = EpochLog(
            name,
            resume.header,
            "header",
            resume.initial,
            list(resume.entries),
            resume.continued,
            resume.end,
            None,
            len(data),
            resume.records,
            False,
        )
        return _read_records(path, data, token, log, decode)
    log = EpochLog(name, size=len(data))
    if not data:
        return log
    found = _foreign_at(data, 0)
    if found is not None:
        log.begins = "foreign"
        log.sealed = 0 if found[0] == "seal" else None
        return log
    at = record_at(data, 0)
    if isinstance(at, str):
        log.begins = "torn"
        return log
    start, stop = at
    if not data.startswith(_HEADER_HEAD, start, stop):
        raise corrupted(path, 0, "epoch log does not begin with its header")
    header = _decode_header(path, data, start, stop)
    if (header.token, header.generation) != (token, generation):
        raise corrupted(
            path, 0, f"log header names epoch {header.token} generation {header.generation}"
        )
    offset = stop
    if header.initial:
        at = record_at(data, offset)
        if isinstance(at, str) or at[1] - offset != header.initial:
            log.begins = "torn"  # the opener's one write is not whole (yet)
            return log
        if not data.startswith(_PROJECTION_HEAD, *at):
            raise corrupted(path, offset, "the initial record is not a projection")
        if decode:
            log.initial = decode_projection(path, offset, data, at[0], at[1])
        offset = at[1]
        log.records = 1
    log.header, log.begins, log.end = header, "header", offset
    return log if head else _read_records(path, data, token, log, decode)


def _read_records(path: str, data: bytes, token: int, log: EpochLog, decode: bool) -> EpochLog:
    offset = log.end
    while offset < len(data):
        found = _foreign_at(data, offset)
        if found is not None:
            if found[0] == "seal":
                log.sealed = offset
                break
            offset += FOREIGN_SIZE  # a veto after the header changes nothing
            continue
        at = record_at(data, offset)
        if isinstance(at, str):
            if (
                _valid_own_after(data, offset) is not None
                and _seal_after(data, offset, token) is None
            ):
                raise corrupted(path, offset, f"damaged log record ({at}) before a valid one")
            log.sealed = _seal_after(data, offset)
            log.torn = True
            break  # a torn tail (or an owner's void writes after foreign bytes it gave up on)
        start, stop = at
        if log.continued is not None:
            raise corrupted(path, offset, "a record after the log's continuation")
        if data.startswith(_PROJECTION_HEAD, start, stop):
            if decode:
                log.entries.append(decode_projection(path, offset, data, start, stop))
        elif data.startswith(_SIDE_HEAD, start, stop):
            if decode:
                log.entries.append(_decode_side(path, offset, data, start, stop))
        elif data.startswith(_CONTINUED_HEAD, start, stop):
            log.continued = _decode_continued(path, offset, data, start, stop)
        else:
            raise corrupted(path, offset, "an epoch log record of no known kind")
        log.records += 1
        offset = log.end = stop
    return log


# -- a store ---------------------------------------------------------------------------------
@dataclass(slots=True)
class EpochState:
    """An established epoch's store as read: its chain of logs (the last holds the state),
    its base's values, the store's image and side values."""

    token: int
    chain: list[EpochLog]
    base: dict[str, bytes]
    image: StoreImage
    sides: dict[str, bytes]

    @property
    def last(self) -> EpochLog:
        return self.chain[-1]

    @property
    def header(self) -> EpochHeader:
        header = self.last.header
        assert header is not None
        return header


def _begins(directory: str, files: EpochFiles, read: Callable[[str], bytes]) -> EpochLog:
    lowest = min(files.logs)
    path = os.path.join(directory, files.logs[lowest])
    return parse_log(path, read(path), files.token, lowest, decode=False, head=True)


def latest_established(
    directory: str, epochs: Mapping[int, EpochFiles], read: Callable[[str], bytes], below: int
) -> int | None:
    """The highest epoch below token `below` that is established (read only: epochs still
    being opened count as not established), or None. Raises `StoreCorrupted`, `OSError`."""
    for token in sorted(epochs, reverse=True):
        files = epochs[token]
        if token < below and files.logs and _begins(directory, files, read).begins == "header":
            return token
    return None


def follow(
    directory: str,
    files: EpochFiles,
    read: Callable[[str], bytes],
    *,
    decode_last: bool = True,
) -> list[EpochLog]:
    """The chain of an established epoch's logs: from its lowest through each continuation
    committed before a seal. The last is decoded (with `decode_last`). Raises
    `StoreCorrupted` for a continuation to a missing or unestablished log, `OSError`."""
    generation = min(files.logs)
    chain: list[EpochLog] = []
    while True:
        path = os.path.join(directory, files.logs[generation])
        log = parse_log(path, read(path), files.token, generation, decode=False)
        if log.begins != "header":
            raise corrupted(path, 0, "a log of the epoch's chain has no whole header")
        if log.continued is None:
            if decode_last:
                log = parse_log(path, read(path), files.token, generation)
            chain.append(log)
            return chain
        chain.append(log)
        following = log.continued
        if following not in files.logs or following <= generation:
            raise corrupted(path, log.end, f"continued in generation {following}, not found")
        generation = following


def read_state(
    directory: str,
    files: EpochFiles,
    read: Callable[[str], bytes],
    *,
    quota: int,
    chain: list[EpochLog] | None = None,
) -> EpochState:
    """The store an established epoch holds (`chain`: its logs, already followed and the
    last decoded). Raises `StoreCorrupted`, `OSError`."""
    chain = chain if chain is not None else follow(directory, files, read)
    last = chain[-1]
    header = last.header
    assert header is not None
    base: dict[str, bytes] = {}
    if header.base is not None:
        parsed = parse_epoch_name(header.base)
        path = os.path.join(directory, header.base)
        if parsed is None or parsed.kind != "base" or parsed.crc is None:
            raise corrupted(os.path.join(directory, last.name), 0, "header names no base file")
        base = read_snapshot(path, read(path), parsed.crc)
    image = StoreImage(base, quota=quota)
    sides = dict(header.sides)
    if last.initial is not None:
        image.apply_unchecked(last.initial)
    for entry in last.entries:
        if isinstance(entry, Projection):
            image.apply_unchecked(entry)
        else:
            sides[entry[0]] = entry[1]
    return EpochState(files.token, chain, base, image, sides)
