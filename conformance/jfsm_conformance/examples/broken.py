"""Broken drivers for `tests/suite/test_suite_bites.py` (and for trying the suite out).

```
jfsm conformance --driver python:jfsm_conformance.examples.broken:drop_suffix
```

- `drop_suffix`: after a publication, exact chunks appended while the compression was in flight
  disappear (the whole stack is treated as represented): JF-COMP-003.
- `leak_scene`: every scene exchange is also recorded as a game round, so scene transcript text
  reaches game memory: JF-CAT-008 (and JF-CAT-002).
- `utf16_counts`: the revealed count of an intervene and the reported canonical lengths are
  taken in UTF-16 code units, as JavaScript's `.length` would: JF-INT-002, JF-TEXT-003.
- `spectators_pay`: spectators are sent to compress.v2 as beneficiaries: JF-CALL-009.
- `republish_writes`: publishing an already published scene returns its archive record but
  also writes a game-data key, so a repeated terminal event changes the store: JF-CAT-006.
- `convert_compresses`: a simple-to-live conversion runs the compression check right after
  rebuilding, so converting a long game sends a compress.v2 request: JF-HIST-007.
- `duplicate_forgets_participants`: a duplicate starts without participants: JF-HIST-012.
- `restart_ended_scene`: `start_scene` of an ended scene's id answers `{}` and does
  nothing: JF-CAT-010.
- `scene_stays_created`: a scene's dumped meta says `created` after its first generation:
  JF-CAT-011.
- `scene_epoch_zero`: a scene's dumped meta starts at epoch 0 whatever the game's: JF-CAT-012.
- `stale_last`: an outcome that is stale is reported as refused: JF-COMP-013 when the reply
  itself was a refusal.
- `convert_lenient`: a conversion drops unknown members of its rounds instead of refusing
  them: JF-HIST-013.
- `off_protocol`: `record_round` answers `{"round": n}` without the `seq` the protocol
  requires: a protocol failure (report row DRIVER-PROTOCOL), not a requirement failure.
"""

from __future__ import annotations

import itertools
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from jfsm.driver import ReferenceDriver

__all__ = [
    "BrokenDriver",
    "convert_compresses",
    "convert_lenient",
    "drop_suffix",
    "duplicate_forgets_participants",
    "leak_scene",
    "off_protocol",
    "republish_writes",
    "restart_ended_scene",
    "scene_epoch_zero",
    "scene_stays_created",
    "spectators_pay",
    "stale_last",
    "utf16_counts",
]


def _utf16(text: str) -> int:
    return len(text.encode("utf-16-le")) // 2


class BrokenDriver:
    """The reference driver behind a protocol-level wrapper; subclasses bend one behaviour.

    An op `x` goes to the subclass's `bend_x(message)` if it has one, else to `inner` (by
    default a reference driver over memory stores) as it is; `call` sends `inner` an op of
    the wrapper's own. The mutants' protocol-level wrappers (`mutants.seams`) are these too.
    """

    def __init__(self, inner: ReferenceDriver | None = None) -> None:
        from jfsm.driver import reference_driver

        self.inner = inner if inner is not None else reference_driver()
        self._ids = itertools.count(10**9)

    async def call(self, op: str, args: dict[str, Any]) -> dict[str, Any]:
        return await self.inner.handle({"id": next(self._ids), "op": op, "args": args})

    async def handle(self, message: dict[str, Any]) -> dict[str, Any]:
        if not isinstance(message, dict):  # no message (a list, a number): the reference's
            return await self.inner.handle(message)
        bend = getattr(self, "bend_" + str(message.get("op")), None)
        if bend is None:
            return await self.inner.handle(message)
        reply: dict[str, Any] = await bend(message)
        return reply

    async def close(self) -> None:
        await self.inner.close()


class _DropSuffix(BrokenDriver):
    async def bend_dump(self, message: dict[str, Any]) -> dict[str, Any]:
        reply = await self.inner.handle(message)
        if not reply.get("ok"):
            return reply
        store = reply["result"]["store"]
        summary = store.get("jfGameStack.summary")
        if summary:
            gone = [
                k
                for k in store
                if k.startswith("jfGameStack.chunk.")
                and int(k.rsplit(".", 1)[1]) > summary["throughSeq"]
            ]
            for key in gone:
                del store[key]
            reply["result"]["changeLog"] = [
                e for e in reply["result"]["changeLog"] if e["key"] not in gone
            ]
        return reply


class _LeakScene(BrokenDriver):
    async def bend_scene_exchange(self, message: dict[str, Any]) -> dict[str, Any]:
        reply = await self.inner.handle(message)
        if reply.get("ok"):
            args = message["args"]
            await self.call(
                "record_round",
                {"game": args["game"], "input": args["user"], "output": args["assistant"]},
            )
        return reply


class _Utf16(BrokenDriver):
    async def bend_intervene(self, message: dict[str, Any]) -> dict[str, Any]:
        args = dict(message.get("args") or {})
        output, revealed = args.get("output"), args.get("revealed")
        if isinstance(output, str) and isinstance(revealed, int) and revealed >= 0:
            units = 0
            for i, ch in enumerate(output):  # treat `revealed` as UTF-16 units
                if units >= revealed:
                    args["revealed"] = i
                    break
                units += 2 if ord(ch) > 0xFFFF else 1
            else:
                args["revealed"] = len(output) if units >= revealed else revealed
        return await self.inner.handle({**message, "args": args})

    async def bend_generate(self, message: dict[str, Any]) -> dict[str, Any]:
        reply = await self.inner.handle(message)
        result: dict[str, Any] = reply.get("result") or {}
        if reply.get("ok") and result.get("outcome") == "not_due":
            dump = await self.call("dump", {"game": message["args"]["game"]})
            store = dump["result"]["store"]
            prefix = (
                "jfGameStack"
                if "scene" not in message["args"]
                else f"jfCatalystStack.{message['args']['scene']}"
            )
            units = 0
            summary = store.get(f"{prefix}.summary")
            if summary:
                units += 22 + _utf16(summary["text"])
            for key, value in store.items():
                if key.startswith(prefix + ".chunk."):
                    units += 42 + _utf16(value["user"]) + _utf16(value["assistant"])
            result["lengthBefore"] = result["lengthAfter"] = units
        return reply


