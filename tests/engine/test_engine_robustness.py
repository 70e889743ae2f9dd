"""Robustness of the engine under interleavings and failures around a compression in flight.

Each test reproduces a defect a review against the spec found, so that it stays fixed.
"""

from __future__ import annotations

import asyncio
import json
from typing import Any

import pytest

from jfsm.compressor import Attempt, CompressionResult
from jfsm.engine import GameEngine
from jfsm.errors import CompressionPending, InvalidInput, StoreUnavailable
from jfsm.jcs import canonical_bytes
from jfsm.stores.memory import MemoryStore
from jfsm.testing import FakeCompressor


def run(coro: Any) -> Any:
    return asyncio.run(coro)


def engine(**kw: Any) -> tuple[GameEngine, FakeCompressor]:
    fake = FakeCompressor()
    thresholds = kw.pop("thresholds", {"game": 10, "catalyst": 10})
    store = kw.pop("store", None) or MemoryStore()
    return GameEngine(store, fake, game_id="g", thresholds=thresholds, **kw), fake


def flag_invariant(e: GameEngine) -> tuple[bool, bool]:
    store = e.dump()["store"]
    flag = bool(store.get("jfGameStack.meta", {}).get("forcedCompression"))
    exact = any(
        k.startswith("jfGameStack.chunk.") and v["origin"] == "intervene" for k, v in store.items()
    )
    return flag, exact


async def until_held(fake: FakeCompressor, n: int = 1) -> None:
    for _ in range(1000):
        if fake.held >= n:
            return
        await asyncio.sleep(0)
    raise AssertionError("the compression was never held")


@pytest.mark.req("JF-INT-007", "JF-INT-006")
def test_no_generation_starts_while_an_intervene_that_landed_during_the_check_is_owed() -> None:
    async def scenario() -> None:
        e, fake = engine()
        await e.record_round("a" * 20, "b")
        fake.queue({"reply": "hold", "then": {"reply": "default"}})
        generation = asyncio.create_task(e.before_generation())
        await until_held(fake)
        await e.intervene("stop", "partial output", 4)  # lands while the check is in flight
        fake.queue({"reply": "refuse", "code": "policy"})
        fake.release()
        with pytest.raises(CompressionPending):
            await generation
        assert flag_invariant(e) == (True, True)

    run(scenario())


@pytest.mark.req("JF-INT-007", "JF-INT-005")
def test_generation_settles_the_late_intervene_when_the_service_answers() -> None:
    async def scenario() -> None:
        e, fake = engine()
        await e.record_round("a" * 20, "b")
        fake.queue({"reply": "hold", "then": {"reply": "default"}})
        generation = asyncio.create_task(e.before_generation())
        await until_held(fake)
        await e.intervene("stop", "partial output", 4)
        fake.release()
        report = await generation
        assert report.forced is not None and report.forced.outcome == "published"
        assert flag_invariant(e) == (False, False)

    run(scenario())


@pytest.mark.req("JF-CONC-003", "JF-ERR-002")
def test_a_cancelled_caller_leaves_the_stack_able_to_compress_again() -> None:
    async def scenario() -> None:
        e, fake = engine()
        await e.record_round("a" * 20, "b")
        fake.queue({"reply": "hold", "then": {"reply": "default"}})
        task = asyncio.create_task(e.before_generation())
        await until_held(fake)
        before = canonical_bytes(e.dump())
        task.cancel()
        with pytest.raises(asyncio.CancelledError):
            await task
        assert canonical_bytes(e.dump()) == before
        assert e.status()["game"]["compression"] == "idle"
        fake.release()
        report = await e.before_generation()
        assert report.outcome == "published"
        assert fake.calls == 2

    run(scenario())


@pytest.mark.req("JF-INT-007", "JF-CONC-003")
def test_a_cancelled_forced_compression_is_owed_not_stuck() -> None:
    async def scenario() -> None:
        e, fake = engine(thresholds={"game": 10_000, "catalyst": 10_000})
        fake.queue({"reply": "hold", "then": {"reply": "default"}})
        task = asyncio.create_task(e.intervene("in", "revealed and hidden", 8))
        await until_held(fake)
        task.cancel()
        with pytest.raises(asyncio.CancelledError):
            await task
        fake.release()
        assert e.status()["game"]["intervene"] == "owed"
        report = await e.before_generation()
        assert report.forced is not None and report.forced.outcome == "published"
        assert flag_invariant(e) == (False, False)

    run(scenario())


class FailingStore(MemoryStore):
    """A store whose next commits fail (as a store reports an I/O error) while `failing`."""

    failing = False

    async def commit(self, projection: Any) -> None:
        if self.failing:
            raise StoreUnavailable("store could not commit: [Errno 28] No space left on device")
        await super().commit(projection)


