"""The reference driver: the conformance driver protocol v1 over the reference engine.

A driver turns protocol messages (`{"id", "op", "args"}`) into engine calls and answers
`{"id", "ok": true, "result"}` or `{"id", "ok": false, "error": {"code", ...}}`. Messages
are handled concurrently, so a suite can append while a compression is held in flight.
`handle` never raises and answers every message: a message that is not an object, has no
valid id (the reply's id is then null), nests past the spec's limit or names an unknown op
gets an error reply (JF-ERR-008).

Used three ways: in process (`python:jfsm.driver:reference_driver`, or
`durable_reference_driver` for file stores in a temporary directory), over stdio
(`jfsm driver [--state DIR]`, JSON lines, `jfsm.driver_stdio`) and over HTTP
(`jfsm driver --http PORT`, `jfsm.driver_http`). With a state directory each game lives in
a durable `FileStore` inside its folder (`jfsm.driver_state`), and a restarted driver
reopens every game found there, skipping and reporting what it cannot open. With `store`
(`jfsm driver --store postgresql://... --state DIR`) game memory lives in that database,
shared by processes started alike, one owner a game (`jfsm.driver_shared`, R81).

With a state directory at most `max_open` games are open at once (decision R56): the least
recently used idle game (no op on it running, nothing of it only in memory: no compression
in flight, no retry count of a completed-but-unpublished reply) is closed, and reopened from
its folder when an op names it again; an in-process `restart()` reopens the games open then
at once. Memory stores keep every game until `forget_games` (R59).
"""

from __future__ import annotations

import errno
import shutil
import sys
import tempfile
from collections import Counter, OrderedDict
from collections.abc import Awaitable, Callable, Mapping
from pathlib import Path
from typing import Any

from jfsm._version import __version__
from jfsm.compressor import Compressor
from jfsm.driver_crash import CrashSwitch
from jfsm.driver_http import serve_http
from jfsm.driver_shared import shared_ops
from jfsm.driver_state import GameFolder, Skipped, StateDamaged, StateDirectory
from jfsm.driver_stdio import serve_stdio
from jfsm.driver_wire import error_reply
from jfsm.engine import GameEngine
from jfsm.errors import InvalidInput, JfsmError, StoreUnavailable
from jfsm.limits import depth, validate_id
from jfsm.records import Participant, parse_record
from jfsm.spec import constants
from jfsm.stores.memory import MemoryStore

__all__ = [
    "PROTOCOL_VERSION",
    "ReferenceDriver",
    "durable_reference_driver",
    "reference_driver",
    "serve_http",
    "serve_stdio",
]

PROTOCOL_VERSION = 1
MAX_OPEN = 8  # open games of a driver with a state directory (R56)

Handler = Callable[[Mapping[str, Any]], Awaitable[Any]]


def _arg(args: Mapping[str, Any], name: str) -> Any:
    if name not in args:
        raise InvalidInput(f"missing argument {name!r}", field=name)
    return args[name]


def _shown(value: object) -> str:
    text = repr(value)
    return text if len(text) <= 80 else text[:80] + "..."


def _message_id(message: object) -> int | None:
    msg_id = message.get("id") if isinstance(message, Mapping) else None
    if isinstance(msg_id, int) and not isinstance(msg_id, bool) and msg_id >= 0:
        return msg_id
    return None