class _SpectatorsPay(BrokenDriver):
    async def bend_set_participants(self, message: dict[str, Any]) -> dict[str, Any]:
        args = dict(message["args"])
        if isinstance(args.get("participants"), list):
            args["participants"] = [
                {**p, "spectator": False} if isinstance(p, dict) else p
                for p in args["participants"]
            ]
        return await self.inner.handle({**message, "args": args})


class _OffProtocol(BrokenDriver):
    async def bend_record_round(self, message: dict[str, Any]) -> dict[str, Any]:
        reply = await self.inner.handle(message)
        if reply.get("ok"):
            reply["result"].pop("seq", None)
        return reply


class _RepublishWrites(BrokenDriver):
    async def bend_publish_scene(self, message: dict[str, Any]) -> dict[str, Any]:
        args = message.get("args") or {}
        dump = await self.call("dump", {"game": args.get("game")})
        archives = ((dump.get("result") or {}).get("store") or {}).get("jfCatalystArchives", {})
        again = (archives.get(args.get("scene")) or {}).get("state") == "published"
        reply = await self.inner.handle(message)
        if again and reply.get("ok"):
            await self.call("write", {"game": args["game"], "sets": {"republished": True}})
        return reply


class _ConvertCompresses(BrokenDriver):
    async def bend_convert(self, message: dict[str, Any]) -> dict[str, Any]:
        reply = await self.inner.handle(message)
        if reply.get("ok"):
            await self.call("generate", {"game": message["args"]["game"]})
        return reply


def convert_compresses() -> BrokenDriver:
    return _ConvertCompresses()


class _DuplicateForgets(BrokenDriver):
    async def bend_duplicate(self, message: dict[str, Any]) -> dict[str, Any]:
        reply = await self.inner.handle(message)
        if reply.get("ok"):
            await self.call(
                "set_participants", {"game": message["args"]["into"], "participants": []}
            )
        return reply


def duplicate_forgets_participants() -> BrokenDriver:
    return _DuplicateForgets()


class _RestartEndedScene(BrokenDriver):
    async def bend_start_scene(self, message: dict[str, Any]) -> dict[str, Any]:
        args = message.get("args") or {}
        dump = await self.call("dump", {"game": args.get("game")})
        archives = ((dump.get("result") or {}).get("store") or {}).get("jfCatalystArchives", {})
        if args.get("scene") in archives:
            return {"id": message.get("id"), "ok": True, "result": {}}
        return await self.inner.handle(message)


def restart_ended_scene() -> BrokenDriver:
    return _RestartEndedScene()


class _DumpBends(BrokenDriver):
    """Rewrites every scene meta of a dump with `bend_meta`."""

    def bend_meta(self, meta: dict[str, Any]) -> None:
        raise NotImplementedError

    async def bend_dump(self, message: dict[str, Any]) -> dict[str, Any]:
        reply = await self.inner.handle(message)
        if reply.get("ok"):
            result = reply["result"]
            for key, value in result["store"].items():
                if key.startswith("jfCatalystStack.") and key.endswith(".meta"):
                    self.bend_meta(value)
            for entry in result["changeLog"]:
                key = str(entry.get("key"))
                if (
                    key.startswith("jfCatalystStack.")
                    and key.endswith(".meta")
                    and entry.get("value")
                ):
                    self.bend_meta(entry["value"])
        return reply


class _SceneStaysCreated(_DumpBends):
    def bend_meta(self, meta: dict[str, Any]) -> None:
        meta["state"] = "created"


class _SceneEpochZero(_DumpBends):
    def bend_meta(self, meta: dict[str, Any]) -> None:
        meta["epoch"] = 0


def scene_stays_created() -> BrokenDriver:
    return _SceneStaysCreated()


def scene_epoch_zero() -> BrokenDriver:
    return _SceneEpochZero()


class _StaleLast(BrokenDriver):
    async def bend_generate(self, message: dict[str, Any]) -> dict[str, Any]:
        reply = await self.inner.handle(message)
        result = reply.get("result") or {}
        if reply.get("ok") and result.get("outcome") == "stale":
            result["outcome"] = "refused"
        return reply


def stale_last() -> BrokenDriver:
    return _StaleLast()


class _ConvertLenient(BrokenDriver):
    async def bend_convert(self, message: dict[str, Any]) -> dict[str, Any]:
        args = dict(message.get("args") or {})
        if isinstance(args.get("rounds"), list):
            args["rounds"] = [
                {k: r[k] for k in ("input", "output") if k in r} if isinstance(r, dict) else r
                for r in args["rounds"]
            ]
        return await self.inner.handle({**message, "args": args})


def convert_lenient() -> BrokenDriver:
    return _ConvertLenient()


def republish_writes() -> BrokenDriver:
    return _RepublishWrites()


def off_protocol() -> BrokenDriver:
    return _OffProtocol()


def drop_suffix() -> BrokenDriver:
    return _DropSuffix()


def leak_scene() -> BrokenDriver:
    return _LeakScene()


def utf16_counts() -> BrokenDriver:
    return _Utf16()


def spectators_pay() -> BrokenDriver:
    return _SpectatorsPay()