@pytest.mark.req("JF-ERR-001", "JF-ERR-002", "JF-COMP-009")
def test_a_store_failure_while_publishing_changes_nothing_and_is_typed() -> None:
    async def scenario() -> None:
        store = FailingStore()
        e, _ = engine(store=store)
        await e.record_round("a" * 20, "b")
        before = canonical_bytes(e.dump())
        store.failing = True
        with pytest.raises(StoreUnavailable) as info:
            await e.before_generation()
        assert info.value.code == "store_unavailable" and info.value.retryable
        assert canonical_bytes(e.dump()) == before
        assert e.telemetry[-1]["outcome"] == "aborted"
        store.failing = False
        await e.record_round("c", "d")  # the stack machine is at rest, not 'publishing'
        assert (await e.before_generation()).outcome == "published"

    run(scenario())


@pytest.mark.req("JF-ERR-002", "JF-STORE-004")
def test_a_failing_telemetry_sink_does_not_fail_a_committed_operation() -> None:
    def sink(event: dict[str, Any]) -> None:
        raise RuntimeError("sink down")

    async def scenario() -> None:
        e, _ = engine(telemetry=sink)
        result = await e.intervene("in", "out", 2)
        assert result["compression"]["outcome"] == "published"
        assert sorted(k for k in e.dump()["store"] if k.startswith("jfRounds.")) == ["jfRounds.1"]

    run(scenario())


@pytest.mark.req("JF-CALL-011", "JF-CONC-006")
def test_an_async_sink_is_awaited_off_the_emitting_call_in_order_and_its_failures_counted() -> None:
    """A sink returning an awaitable (the driver's file append run off the loop, R151):
    the operation that emitted does not wait for it; the writes land one at a time in the
    order emitted, whatever each one's duration; a failed write is counted as a raising
    sink's is (R75); `telemetry_written` and `close` wait for all of them."""
    written: list[tuple[str, int]] = []
    started: list[int] = []
    gate = asyncio.Event()

    def sink(event: dict[str, Any]) -> Any:
        number = len(started)
        started.append(number)

        async def write() -> None:
            await gate.wait()
            await asyncio.sleep(0.002 * (number % 3))  # later writes may be quicker
            if number == 1:
                raise OSError(28, "No space left on device")
            written.append((event["outcome"], number))

        return write()

    async def scenario() -> None:
        e, fake = engine(telemetry=sink, thresholds={"game": 10})
        fake.queue({"reply": "refuse", "code": "policy"})
        for _ in range(3):
            await e.record_round("x" * 20, "y")
            await e.before_generation()
        assert len(e.telemetry) >= 3 and written == []  # emitted, none written yet
        gate.set()
        await e.telemetry_written()
        assert [n for _, n in written] == [n for n in range(len(e.telemetry)) if n != 1]
        assert [o for o, _ in written] == [
            ev["outcome"] for n, ev in enumerate(e.telemetry) if n != 1
        ]
        assert e.status()["telemetryFailures"] == 1
        await e.record_round("x" * 20, "y")
        await e.before_generation()
        await e.close()  # waits for the last write
        assert len(written) == len(e.telemetry) - 1

    run(scenario())


@pytest.mark.req("JF-ERR-002", "JF-ERR-005")
def test_an_unknown_scene_is_refused_before_the_forced_retry_runs() -> None:
    async def scenario() -> None:
        e, fake = engine()
        fake.queue({"reply": "refuse", "code": "policy"})
        await e.intervene("in", "out", 2)
        before = canonical_bytes(e.dump())
        calls = fake.calls
        with pytest.raises(InvalidInput):
            await e.before_generation("nosuch")
        assert canonical_bytes(e.dump()) == before
        assert fake.calls == calls

    run(scenario())


@pytest.mark.req("JF-CALL-004", "JF-STORE-004")
def test_a_scene_id_reused_after_a_reset_gets_a_new_idempotency_key() -> None:
    async def scenario() -> None:
        e, fake = engine(thresholds={"game": 10_000, "catalyst": 10})
        await e.record_round("r", "1")
        await e.start_scene("s1")
        await e.record_scene_exchange("s1", "x" * 20, "y")
        await e.before_generation("s1")
        first = fake.requests[-1]["idempotencyKey"]
        await e.publish_scene("s1", "closing", "event")
        await e.reset(0)
        await e.start_scene("s1")
        await e.record_scene_exchange("s1", "x" * 20, "y")
        await e.before_generation("s1")
        assert fake.requests[-1]["idempotencyKey"] != first

    run(scenario())


@pytest.mark.req("JF-HIST-002", "JF-STORE-006")
def test_conversion_refuses_a_game_with_archives() -> None:
    async def scenario() -> None:
        e, _ = engine()
        await e.start_scene("s1")
        await e.cancel_scene("s1")
        before = canonical_bytes(e.dump())
        with pytest.raises(InvalidInput):
            await e.convert_simple_to_live([{"input": "a", "output": "b"}])
        assert canonical_bytes(e.dump()) == before

    run(scenario())


class NoCallId(FakeCompressor):
    async def compress(self, request: Any, participants: Any) -> CompressionResult:
        attempt = Attempt(1, "ok", None, 0.0, output_chars=1)
        return CompressionResult("ok", (attempt,), call_id=None, summary=" ")


