"""The op table: one `ReferenceDriver` dispatches every op of the driver protocol v1 to the
games it serves.

**The one concept: dispatch.** A driver turns protocol messages (`{"id", "op", "args"}`)
into engine calls and answers `{"id", "ok": true, "result"}` or `{"id", "ok": false,
"error": {"code", ...}}`, handling messages concurrently (a suite appends while a
compression is held). `handle` never raises: a message that is not an object, has no valid
id, nests past the spec's limit (these get id null) or names an unknown op gets an error
reply (JF-ERR-008); `handle_bytes` takes bytes.

Where the games live is the backend's: memory stores; file stores in a state directory
(`jfsm.driver.state`), a restarted driver reopening every game there; a PostgreSQL database
(`jfsm.driver.pg`) or a state directory shared by processes on one host
(`jfsm.driver.shared_dir`), one owner a game (`open_game`, `release_game`:
`jfsm.driver.shared`). A game the driver does not serve yet is opened in one place,
`_reopen`, whichever backend holds it, one open at a time (`jfsm.driver.served`).

With a state directory at most `max_open` games are open at once (decision R56): the least
recently used game at rest (no op on it running, nothing about it only in memory: no
compression in flight, no retry count, `GameEngine.at_rest`) is closed, and reopened from
its folder when an op names it (an op naming it while it closes waits). An in-process
`restart()` reopens the games that were open at once, the others when named. Memory stores
keep every game (closing one would lose it) until `forget_games` (R59).
"""

from __future__ import annotations

import asyncio
import errno
import shutil
import sys
import tempfile
from collections import OrderedDict
from collections.abc import Awaitable, Callable, Mapping
from pathlib import Path
from typing import TYPE_CHECKING, Any, cast

from jfsm._version import __version__
from jfsm.compressor import Compressor
from jfsm.driver.crash import CrashSwitch
from jfsm.driver.hello import parse_hello
from jfsm.driver.served import ServedGames
from jfsm.driver.shared import shared_ops
from jfsm.driver.shared_dir import SharedDirectoryGames
from jfsm.driver.state import GameFolder, Skipped, StateDamaged, StateDirectory
from jfsm.driver.wire import Refusal, decode, error_reply, refusal_reply
from jfsm.engine import GameEngine
from jfsm.errors import InvalidInput, JfsmError, StoreLocked, StoreUnavailable
from jfsm.limits import depth, validate_id
from jfsm.records import Participant, parse_record
from jfsm.spec import constants
from jfsm.stores.base import OwnedStore
from jfsm.stores.file.store import FileStore
from jfsm.stores.memory import MemoryStore
from jfsm.stores.offload import run_blocking
from jfsm.telemetry import TelemetrySink

if TYPE_CHECKING:
    from jfsm.driver.pg import DatabaseGames

__all__ = [
    "PROTOCOL_VERSION",
    "ReferenceDriver",
    "durable_reference_driver",
    "reference_driver",
]