class ReferenceDriver:
    """Protocol v1 over `GameEngine`s; memory stores, or file stores under `state_dir`.

    `compressor_factory` builds the compressor from hello's `compressUrl` (default: the
    HTTP transport); `engine_class` is the engine each game runs (a seam for mutants).
    `skipped` lists the entries of the state directory the last scan could not serve (also
    returned by `hello` and written to stderr). `crash_injection` (file stores only, for
    in-process use by the suite) offers the `crash` op (`jfsm.driver_crash`).
    """

    def __init__(
        self,
        state_dir: str | Path | None = None,
        *,
        compressor_factory: Callable[[str], Compressor] | None = None,
        engine_class: type[GameEngine] = GameEngine,
        store: str | None = None,
        crash_injection: bool = False,
        max_open: int = MAX_OPEN,
    ) -> None:
        self.state_dir = None if state_dir is None else Path(state_dir)
        self.store = store  # a postgresql:// URL: game memory there, side files in state_dir
        self.state = None if state_dir is None else StateDirectory(state_dir)
        self.games: OrderedDict[str, GameEngine] = OrderedDict()  # least recently used first
        self.max_open = max_open
        self._busy: Counter[str] = Counter()  # ops running per game (never closed meanwhile)
        self.skipped: list[Skipped] = []
        self._creating: set[str] = set()
        self._compress_url: str | None = None
        self._thresholds: dict[str, int] | None = None
        self._compressor: Compressor | None = None
        self._compressor_factory = compressor_factory
        self._engine_class = engine_class
        # file stores open over a crash switch: the `crash` op (capability crashInjection)
        crashable = crash_injection and state_dir is not None and store is None
        self._fs = CrashSwitch() if crashable else None
        self._ops: dict[str, Handler] = {
            name[3:]: getattr(self, name) for name in dir(self) if name.startswith("op_")
        } | shared_ops(self)

    # -- plumbing ------------------------------------------------------------------------
    async def handle(self, message: Mapping[str, Any]) -> dict[str, Any]:
        """Answer one protocol message (never raises, whatever the message)."""
        msg_id = _message_id(message)
        try:
            if not isinstance(message, Mapping):
                raise InvalidInput("a message must be a JSON object")
            limit = constants().message_max_depth
            if depth(message, stop=limit) > limit:
                raise InvalidInput(f"the message nests deeper than {limit} arrays and objects")
            if msg_id is None:
                raise InvalidInput(f"id must be an integer >= 0, not {_shown(message.get('id'))}")
            op = message.get("op")
            args = message.get("args", {})
            if not isinstance(args, Mapping):
                raise InvalidInput("args must be an object", field="args")
            handler = self._ops.get(op) if isinstance(op, str) else None
            if handler is None:
                return error_reply(msg_id, "unsupported_op", f"unknown op {_shown(op)}")
            if op != "hello" and self._compressor is None:
                raise InvalidInput("the first message must be hello")
            names = [v for k in ("game", "into") if isinstance(v := args.get(k), str)]
            self._busy.update(names)
            try:
                result = await handler(args)
            finally:
                for name in names:
                    self._busy[name] -= 1
                    if self._busy[name] <= 0:
                        del self._busy[name]
                if self._fs is None or not self._fs.dead:  # a dead driver closes nothing
                    self._close_idle()
            if self._fs is not None and self._fs.dead and op != "restart":
                return error_reply(msg_id, "internal_error", self._fs.where + ": restart me")
            return {"id": msg_id, "ok": True, "result": result}
        except JfsmError as exc:
            return {"id": msg_id, "ok": False, "error": exc.to_json()}
        except Exception as exc:  # a bug in the engine: report it, never kill the driver
            return error_reply(msg_id, "internal_error", f"{type(exc).__name__}: {exc}"[:2000])

    def _game(self, args: Mapping[str, Any]) -> GameEngine:
        game_id = _arg(args, "game")
        engine = self.games.get(game_id) if isinstance(game_id, str) else None
        if engine is None and isinstance(game_id, str):
            engine = self._reopen(game_id)
        if engine is None:
            raise InvalidInput(f"unknown game {_shown(game_id)}", field="game")
        self.games.move_to_end(engine.game_id)
        return engine

    def _reopen(self, game_id: str) -> GameEngine | None:
        """A game closed to bound memory, opened again from its folder (None: no such game)."""
        if self.state is None or game_id in self._creating or not self.state.exists(game_id):
            return None
        folder = self.state.folder(game_id)
        try:
            participants = self.state.load_participants(folder)
            store = self._open_store(folder)
        except (JfsmError, OSError, StateDamaged):  # listed in hello's skipped: not served
            return None
        try:
            self.games[game_id] = self._engine(game_id, store, participants)
        except BaseException:
            store.close()
            raise
        return self.games[game_id]

    def _close_idle(self) -> None:
        """Close least recently used idle games until at most `max_open` are open (only with
        a state directory, from which they reopen)."""
        if self.state is None or len(self.games) <= self.max_open:
            return
        for game_id in list(self.games):
            if len(self.games) <= self.max_open:
                break
            engine = self.games[game_id]
            if self._busy[game_id] <= 0 and _reopenable(engine):
                del self.games[game_id]
                engine.close()

    def _new_id(self, args: Mapping[str, Any], name: str) -> str:
        game_id = validate_id(_arg(args, name), name)
        if game_id in self.games or game_id in self._creating:
            raise InvalidInput(f"game {game_id!r} already exists", field=name)
        if self.state is not None and self._reopen(game_id) is not None:
            raise InvalidInput(f"game {game_id!r} already exists", field=name)
        if self.state is not None and self.state.exists(game_id):
            raise InvalidInput(
                f"game {game_id!r} has a folder in the state directory that could not be "
                "opened (see hello's skipped); nothing was written",
                field=name,
            )
        return game_id

    def _open_store(self, folder: GameFolder) -> Any:
        if self.store is None:
            from jfsm.stores.file import FileStore

            return FileStore.open(folder.store, fs=self._fs)
        from jfsm.stores.location import open_store

        folder.store.mkdir(exist_ok=True)  # marks the folder as a game's (memory in the database)
        return open_store(self.store, folder.game_id)

    def _engine(
        self, game_id: str, store: Any, participants: list[Participant] | tuple[()] = ()
    ) -> GameEngine:
        assert self._compressor is not None
        return self._engine_class(
            store,
            self._compressor,
            game_id=game_id,
            participants=participants,
            telemetry=self._telemetry_sink(game_id),
            thresholds=self._thresholds,
        )

    def _telemetry_sink(self, game_id: str) -> Callable[[dict[str, Any]], None] | None:
        state = self.state
        if state is None:
            return None
        folder, fs = state.folder(game_id), self._fs
        # a crashed driver writes nothing more (its telemetry neither)
        return lambda event: None if fs and fs.dead else state.append_telemetry(folder, event)

    def _reopen_all(self, only: list[str] | None = None) -> None:
        if self.state is None:
            return
        folders, skipped = self.state.scan()
        for folder in folders:
            if folder.game_id in self.games or (only is not None and folder.game_id not in only):
                continue
            try:
                participants = self.state.load_participants(folder)
                store = self._open_store(folder)
            except (JfsmError, OSError, StateDamaged) as exc:
                skipped.append(Skipped(folder.path.name, f"{type(exc).__name__}: {exc}"))
                continue
            try:
                self.games[folder.game_id] = self._engine(folder.game_id, store, participants)
            except BaseException:
                store.close()
                raise
            self._close_idle()
        for entry in skipped:
            print(f"jfsm driver: skipped {entry.entry}: {entry.reason}", file=sys.stderr)
        self.skipped = skipped

    def restart(self) -> None:
        """Close every store and reopen the durable games (in-process restart): the games
        open before reopen now, the others when an op names them (R56). After a `crash` op
        the restart is a kill: every engine is abandoned as it is."""
        was_open = list(self.games)
        if self._fs is not None and self._fs.used:
            self._fs.abandon()
            self._fs = CrashSwitch()
            self.games.clear()
        self.close()
        self._reopen_all(only=was_open)

    def close(self) -> None:
        """Close every game's store."""
        for engine in self.games.values():
            engine.close()
        self.games.clear()

    # -- ops -----------------------------------------------------------------------------
    async def op_hello(self, args: Mapping[str, Any]) -> dict[str, Any]:
        if args.get("protocol") != PROTOCOL_VERSION:
            raise InvalidInput(f"protocol {args.get('protocol')!r} unsupported; speaks 1")
        url = _arg(args, "compressUrl")
        thresholds = args.get("thresholds")
        if thresholds is not None and not (
            isinstance(thresholds, Mapping)
            and set(thresholds) <= {"game", "catalyst"}
            and all(
                isinstance(v, int) and not isinstance(v, bool) and v > 0
                for v in thresholds.values()
            )
        ):
            raise InvalidInput("thresholds must be {game?, catalyst?} positive integers")
        if not isinstance(url, str):
            raise InvalidInput("compressUrl must be a string", field="compressUrl")
        try:
            if self._compressor_factory is not None:
                compressor = self._compressor_factory(url)
            else:
                from jfsm.transport import HttpCompressor

                compressor = HttpCompressor(url)
        except (ValueError, TypeError) as exc:
            raise InvalidInput(f"compressUrl {_shown(url)} is not usable: {exc}") from exc
        before = (self._thresholds, self._compressor, self._compress_url)
        self._thresholds = None if thresholds is None else dict(thresholds)
        self._compressor = compressor
        self._compress_url = url
        try:
            self._reopen_all(only=[] if self.store is not None else None)
        except OSError as exc:  # the state directory itself: nothing changes
            self._thresholds, self._compressor, self._compress_url = before
            raise StoreUnavailable(
                f"state directory {self.state_dir} unusable ({exc}); hello changed nothing",
                errno=errno.errorcode.get(exc.errno or 0, "EIO"),
            ) from exc
        for engine in self.games.values():
            engine.compressor = compressor
        return {
            "protocol": PROTOCOL_VERSION,
            "implementation": {"name": "jfsm", "version": __version__, "language": "python"},
            "capabilities": {
                "durableRestart": self.state_dir is not None,
                "concurrent": True,
                "thresholdOverride": True,
                "crashInjection": self._fs is not None,
                "forgetGames": True,
                "sharedStore": self.store is not None,
            },
            "skipped": [entry.to_json() for entry in self.skipped],
        }

    async def op_create_game(self, args: Mapping[str, Any]) -> dict[str, Any]:
        game_id = self._new_id(args, "game")
        if self.state is None:
            self.games[game_id] = self._engine(game_id, MemoryStore())
            return {}
        with self.state.new_game(game_id) as fresh:
            self._open_store(fresh).close()
        folder = self.state.folder(game_id)
        self.games[game_id] = self._engine(game_id, self._open_store(folder))
        return {}

    async def op_set_participants(self, args: Mapping[str, Any]) -> dict[str, Any]:
        engine = self._game(args)
        given = _arg(args, "participants")
        if not isinstance(given, list):
            raise InvalidInput("participants must be a list", field="participants")
        participants = [parse_record(Participant, p) for p in given]
        if self.state is not None:
            self.state.save_participants(self.state.folder(engine.game_id), participants)
        engine.set_participants(participants)
        return {}

    async def op_record_round(self, args: Mapping[str, Any]) -> Any:
        return await self._game(args).record_round(_arg(args, "input"), _arg(args, "output"))

    async def op_generate(self, args: Mapping[str, Any]) -> Any:
        report = await self._game(args).before_generation(args.get("scene"))
        return report.to_json()

    async def op_intervene(self, args: Mapping[str, Any]) -> Any:
        return await self._game(args).intervene(
            _arg(args, "input"), _arg(args, "output"), _arg(args, "revealed")
        )

    async def op_start_scene(self, args: Mapping[str, Any]) -> Any:
        await self._game(args).start_scene(_arg(args, "scene"))
        return {}

    async def op_scene_exchange(self, args: Mapping[str, Any]) -> Any:
        seq = await self._game(args).record_scene_exchange(
            _arg(args, "scene"), _arg(args, "user"), _arg(args, "assistant")
        )
        return {"seq": seq}

    async def op_publish_scene(self, args: Mapping[str, Any]) -> Any:
        return await self._game(args).publish_scene(
            _arg(args, "scene"), _arg(args, "closingSummary"), _arg(args, "meanwhileEvent")
        )

    async def op_cancel_scene(self, args: Mapping[str, Any]) -> Any:
        return await self._game(args).cancel_scene(_arg(args, "scene"))

    async def op_reset(self, args: Mapping[str, Any]) -> Any:
        return await self._game(args).reset(_arg(args, "round"))

    async def op_edit_round(self, args: Mapping[str, Any]) -> Any:
        return await self._game(args).edit_round(
            _arg(args, "round"), _arg(args, "input"), _arg(args, "output")
        )

    async def op_convert(self, args: Mapping[str, Any]) -> Any:
        return await self._game(args).convert_simple_to_live(_arg(args, "rounds"))

    async def op_duplicate(self, args: Mapping[str, Any]) -> Any:
        source = self._game(args)
        into = self._new_id(args, "into")
        if self.state is None:
            self.games[into] = await source.duplicate(MemoryStore(), into)
            return {}
        self._creating.add(into)
        try:
            with self.state.new_game(into) as fresh:
                store = self._open_store(fresh)
                try:
                    copy = await source.duplicate(store, into)
                    self.state.save_participants(fresh, copy.participants())
                finally:
                    store.close()
            folder = self.state.folder(into)
            participants = list(copy.participants())
            self.games[into] = self._engine(into, self._open_store(folder), participants)
        except BaseException:
            if self.store is not None and into not in self.games:
                from jfsm.stores.location import remove_store

                remove_store(self.store, into)
            raise
        finally:
            self._creating.discard(into)
        return {}

    async def op_write(self, args: Mapping[str, Any]) -> Any:
        footprint = await self._game(args).write(args.get("sets"), args.get("deletes", []))
        return {"footprint": footprint}

    async def op_cheat(self, args: Mapping[str, Any]) -> Any:
        engine = self._game(args)
        footprint = await engine.write(args.get("sets"), args.get("deletes", []), cheat=True)
        return {"footprint": footprint}

    async def op_checkpoint(self, args: Mapping[str, Any]) -> Any:
        await self._game(args).checkpoint()
        return {}

    async def op_dump(self, args: Mapping[str, Any]) -> Any:
        return self._game(args).dump()

    async def op_telemetry(self, args: Mapping[str, Any]) -> Any:
        engine = self._game(args)
        if self.state is not None:
            saved = self.state.read_telemetry(self.state.folder(engine.game_id))
            if saved is not None:
                return saved
        return list(engine.telemetry)

    async def op_restart(self, args: Mapping[str, Any]) -> Any:
        if self.state_dir is None:
            raise InvalidInput("this driver has no durable state to restart from")
        self.restart()
        return {}

    async def op_crash(self, args: Mapping[str, Any]) -> Any:
        """Arm a crash at the `at`-th durable write boundary from now (`jfsm.driver_crash`)."""
        at = _arg(args, "at")
        if self._fs is None:
            raise InvalidInput("this driver offers no crash injection (no file stores)")
        if not isinstance(at, int) or isinstance(at, bool) or at < 0:
            raise InvalidInput("at must be an integer >= 0", field="at")
        self._fs.arm(at)
        return {}

    async def op_forget_games(self, args: Mapping[str, Any]) -> Any:
        """Release games the suite will never name again (R59): closed, and with file stores
        their folders removed, retry counts too. A game with a compression in flight is kept."""
        games = _arg(args, "games")
        if not isinstance(games, list) or not all(isinstance(g, str) for g in games):
            raise InvalidInput("games must be an array of game ids", field="games")
        for game_id in games:
            engine = self.games.get(game_id)
            if engine is not None and (self._busy[game_id] > 0 or not _reopenable(engine, True)):
                continue
            if engine is not None:
                del self.games[game_id]
                engine.close()
            if self.state is not None and self.store is None and self.state.exists(game_id):
                shutil.rmtree(self.state.folder(game_id).path, ignore_errors=True)
        return {}

    async def op_shutdown(self, args: Mapping[str, Any]) -> Any:
        self.close()
        return {}


def _reopenable(engine: GameEngine, forgotten: bool = False) -> bool:
    """Whether closing `engine` loses nothing: no stack has a compression in flight and, unless
    the game is `forgotten`, no retry count (JF-CALL-004) nor `open_game` ownership (R81)."""
    stacks = [engine._game] + [s.stack for s in engine._scenes.values() if s.stack is not None]
    return (forgotten or not getattr(engine, "held", False)) and all(
        (forgotten or getattr(stack, "_retry", None) is None) and stack.state != "in_flight"
        for stack in stacks
    )


def reference_driver() -> ReferenceDriver:
    """The reference engine over memory stores (no durable restart)."""
    return ReferenceDriver()


def durable_reference_driver() -> ReferenceDriver:
    """The reference engine over file stores in a fresh temporary directory (removed when
    the process exits)."""
    import atexit

    state = tempfile.mkdtemp(prefix="jfsm-driver-")
    atexit.register(shutil.rmtree, state, True)
    return ReferenceDriver(state, crash_injection=True)