@pytest.mark.req("JF-CALL-005", "JF-COMP-008")
def test_an_ok_reply_without_call_id_is_a_transport_failure() -> None:
    async def scenario() -> None:
        e = GameEngine(MemoryStore(), NoCallId(), game_id="g", thresholds={"game": 10})
        await e.record_round("a" * 20, "b")
        assert (await e.before_generation()).outcome == "transport"

    run(scenario())


@pytest.mark.req("JF-STORE-005")
def test_scene_meta_epoch_starts_at_the_game_epoch() -> None:
    async def scenario() -> None:
        e, _ = engine()
        await e.record_round("a", "b")
        await e.reset(0)
        await e.start_scene("s2")
        meta = e.dump()["store"]["jfCatalystStack.s2.meta"]
        game_meta = e.dump()["store"]["jfGameStack.meta"]
        assert meta["epoch"] == game_meta["epoch"] == 1
        assert json.loads(json.dumps(meta)) == {"epoch": 1, "nextSeq": 1, "state": "created"}

    run(scenario())


class ReplayingService(FakeCompressor):
    """Replays the completed reply of a key it has seen, like an idempotent Broker."""

    def __init__(self) -> None:
        super().__init__()
        self.seen: dict[str, CompressionResult] = {}

    async def compress(self, request: Any, participants: Any) -> CompressionResult:
        key = request.idempotency_key
        if key not in self.seen:
            self.seen[key] = await super().compress(request, participants)
        return self.seen[key]


@pytest.mark.req("JF-CALL-004", "JF-INT-007")
def test_a_replaying_service_cannot_pin_a_refusal_on_the_forced_compression() -> None:
    async def scenario() -> None:
        service = ReplayingService()
        e = GameEngine(MemoryStore(), service, game_id="g")
        service.queue({"reply": "refuse", "code": "busy"})
        await e.intervene("in", "shown hidden", 5)
        assert flag_invariant(e) == (True, True)
        report = await e.before_generation()  # a new key: not the replayed refusal
        assert report.forced is not None and report.forced.outcome == "published"
        keys = [r["idempotencyKey"] for r in service.requests]
        assert len(keys) == 2 and keys[0] != keys[1]
        assert flag_invariant(e) == (False, False)

    run(scenario())


@pytest.mark.req("JF-CALL-004")
def test_transport_failures_keep_the_key() -> None:
    async def scenario() -> None:
        e, fake = engine()
        await e.record_round("a" * 20, "b")
        fake.queue({"reply": "http_status", "status": 503})
        assert (await e.before_generation()).outcome == "transport"
        assert (await e.before_generation()).outcome == "published"
        keys = [r["idempotencyKey"] for r in fake.requests]
        assert keys[0] == keys[1]

    run(scenario())


@pytest.mark.req("JF-CALL-009", "JF-ERR-005")
def test_participants_given_as_records_or_objects_at_construction() -> None:
    e = GameEngine(
        MemoryStore(),
        FakeCompressor(),
        game_id="g",
        participants=[{"id": "b", "human": True}, {"id": "a", "human": True, "spectator": True}],
    )
    assert [p.id for p in e.participants()] == ["b", "a"]
    with pytest.raises(InvalidInput):
        GameEngine(MemoryStore(), FakeCompressor(), game_id="g", participants=[{"id": 1}])


@pytest.mark.req("JF-ERR-003", "JF-ERR-004")
def test_machine_errors_say_the_state_after_them() -> None:
    from jfsm.errors import InvalidTransition

    async def scenario() -> None:
        e, fake = engine()
        await e.start_scene("s1")
        await e.cancel_scene("s1")
        with pytest.raises(InvalidTransition) as refused:
            await e.publish_scene("s1", "c", "m")
        assert refused.value.state == "cancelled"
        assert refused.value.to_json()["state"] == "cancelled"
        fake.queue({"reply": "refuse", "code": "no"}, {"reply": "refuse", "code": "no"})
        await e.intervene("in", "out", 1)
        with pytest.raises(CompressionPending) as pending:
            await e.before_generation()
        assert pending.value.state == "owed" == e.status()["game"]["intervene"]
        assert pending.value.details["cause"] == "refused"

    run(scenario())


@pytest.mark.req("JF-ERR-001", "JF-COMP-009", "JF-ATOM-001")
def test_a_disk_failure_in_the_file_store_reaches_the_engine_as_store_unavailable(
    tmp_path: Any,
) -> None:
    from jfsm.stores.file.fsio import OsFileSystem
    from jfsm.stores.file.store import FileStore

    class FullDisk(OsFileSystem):
        full = False

        def fdatasync(self, fd: int) -> None:
            if self.full:
                raise OSError(28, "No space left on device")
            super().fdatasync(fd)

    async def scenario() -> None:
        disk = FullDisk()
        e, _ = engine(store=FileStore.open_sync(tmp_path / "g", fs=disk))
        await e.record_round("a" * 20, "b")
        before = canonical_bytes(e.dump())
        disk.full = True
        with pytest.raises(StoreUnavailable) as info:
            await e.before_generation()
        assert isinstance(info.value.__cause__, OSError)
        assert canonical_bytes(e.dump()) == before
        disk.full = False
        assert (await e.before_generation()).outcome == "published"
        await e.close()

    run(scenario())
