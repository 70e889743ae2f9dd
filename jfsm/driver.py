"""The reference driver: the conformance driver protocol v1 over the reference engine.

A driver turns protocol messages (`{"id", "op", "args"}`) into engine calls and answers
`{"id", "ok": true, "result"}` or `{"id", "ok": false, "error": {"code", ...}}`. Messages
are handled concurrently, so a suite can append while a compression is held in flight.

Used three ways: in process (`python:jfsm.driver:reference_driver`, or
`durable_reference_driver` for file stores in a temporary directory), over stdio
(`jfsm driver [--state DIR]`, JSON lines) and over HTTP (`jfsm driver --http PORT`).
With a state directory, each game lives in a durable `FileStore` and a restarted driver
reopens every game found there; with `store` (`jfsm driver --store postgresql://...`), each
game's memory lives in that database instead (`PostgresStore`) and the directory keeps only
the driver's side files.
"""

from __future__ import annotations

import asyncio
import json
import sys
import tempfile
from collections.abc import Awaitable, Callable, Mapping
from pathlib import Path
from typing import Any

from jfsm import __version__
from jfsm.compressor import Compressor
from jfsm.engine import GameEngine
from jfsm.errors import InvalidInput, JfsmError
from jfsm.records import Participant, parse_record
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

Handler = Callable[[Mapping[str, Any]], Awaitable[Any]]


def _arg(args: Mapping[str, Any], name: str) -> Any:
    if name not in args:
        raise InvalidInput(f"missing argument {name!r}", field=name)
    return args[name]