PROTOCOL_VERSION = 1
MAX_OPEN = 8  # open games of a driver with a state directory (R56)
# ops that never answer from a game's memory (or prove ownership themselves: participants
# are written fenced by the token), so no ownership check follows them (R121)
_NOT_ANSWERED_FROM_MEMORY = frozenset(
    {"hello", "create_game", "open_game", "release_game", "set_participants"}
    | {"forget_games", "restart", "crash", "shutdown"}
)

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

    `compressor_factory(url, **kw)` builds the compressor from hello's `compressUrl` (default:
    the HTTP transport; `kw` is `timeout=seconds` when hello asks for a shorter attempt
    deadline, R79); `engine_class` is the engine each game runs (a seam for mutants).
    `skipped` lists the entries of the state directory the last scan could not serve (also
    returned by `hello` and written to stderr). `crash_injection` (file stores only, for
    in-process use by the suite) offers the `crash` op (`jfsm.driver.crash`).
    """

    def __init__(
        self,
        state_dir: str | Path | None = None,
        *,
        compressor_factory: Callable[..., Compressor] | None = None,
        engine_class: type[GameEngine] = GameEngine,
        store_url: str | None = None,
        crash_injection: bool = False,
        max_open: int = MAX_OPEN,
        shared: bool = False,
    ) -> None:
        self.state_dir = None if state_dir is None else Path(state_dir)
        self.store_url = store_url  # a PostgreSQL target: every game there (state_dir unused)
        # the shared games (sharedStore, R81): in a database, or in a state directory that
        # several processes on one host share (`shared`, R95)
        self.db: DatabaseGames | SharedDirectoryGames | None = None
        if store_url is not None:  # psycopg only when a database is named (the slim install)
            from jfsm.driver.pg import DatabaseGames

            self.db = DatabaseGames(store_url)
        elif shared:
            if state_dir is None:
                raise InvalidInput("a shared driver needs a state directory")
            self.db = SharedDirectoryGames(state_dir)
        self.state = None if state_dir is None or self.db is not None else StateDirectory(state_dir)
        # the games served now, their opens and closes one at a time (R231)
        self.served = ServedGames(max_open)
        self._hello_running: asyncio.Future[None] | None = (
            None  # a hello running: other ops wait (R232)
        )
        self.skipped: list[Skipped] = []
        self._creating: set[str] = set()
        self._compress_url: str | None = None
        self._thresholds: dict[str, int] | None = None
        self._compressor: Compressor | None = None
        self._compressor_factory = compressor_factory
        self._engine_class = engine_class
        # file stores open over a crash switch: the `crash` op (capability crashInjection)
        crashable = crash_injection and state_dir is not None and self.db is None
        self._fs = CrashSwitch() if crashable else None
        self._ops: dict[str, Handler] = {
            name[3:]: getattr(self, name) for name in dir(self) if name.startswith("op_")
        } | shared_ops(self)

    @property
    def games(self) -> OrderedDict[str, GameEngine]:
        """The games served now, least recently used first."""
        return self.served.games

    @property
    def held(self) -> set[str]:
        """The games owned through `open_game`, never closed as idle."""
        return self.served.held

    # -- plumbing ------------------------------------------------------------------------
    async def handle(self, message: Mapping[str, Any]) -> dict[str, Any]:
        """Answer one protocol message (never raises, whatever the message)."""
        msg_id = _message_id(message)
        try:
            if not isinstance(message, Mapping):
                raise InvalidInput("a message must be a JSON object")
            limit = constants().message_max_depth
            if depth(message, stop=limit) > limit:  # no message: id null (JF-ERR-008)
                msg_id = None
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
            if op == "hello":
                handler = self._alone(handler)
            else:
                while (running := self._hello_running) is not None:  # hello runs alone (R232)
                    await asyncio.wait([running])
                if self._compressor is None:
                    raise InvalidInput("the first message must be hello")
            names = [v for k in ("game", "into") if isinstance(v := args.get(k), str)]
            try:
                with self.served.using(names):  # never closed as idle meanwhile (R231)
                    watch = self._owned_before(str(op), args)
                    try:
                        result = await self._run_op(handler, args, names)
                    except JfsmError as exc:
                        if watch is not None and not exc.code.startswith("store_"):
                            # its own refusal shows its memory too: current first (R238)
                            await self._confirm_owner(*watch)
                        raise
                    if watch is not None:  # answered from this process's memory of the game
                        await self._confirm_owner(*watch)
            finally:
                if self._fs is None or not self._fs.dead:  # a dead driver closes nothing
                    await self._close_idle()
            if self._fs is not None and self._fs.dead and op != "restart":
                return error_reply(msg_id, "internal_error", self._fs.where + ": restart me")
            return {"id": msg_id, "ok": True, "result": result}
        except JfsmError as exc:
            return {"id": msg_id, "ok": False, "error": exc.to_json()}
        except Exception as exc:  # a bug in the engine: report it, never kill the driver
            return error_reply(msg_id, "internal_error", f"{type(exc).__name__}: {exc}"[:2000])

    async def _run_op(self, handler: Handler, args: Mapping[str, Any], names: list[str]) -> Any:
        """`handler(args)`, run again on the games reopened as the store holds them when a
        write cut off in flight turns out to have landed (JF-STORE-014)."""
        try:
            return await handler(args)
        except StoreUnavailable as exc:
            if not (exc.details.get("landed") and await self._drop_landed(names)):
                raise
            return await handler(args)  # on the game reopened as it is

    def _alone(self, handler: Handler) -> Handler:
        """`handler` (hello's) run with no other op starting until it ends (decision R232):
        an op sent right after `hello` waits for the state directory's set-up, never races
        it."""

        async def alone(args: Mapping[str, Any]) -> Any:
            while (running := self._hello_running) is not None:  # one hello after the other
                await asyncio.wait([running])
            done = self._hello_running = asyncio.get_running_loop().create_future()
            try:
                return await handler(args)
            finally:
                self._hello_running = None
                done.set_result(None)

        return alone

    async def handle_bytes(self, data: bytes) -> dict[str, Any]:
        """Answer one message as the wire brings it (stdio, HTTP); never raises."""
        msg = decode(data)
        return refusal_reply(msg) if isinstance(msg, Refusal) else await self.handle(msg)

    def _owned_before(self, op: str, args: Mapping[str, Any]) -> tuple[str, GameEngine, int] | None:
        """For an op on a game this process serves from a shared store: (game, engine, the
        store's count of landed writes), so that `_confirm_owner` can tell whether the op
        proved its ownership at the store (decision R121); None otherwise."""
        game = args.get("game")
        if self.db is None or op in _NOT_ANSWERED_FROM_MEMORY or not isinstance(game, str):
            return None
        engine = self.games.get(game)
        return None if engine is None else (game, engine, _owned(engine).writes)

    async def _confirm_owner(self, game: str, engine: GameEngine, writes: int) -> None:
        """After an op that landed no write on a game it served (a dump, a generate with
        nothing to compress, a repeated publication...): the store checks that this process
        still owns the game, `StoreFenced` otherwise, so that a superseded owner never
        answers from its memory as if it were current (JF-STORE-030). A game opened by the
        op itself, or one whose write landed (token checked with it), is current already."""
        if self.games.get(game) is engine and _owned(engine).writes == writes:
            await _owned(engine).confirm()

    async def _drop_landed(self, names: list[str]) -> bool:
        """A store of a shared store found that its write cut off in flight landed (its
        engine's memory lacks it, JF-STORE-014): close the game's engine, so that the op is
        run again on the game reopened as the store holds it (a plain open: the lease is
        this process's own; a game held through `open_game` stays held). Returns whether a
        game was closed."""
        dropped = False
        for game_id in names:
            engine = self.games.get(game_id)
            state = getattr(engine.store, "state", None) if engine is not None else None
            if self.db is not None and engine is not None and state == "broken":
                await self.served.close(game_id)
                dropped = True
        return dropped

    async def _game(self, args: Mapping[str, Any]) -> GameEngine:
        game_id = validate_id(_arg(args, "game"), "game")  # before any path is built of it
        engine = self.games.get(game_id)
        if engine is None:
            engine = await self._reopen(game_id)
        if engine is None:
            raise InvalidInput(f"unknown game {_shown(game_id)}", field="game")
        self.games.move_to_end(engine.game_id)
        return engine

    async def _reopen(self, game_id: str) -> GameEngine | None:
        """A game this driver does not serve now, opened and served (None: no such game).

        One open at a time per game (decision R231): ops naming the game while it opens
        share that open, and one naming it while it closes waits for the close first.
        From its folder (a game closed to bound memory), or from the shared store
        (database or shared directory) with a plain open, `StoreLocked` while another
        process owns it and the backend's store errors. A game being created is not opened;
        a state folder that cannot be opened stays unserved (listed in hello's `skipped`)."""
        if game_id in self._creating:
            return None
        return await self.served.open(game_id, lambda: self._open_existing(game_id))

    async def _open_existing(self, game_id: str) -> GameEngine | None:
        """`_reopen`'s open, as the game's one move (`ServedGames.open`)."""
        if self.db is not None:
            try:  # a PostgresStore or a FileStore: each backend closes its own
                opened: tuple[Any, list[Participant]] = await self.db.open(game_id, create=False)
            except InvalidInput:  # the store has no such game
                return None
            return await self.serve_store(game_id, *opened)
        if self.state is None or not self.state.exists(game_id):
            return None
        folder = self.state.folder(game_id)
        try:
            participants = await run_blocking(self.state.load_participants, folder)
            store = await self._open_store(folder)
        except StoreLocked:  # another process holds its store (R120): said, not hidden
            raise
        except (JfsmError, OSError, StateDamaged):  # listed in hello's skipped: not served
            return None
        return await self.serve_store(game_id, store, participants)

    async def serve_store(self, game_id: str, store: Any, participants: Any) -> GameEngine:
        """Serve `game_id` over the open `store` (closed again if its engine fails)."""
        try:
            engine = self._engine(game_id, store, participants)
        except BaseException:
            await store.close()
            raise
        return self.served.serve(game_id, engine)

    async def _close_idle(self) -> None:
        """Close least recently used idle games until at most `max_open` are open (only with
        a state directory or a shared store, from which they reopen)."""
        if self.state is not None or self.db is not None:
            await self.served.close_idle()

    async def _new_id(self, args: Mapping[str, Any], name: str) -> str:
        game_id = validate_id(_arg(args, name), name)
        known = game_id in self.games or game_id in self._creating
        # a shared store's game is never opened here (that would take its lease): `create`
        # refuses an existing one itself
        if known or (self.db is None and await self._reopen(game_id)):
            raise InvalidInput(f"game {game_id!r} already exists", field=name)
        if self.state is not None and self.state.exists(game_id):
            raise InvalidInput(
                f"game {game_id!r} has a folder in the state directory that could not be "
                "opened (see hello's skipped); nothing was written",
                field=name,
            )
        return game_id

    async def _open_store(self, folder: GameFolder) -> Any:  # off the event loop (R65)
        return await run_blocking(
            lambda: FileStore.open_sync(folder.store, fs=self._fs or folder.store_fs())
        )

    def _engine(
        self, game_id: str, store: Any, participants: list[Participant] | tuple[()] = ()
    ) -> GameEngine:
        assert self._compressor is not None
        return self._engine_class(
            store,
            self._compressor,
            game_id=game_id,
            participants=participants,
            telemetry=self.db.telemetry_sink(game_id) if self.db else self._telemetry_sink(game_id),
            thresholds=self._thresholds,
        )

    def _telemetry_sink(self, game_id: str) -> TelemetrySink | None:
        state = self.state
        if state is None:
            return None
        folder, fs = state.folder(game_id), self._fs

        def sink(event: dict[str, Any]) -> Awaitable[None] | None:
            if fs and fs.dead:  # a crashed driver writes nothing more (its telemetry neither)
                return None
            return run_blocking(state.append_telemetry, folder, event)  # off the loop (R151)

        return sink

    def claim_directory(self) -> None:
        """Hold the state directory as served plainly or shared (R120; `StoreLocked` while a
        driver of the other mode serves it) and, shared, sweep the `.new-...` folders of
        creators that died: those whose lock it takes (R124, R233). Nothing without a
        state directory. Blocking; raises `OSError` for the directory itself."""
        directory = self.state or getattr(self.db, "directory", None)
        if isinstance(directory, StateDirectory):
            directory.hold_mode(shared=self.db is not None)
            if self.db is not None:
                directory.sweep_unfinished()

    async def _reopen_all(self, only: list[str] | None = None) -> None:
        if self.state is None:
            return
        folders, skipped = await run_blocking(self.state.scan)
        for folder in folders:
            if folder.game_id in self.games or (only is not None and folder.game_id not in only):
                continue
            try:
                participants = await run_blocking(self.state.load_participants, folder)
                store = await self._open_store(folder)
            except (JfsmError, OSError, StateDamaged) as exc:
                skipped.append(Skipped(folder.path.name, f"{type(exc).__name__}: {exc}"))
                continue
            await self.serve_store(folder.game_id, store, participants)
            await self._close_idle()
        for entry in skipped:
            print(f"jfsm driver: skipped {entry.entry}: {entry.reason}", file=sys.stderr)
        self.skipped = skipped

    async def restart(self) -> None:
        """Close every store and reopen the durable games (in-process restart): the games
        open before reopen now, the others when an op names them (R56). After a `crash` op
        the restart is a kill: every engine is abandoned as it is."""
        was_open = list(self.games)
        for engine in self.games.values():  # events emitted before the kill are written
            await engine.telemetry_written()
        if self._fs is not None and self._fs.used:
            self._fs.abandon()
            self._fs = CrashSwitch()
            self.games.clear()
        await self.close()
        await self._reopen_all(only=was_open)

    async def close(self) -> None:
        """Close every game's store (and wait for those being closed)."""
        await self.served.close_all()

    # -- ops -----------------------------------------------------------------------------
    async def op_hello(self, args: Mapping[str, Any]) -> dict[str, Any]:
        hello = parse_hello(args, PROTOCOL_VERSION)
        url, thresholds = hello.url, hello.thresholds
        try:
            if self._compressor_factory is not None:
                compressor = self._compressor_factory(url, **hello.compressor)
            else:
                from jfsm.transport import HttpCompressor

                compressor = HttpCompressor(url, **hello.compressor)
        except (ValueError, TypeError) as exc:
            raise InvalidInput(f"compressUrl {_shown(url)} is not usable: {exc}") from exc
        if self.db is not None:  # the lease length asked for, or the driver's own (R122)
            self.db.use_lease(hello.lease)
        before = (self._thresholds, self._compressor, self._compress_url)
        self._thresholds = thresholds
        self._compressor = compressor
        self._compress_url = url
        try:
            await run_blocking(self.claim_directory)
            await self._reopen_all()
        except OSError as exc:  # the state directory itself: nothing changes
            self._thresholds, self._compressor, self._compress_url = before
            raise StoreUnavailable(
                f"state directory {self.state_dir} unusable ({exc}); hello changed nothing",
                errno=errno.errorcode.get(exc.errno or 0, "EIO"),
            ) from exc
        for engine in self.games.values():
            engine.compressor = compressor
        lease = {} if self.db is None else {"leaseSeconds": self.db.lease_seconds}
        return lease | {
            "protocol": PROTOCOL_VERSION,
            "implementation": {"name": "jfsm", "version": __version__, "language": "python"},
            "capabilities": {
                "durableRestart": self.state_dir is not None or self.db is not None,
                "concurrent": True,
                "thresholdOverride": True,
                "crashInjection": self._fs is not None,
                "forgetGames": True,
                "deadlineOverride": True,
                "sharedStore": self.db is not None,
            },
            "skipped": [entry.to_json() for entry in self.skipped],
        }

    async def op_create_game(self, args: Mapping[str, Any]) -> dict[str, Any]:
        game_id = await self._new_id(args, "game")
        if self.db is not None:  # never adopts a game of the database (DatabaseGames.create)
            return await self.db.create(game_id, None, self._creating, self.games, self._engine)
        if self.state is None:
            self.games[game_id] = self._engine(game_id, MemoryStore())
            return {}
        async with self.state.new_game(game_id) as fresh:
            await (await self._open_store(fresh)).close()
        folder = self.state.folder(game_id)
        self.games[game_id] = self._engine(game_id, await self._open_store(folder))
        return {}

    async def op_set_participants(self, args: Mapping[str, Any]) -> dict[str, Any]:
        engine = await self._game(args)
        given = _arg(args, "participants")
        if not isinstance(given, list):
            raise InvalidInput("participants must be a list", field="participants")
        participants = [parse_record(Participant, p) for p in given]
        if self.db is not None:
            await self.db.save_participants(engine.store, participants)  # type: ignore[arg-type]
        if (state := self.state) is not None:
            await run_blocking(state.save_participants, state.folder(engine.game_id), participants)
        engine.set_participants(participants)
        return {}

    async def op_record_round(self, args: Mapping[str, Any]) -> Any:
        engine, text = await self._game(args), (_arg(args, "input"), _arg(args, "output"))
        return await engine.record_round(*text)

    async def op_generate(self, args: Mapping[str, Any]) -> Any:
        report = await (await self._game(args)).before_generation(args.get("scene"))
        return report.to_json()

    async def op_intervene(self, args: Mapping[str, Any]) -> Any:
        return await (await self._game(args)).intervene(
            _arg(args, "input"), _arg(args, "output"), _arg(args, "revealed")
        )

    async def op_start_scene(self, args: Mapping[str, Any]) -> Any:
        await (await self._game(args)).start_scene(_arg(args, "scene"))
        return {}

    async def op_scene_exchange(self, args: Mapping[str, Any]) -> Any:
        seq = await (await self._game(args)).record_scene_exchange(
            _arg(args, "scene"), _arg(args, "user"), _arg(args, "assistant")
        )
        return {"seq": seq}

    async def op_publish_scene(self, args: Mapping[str, Any]) -> Any:
        return await (await self._game(args)).publish_scene(
            _arg(args, "scene"), _arg(args, "closingSummary"), _arg(args, "meanwhileEvent")
        )

    async def op_cancel_scene(self, args: Mapping[str, Any]) -> Any:
        return await (await self._game(args)).cancel_scene(_arg(args, "scene"))

    async def op_reset(self, args: Mapping[str, Any]) -> Any:
        return await (await self._game(args)).reset(_arg(args, "round"))

    async def op_edit_round(self, args: Mapping[str, Any]) -> Any:
        return await (await self._game(args)).edit_round(
            _arg(args, "round"), _arg(args, "input"), _arg(args, "output")
        )

    async def op_convert(self, args: Mapping[str, Any]) -> Any:
        return await (await self._game(args)).convert_simple_to_live(_arg(args, "rounds"))

    async def op_duplicate(self, args: Mapping[str, Any]) -> Any:
        source = await self._game(args)
        into = await self._new_id(args, "into")
        if self.db is not None:  # never touches an existing game `into`
            return await self.db.create(into, source, self._creating, self.games, self._engine)
        if self.state is None:
            self.games[into] = await source.duplicate(MemoryStore(), into)
            return {}
        self._creating.add(into)
        try:
            async with self.state.new_game(into) as fresh:
                store = await self._open_store(fresh)
                try:
                    copy = await source.duplicate(store, into)
                    await run_blocking(self.state.save_participants, fresh, copy.participants())
                finally:
                    await store.close()
            folder = self.state.folder(into)
            participants = list(copy.participants())
            self.games[into] = self._engine(into, await self._open_store(folder), participants)
        finally:
            self._creating.discard(into)
        return {}

    async def op_write(self, args: Mapping[str, Any]) -> Any:
        footprint = await (await self._game(args)).write(args.get("sets"), args.get("deletes", []))
        return {"footprint": footprint}

    async def op_cheat(self, args: Mapping[str, Any]) -> Any:
        engine = await self._game(args)
        footprint = await engine.write(args.get("sets"), args.get("deletes", []), cheat=True)
        return {"footprint": footprint}

    async def op_checkpoint(self, args: Mapping[str, Any]) -> Any:
        await (await self._game(args)).checkpoint()
        return {}

    async def op_dump(self, args: Mapping[str, Any]) -> Any:
        return (await self._game(args)).dump()

    async def op_telemetry(self, args: Mapping[str, Any]) -> Any:
        engine = await self._game(args)
        await engine.telemetry_written()
        if self.db is not None:
            return await self.db.read_telemetry(engine.game_id) or list(engine.telemetry)
        if self.state is not None:
            saved = await run_blocking(self.state.read_telemetry, self.state.folder(engine.game_id))
            if saved is not None:
                return saved
        return list(engine.telemetry)

    async def op_restart(self, args: Mapping[str, Any]) -> Any:
        if self.state_dir is None and self.db is None:
            raise InvalidInput("this driver has no durable state to restart from")
        await self.restart()
        return {}

    async def op_crash(self, args: Mapping[str, Any]) -> Any:
        """Arm a crash at the `at`-th durable write boundary from now (`jfsm.driver.crash`)."""
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
        if not isinstance(games, list):
            raise InvalidInput("games must be an array of game ids", field="games")
        for game_id in [validate_id(g, "games") for g in games]:  # all checked before any
            engine = self.games.get(game_id)
            busy = self.served.busy[game_id] > 0
            if engine is not None and (busy or not engine.at_rest(False)):
                continue
            if engine is not None:
                self.held.discard(game_id)
                await self.served.close(game_id)
            if self.state is not None and self.store_url is None and self.state.exists(game_id):
                await run_blocking(shutil.rmtree, self.state.folder(game_id).path, True)
        return {}

    async def op_shutdown(self, args: Mapping[str, Any]) -> Any:
        await self.close()
        return {}


def _owned(engine: GameEngine) -> OwnedStore:
    """The store of a game of a shared store (a `PostgresStore` or a shared `FileStore`)."""
    return cast(OwnedStore, engine.store)


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