class ReferenceDriver:
    """Protocol v1 over `GameEngine`s; memory stores, or file stores under `state_dir`."""

    def __init__(
        self,
        state_dir: str | Path | None = None,
        *,
        compressor_factory: Callable[[str], Compressor] | None = None,
        store: str | None = None,
    ) -> None:
        self.state_dir = None if state_dir is None else Path(state_dir)
        self.store = store  # a postgresql:// URL: game memory there, side files in state_dir
        self.games: dict[str, GameEngine] = {}
        self._compress_url: str | None = None
        self._thresholds: dict[str, int] | None = None
        self._compressor: Compressor | None = None
        self._compressor_factory = compressor_factory
        self._ops: dict[str, Handler] = {
            name[3:]: getattr(self, name) for name in dir(self) if name.startswith("op_")
        }

    # -- plumbing ------------------------------------------------------------------------
    async def handle(self, message: Mapping[str, Any]) -> dict[str, Any]:
        """Answer one protocol message (never raises for a bad message)."""
        msg_id = message.get("id") if isinstance(message, Mapping) else None
        try:
            if not isinstance(message, Mapping):
                raise InvalidInput("a message must be a JSON object")
            op = message.get("op")
            args = message.get("args", {})
            if not isinstance(args, Mapping):
                raise InvalidInput("args must be an object", field="args")
            handler = self._ops.get(op) if isinstance(op, str) else None
            if handler is None:
                return {
                    "id": msg_id,
                    "ok": False,
                    "error": {"code": "unsupported_op", "message": f"unknown op {op!r}"},
                }
            if op != "hello" and self._compressor is None:
                raise InvalidInput("the first message must be hello")
            result = await handler(args)
            return {"id": msg_id, "ok": True, "result": result}
        except JfsmError as exc:
            return {"id": msg_id, "ok": False, "error": exc.to_json()}
        except Exception as exc:  # a bug in the engine: report it, never kill the driver
            error = {"code": "internal_error", "message": f"{type(exc).__name__}: {exc}"}
            return {"id": msg_id, "ok": False, "error": error}

    def _game(self, args: Mapping[str, Any]) -> GameEngine:
        game_id = _arg(args, "game")
        engine = self.games.get(game_id) if isinstance(game_id, str) else None
        if engine is None:
            raise InvalidInput(f"unknown game {game_id!r}", field="game")
        return engine

    def _game_dir(self, game_id: str) -> Path:
        assert self.state_dir is not None
        return self.state_dir / ("game-" + game_id.encode("utf-8").hex())

    def _new_store(self, game_id: str) -> Any:
        if self.state_dir is None:
            return MemoryStore()
        from jfsm.stores.location import open_store

        self._game_dir(game_id).mkdir(parents=True, exist_ok=True)  # side files (with --store)
        return open_store(self.store or str(self._game_dir(game_id)), game_id)

    def _engine(self, game_id: str, store: Any) -> GameEngine:
        assert self._compressor is not None
        participants = self._load_participants(game_id)
        return GameEngine(
            store,
            self._compressor,
            game_id=game_id,
            participants=participants,
            telemetry=lambda event: self._log_telemetry(game_id, event),
            thresholds=self._thresholds,
        )

    def _sidecar(self, game_id: str, name: str) -> Path | None:
        if self.state_dir is None:
            return None
        return self._game_dir(game_id) / name

    def _load_participants(self, game_id: str) -> list[Participant]:
        path = self._sidecar(game_id, "participants.json")
        if path is None or not path.exists():
            return []
        return [parse_record(Participant, p) for p in json.loads(path.read_text("utf-8"))]

    def _log_telemetry(self, game_id: str, event: dict[str, Any]) -> None:
        path = self._sidecar(game_id, "telemetry.jsonl")
        if path is not None:
            with path.open("a", encoding="utf-8") as handle:
                handle.write(json.dumps(event, ensure_ascii=False) + "\n")

    def _reopen_all(self) -> None:
        if self.state_dir is None:
            return
        self.state_dir.mkdir(parents=True, exist_ok=True)
        from jfsm.stores.location import open_store

        for path in sorted(self.state_dir.glob("game-*")):
            game_id = bytes.fromhex(path.name[5:]).decode("utf-8")
            if game_id not in self.games:
                self.games[game_id] = self._engine(
                    game_id, open_store(self.store or str(path), game_id)
                )

    def restart(self) -> None:
        """Close every store and reopen the durable games (in-process restart)."""
        self.close()
        self._reopen_all()

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
            and all(isinstance(v, int) and v > 0 for v in thresholds.values())
        ):
            raise InvalidInput("thresholds must be {game?, catalyst?} positive integers")
        self._thresholds = None if thresholds is None else dict(thresholds)
        if self._compressor_factory is not None:
            self._compressor = self._compressor_factory(url)
        else:
            from jfsm.transport import HttpCompressor

            self._compressor = HttpCompressor(url)
        self._compress_url = url
        for engine in self.games.values():
            engine.compressor = self._compressor
        self._reopen_all()
        return {
            "protocol": PROTOCOL_VERSION,
            "implementation": {"name": "jfsm", "version": __version__, "language": "python"},
            "capabilities": {
                "durableRestart": self.state_dir is not None,
                "concurrent": True,
                "thresholdOverride": True,
            },
        }

    async def op_create_game(self, args: Mapping[str, Any]) -> dict[str, Any]:
        game_id = _arg(args, "game")
        if not isinstance(game_id, str) or not game_id:
            raise InvalidInput("game must be a non-empty string", field="game")
        if game_id in self.games:
            raise InvalidInput(f"game {game_id!r} already exists", field="game")
        self.games[game_id] = self._engine(game_id, self._new_store(game_id))
        return {}

    async def op_set_participants(self, args: Mapping[str, Any]) -> dict[str, Any]:
        engine = self._game(args)
        participants = _arg(args, "participants")
        if not isinstance(participants, list):
            raise InvalidInput("participants must be a list", field="participants")
        engine.set_participants(participants)
        self._save_participants(engine)
        return {}

    def _save_participants(self, engine: GameEngine) -> None:
        path = self._sidecar(engine.game_id, "participants.json")
        if path is not None:
            path.write_text(
                json.dumps([p.to_json() for p in engine.participants()]), encoding="utf-8"
            )

    async def op_record_round(self, args: Mapping[str, Any]) -> Any:
        return await self._game(args).record_round(_arg(args, "input"), _arg(args, "output"))

    async def op_generate(self, args: Mapping[str, Any]) -> Any:
        report = await self._game(args).before_generation(args.get("scene"))
        return _camel(report.to_json())

    async def op_intervene(self, args: Mapping[str, Any]) -> Any:
        result = await self._game(args).intervene(
            _arg(args, "input"), _arg(args, "output"), _arg(args, "revealed")
        )
        if result["compression"] is not None:
            result["compression"] = _camel(result["compression"])
        return result

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
        into = _arg(args, "into")
        if not isinstance(into, str) or not into or into in self.games:
            raise InvalidInput(f"cannot duplicate into {into!r}", field="into")
        store = self._new_store(into)
        try:
            self.games[into] = await source.duplicate(
                store, into, telemetry=lambda event: self._log_telemetry(into, event)
            )
            self._save_participants(self.games[into])
        except BaseException:
            store.close()
            if self.state_dir is not None:
                import shutil

                shutil.rmtree(self._game_dir(into), ignore_errors=True)
                if self.store is not None:
                    from jfsm.stores.location import remove_store

                    remove_store(self.store, into)
            raise
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
        path = self._sidecar(engine.game_id, "telemetry.jsonl")
        if path is not None and path.exists():
            lines = path.read_text("utf-8").splitlines()
            return [json.loads(line) for line in lines if line.strip()]
        return list(engine.telemetry)

    async def op_restart(self, args: Mapping[str, Any]) -> Any:
        if self.state_dir is None:
            raise InvalidInput("this driver has no durable state to restart from")
        self.restart()
        return {}

    async def op_shutdown(self, args: Mapping[str, Any]) -> Any:
        self.close()
        return {}


def _camel(report: Mapping[str, Any]) -> dict[str, Any]:
    names = {"length_before": "lengthBefore", "length_after": "lengthAfter", "call_id": "callId"}
    names["through_seq"] = "throughSeq"
    return {names.get(k, k): _camel(v) if isinstance(v, Mapping) else v for k, v in report.items()}


def reference_driver() -> ReferenceDriver:
    """The reference engine over memory stores (no durable restart)."""
    return ReferenceDriver()


def durable_reference_driver() -> ReferenceDriver:
    """The reference engine over file stores in a fresh temporary directory (removed when
    the process exits)."""
    import atexit
    import shutil

    state = tempfile.mkdtemp(prefix="jfsm-driver-")
    atexit.register(shutil.rmtree, state, True)
    return ReferenceDriver(state)


async def serve_stdio(driver: ReferenceDriver) -> None:
    """Serve JSON lines on stdin/stdout until EOF or `shutdown`; messages run concurrently."""
    loop = asyncio.get_running_loop()
    reader = asyncio.StreamReader(limit=1 << 30)
    await loop.connect_read_pipe(lambda: asyncio.StreamReaderProtocol(reader), sys.stdin)
    out_lock = asyncio.Lock()
    tasks: set[asyncio.Task[None]] = set()
    stop = asyncio.Event()

    async def answer(line: bytes) -> None:
        try:
            message = json.loads(line)
        except ValueError as exc:
            reply: dict[str, Any] = {
                "id": None,
                "ok": False,
                "error": {"code": "invalid_input", "message": f"not JSON: {exc}"},
            }
        else:
            reply = await driver.handle(message)
            if isinstance(message, dict) and message.get("op") == "shutdown":
                stop.set()
        data = (json.dumps(reply, ensure_ascii=False) + "\n").encode("utf-8")
        async with out_lock:
            sys.stdout.buffer.write(data)
            sys.stdout.buffer.flush()

    while not stop.is_set():
        line = await reader.readline()
        if not line:
            break
        if line.strip():
            task = asyncio.create_task(answer(line))
            tasks.add(task)
            task.add_done_callback(tasks.discard)
    if tasks:
        await asyncio.gather(*tasks, return_exceptions=True)
    driver.close()


def serve_http(
    driver: ReferenceDriver, port: int, *, ready: Callable[[int], None] | None = None
) -> None:
    """Serve `POST /v1/message` on 127.0.0.1:`port` until interrupted or `shutdown`.

    Each request runs on a shared event loop, so requests are handled concurrently.
    """
    import threading
    from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

    loop = asyncio.new_event_loop()
    threading.Thread(target=loop.run_forever, daemon=True, name="jfsm-driver-loop").start()

    class Handler(BaseHTTPRequestHandler):
        def do_POST(self) -> None:
            if self.path != "/v1/message":
                self.send_error(404)
                return
            length = int(self.headers.get("Content-Length") or 0)
            try:
                message = json.loads(self.rfile.read(length))
            except ValueError as exc:
                reply: dict[str, Any] = {
                    "id": None,
                    "ok": False,
                    "error": {"code": "invalid_input", "message": f"not JSON: {exc}"},
                }
            else:
                future = asyncio.run_coroutine_threadsafe(driver.handle(message), loop)
                reply = future.result()
                if isinstance(message, dict) and message.get("op") == "shutdown":
                    threading.Thread(target=server.shutdown, daemon=True).start()
            body = json.dumps(reply, ensure_ascii=False).encode("utf-8")
            self.send_response(200)
            self.send_header("Content-Type", "application/json")
            self.send_header("Content-Length", str(len(body)))
            self.end_headers()
            self.wfile.write(body)

        def log_message(self, format: str, *args: Any) -> None:
            return None

    server = ThreadingHTTPServer(("127.0.0.1", port), Handler)
    server.daemon_threads = True
    bound = server.server_address[1]
    print(f"jfsm driver listening on http://127.0.0.1:{bound}", file=sys.stderr, flush=True)
    if ready is not None:
        ready(bound)
    try:
        server.serve_forever()
    except KeyboardInterrupt:
        pass
    finally:
        server.server_close()
        loop.call_soon_threadsafe(loop.stop)
        driver.close()
