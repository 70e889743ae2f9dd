"""OpenTelemetry spans and metrics of the engine and its stores, through the API only.

The engine instruments itself as a library does (decision R206): with the OpenTelemetry
**API** (`opentelemetry-api`, the extra `jfsm[otel]`), through the global tracer and meter
providers. The application chooses the SDK, its exporters and its sampling; with no SDK
configured the API would record nothing, so the engine does not even start its spans while
the global providers are the API's own (R208); without the extra this module imports
nothing of OpenTelemetry: every helper below is then a shared no-op (the decorator `traced`
returns the function itself), so the engine pays one attribute lookup per call at most.

Every span and metric, with its attributes and units, is listed on the guide's page
`docs/guide/observability.md`; a test compares that page with `SPANS` and `METRICS` here.

# No text, ever (JF-CALL-020)

Attributes and metric labels are ids (game, scene, call id, idempotency key), counts, sizes,
durations, outcomes and error *codes*: never a round's text, a summary, a participant's
name, an exception's message or a statement's text. A span that ends with an exception
records `error.type` (the jfsm error code, else the exception's class name) and an error
status without a description; `record_exception` is off, since an exception message may
quote a value. Metric labels are drawn from closed sets (stack kinds, outcomes, backends,
operations, error codes): never a game id, whose number is unbounded.

# Semantic conventions

PostgreSQL statements are database client spans (`SpanKind.CLIENT`) named
`{db.operation.name} {db.collection.name}`, with `db.system.name = "postgresql"`,
`db.namespace`, `server.address`, `server.port`, `db.operation.batch.size` for a group
commit, `error.type` and `db.response.status_code` (the SQLSTATE) on failure; never
`db.query.text`. The connection pool's metrics are the conventions' `db.client.connection.*`.
A compress.v2 attempt is an HTTP client span (`http.request.method`, `server.address`,
`server.port`, `url.template`, `http.response.status_code`, `error.type`). The engine's own
operations are `jfsm.*` spans and metrics.

**The one concept:** the engine's OpenTelemetry instruments, and the hooks through which
its parts report to them.

# Seams

The engine's telemetry events (one per compress.v2 attempt, D18) feed the compression
metrics (`compression_events`, called where `StackCompression` emits them); stores call
`fenced`, `takeover`, `commit_batch` and `history_lost`; the PostgreSQL pool registers itself with
`watch_pool` for the `db.client.connection.*` instruments, read at collection time. Nothing
here does I/O: recording hands values to the SDK (whose exporters run in their own threads),
and the Prometheus endpoint of `jfsm driver --metrics` (`prometheus_text`) is collected off
the event loop by its caller.
"""

from __future__ import annotations

import contextlib
import functools
import inspect
import time
import weakref
from collections.abc import Callable, Iterator, Mapping
from typing import Any, TypeVar

try:  # the extra jfsm[otel]: the API only, never the SDK
    from opentelemetry import metrics as _metrics
    from opentelemetry import trace as _trace
except ImportError:  # pragma: no cover - depends on the installed extras
    _metrics = None  # type: ignore[assignment]
    _trace = None  # type: ignore[assignment]

__all__ = [
    "ENABLED",
    "METRICS",
    "SCOPE",
    "SPANS",
    "commit_batch",
    "compression_events",
    "db_attributes",
    "db_name",
    "fenced",
    "history_lost",
    "lease_name",
    "lease_previous",
    "prometheus_text",
    "set_error",
    "span",
    "store_backend",
    "store_commit",
    "takeover",
    "traced",
    "tracing_on",
    "watch_pool",
]

#: Whether the OpenTelemetry API is installed (the extra `jfsm[otel]`).
ENABLED = _trace is not None

#: The instrumentation scope of every span and instrument.
SCOPE = "jfsm"

#: Every span this package starts: name -> what it covers (the guide lists their attributes).
SPANS: dict[str, str] = {
    "jfsm.record_round": "one canonical round recorded (its commit inside)",
    "jfsm.intervene": "an intervened round and its forced compression",
    "jfsm.before_generation": "the checks owed before a generation, compressions included",
    "jfsm.compression": "one logical compression: its compress.v2 attempts and its outcome",
    "POST": "one compress.v2 attempt (HTTP client span)",
    "jfsm.store.commit": "one projection committed to a game's store",
    "jfsm.store.settle": "a write whose connection was lost, settled on a fresh connection",
    "jfsm.lease.acquire": "a game's lease taken at open",
    "jfsm.lease.takeover": "a game's lease taken over at open (the earlier owner fenced)",
    "jfsm.lease.renew": "leases renewed (the idle timer, or a read's check)",
    "jfsm.lease.fence": "a write or read refused: a newer owner holds the game",
    "{db.operation.name} jfsm_game": "one PostgreSQL statement (database client span)",
}

#: Every instrument: name -> (kind, unit, what it measures).
METRICS: dict[str, tuple[str, str, str]] = {
    "jfsm.compressions": ("counter", "{compression}", "logical compressions by outcome"),
    "jfsm.compress.attempt.duration": (
        "histogram",
        "s",
        "compress.v2 attempts, by outcome",
    ),
    "jfsm.store.commit.duration": ("histogram", "s", "store commits, by backend and outcome"),
    "jfsm.store.footprint": ("histogram", "By", "a game's footprint after each commit"),
    "jfsm.store.quota.headroom": (
        "histogram",
        "By",
        "a game's quota minus its footprint after each commit",
    ),
    "jfsm.lease.takeovers": ("counter", "{takeover}", "leases taken over from another owner"),
    "jfsm.store.fenced": ("counter", "{refusal}", "writes and reads refused as fenced"),
    "jfsm.store.group_commit.size": (
        "histogram",
        "{commit}",
        "commits carried by one group-commit statement",
    ),
    "jfsm.store.history_lost": (
        "counter",
        "{detection}",
        "databases found to have lost acknowledged writes",
    ),
    "db.client.connection.count": (
        "updowncounter",
        "{connection}",
        "the pool's connections, by state (idle, used)",
    ),
    "db.client.connection.max": ("updowncounter", "{connection}", "the pool's maximum size"),
    "db.client.connection.pending_requests": (
        "updowncounter",
        "{request}",
        "requests waiting for a connection of the pool",
    ),
    "jfsm.pool.requests": (
        "counter",
        "{request}",
        "connections asked of the pool, by how it went (served at once, waited, timed out)",
    ),
    "jfsm.pool.wait_time": (
        "counter",
        "s",
        "total time requests waited for a connection of the pool",
    ),
}

F = TypeVar("F", bound=Callable[..., Any])

# Buckets: a commit or an attempt from 100 µs to a minute; sizes in powers of two.
_SECONDS = (0.0001, 0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5)
_SECONDS_LONG = (0.01, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 20, 30, 60, 120)
_BYTES = tuple(float(2**n) for n in range(10, 26, 2))
_MEMBERS = (1, 2, 4, 8, 16, 32, 64, 128)


class _NoSpan:
    """What a span helper yields when nothing is recorded."""

    __slots__ = ()

    def set_attribute(self, key: str, value: Any) -> None:
        return None

    def set_attributes(self, attributes: Mapping[str, Any]) -> None:
        return None

    def is_recording(self) -> bool:
        return False


_NO_SPAN = _NoSpan()
_NOTHING: contextlib.nullcontext[_NoSpan] = contextlib.nullcontext(_NO_SPAN)


def _error_type(exc: BaseException) -> str:
    """An exception's class of error, as `error.type`: a jfsm error's stable code, else the
    class name. Never its message."""
    code = getattr(exc, "code", None)
    return code if isinstance(code, str) and code else type(exc).__name__


class _Instruments:
    """The tracer and the instruments of one pair of global providers."""

    def __init__(self, tracer_provider: Any, meter_provider: Any) -> None:
        from jfsm._version import __version__

        self.tracer_provider = tracer_provider
        self.meter_provider = meter_provider
        # The API's own providers (its proxies before an SDK is set, its no-ops) record
        # nothing: then the engine skips its spans and measures altogether (R208).
        self.tracing = not _is_api(tracer_provider)
        self.metering = not _is_api(meter_provider)
        self.tracer = _trace.get_tracer(SCOPE, __version__, tracer_provider=tracer_provider)
        meter = _metrics.get_meter(SCOPE, __version__, meter_provider=meter_provider)
        self.compressions = meter.create_counter(
            "jfsm.compressions", "{compression}", METRICS["jfsm.compressions"][2]
        )
        self.attempt_duration = meter.create_histogram(
            "jfsm.compress.attempt.duration",
            "s",
            METRICS["jfsm.compress.attempt.duration"][2],
            explicit_bucket_boundaries_advisory=_SECONDS_LONG,
        )
        self.commit_duration = meter.create_histogram(
            "jfsm.store.commit.duration",
            "s",
            METRICS["jfsm.store.commit.duration"][2],
            explicit_bucket_boundaries_advisory=_SECONDS,
        )
        self.footprint = meter.create_histogram(
            "jfsm.store.footprint",
            "By",
            METRICS["jfsm.store.footprint"][2],
            explicit_bucket_boundaries_advisory=_BYTES,
        )
        self.headroom = meter.create_histogram(
            "jfsm.store.quota.headroom",
            "By",
            METRICS["jfsm.store.quota.headroom"][2],
            explicit_bucket_boundaries_advisory=_BYTES,
        )
        self.takeovers = meter.create_counter(
            "jfsm.lease.takeovers", "{takeover}", METRICS["jfsm.lease.takeovers"][2]
        )
        self.fenced = meter.create_counter(
            "jfsm.store.fenced", "{refusal}", METRICS["jfsm.store.fenced"][2]
        )
        self.batch_size = meter.create_histogram(
            "jfsm.store.group_commit.size",
            "{commit}",
            METRICS["jfsm.store.group_commit.size"][2],
            explicit_bucket_boundaries_advisory=_MEMBERS,
        )
        self.history_lost = meter.create_counter(
            "jfsm.store.history_lost", "{detection}", METRICS["jfsm.store.history_lost"][2]
        )
        meter.create_observable_counter(
            "jfsm.pool.requests",
            [_observe_requests],
            "{request}",
            METRICS["jfsm.pool.requests"][2],
        )
        meter.create_observable_counter(
            "jfsm.pool.wait_time",
            [_observe_wait],
            "s",
            METRICS["jfsm.pool.wait_time"][2],
        )
        meter.create_observable_up_down_counter(
            "db.client.connection.count",
            [_observe_connections],
            "{connection}",
            METRICS["db.client.connection.count"][2],
        )
        meter.create_observable_up_down_counter(
            "db.client.connection.max",
            [_observe_max],
            "{connection}",
            METRICS["db.client.connection.max"][2],
        )
        meter.create_observable_up_down_counter(
            "db.client.connection.pending_requests",
            [_observe_pending],
            "{request}",
            METRICS["db.client.connection.pending_requests"][2],
        )


def _is_api(provider: Any) -> bool:
    """Whether a global provider is one of the API's own (a proxy waiting for an SDK, or a
    no-op), which record nothing."""
    return type(provider).__module__.startswith(("opentelemetry.trace", "opentelemetry.metrics"))


_current: _Instruments | None = None


def tracing_on() -> bool:
    """Whether spans are recorded now: the extra installed and a tracer provider other than
    the API's own configured (an SDK)."""
    return ENABLED and _instruments().tracing


def _instruments() -> _Instruments:
    """The instruments of the global providers now (made again when an application, or a
    test, installs other providers)."""
    global _current
    tracer_provider = _trace.get_tracer_provider()
    meter_provider = _metrics.get_meter_provider()
    found = _current
    if (
        found is None
        or found.tracer_provider is not tracer_provider
        or found.meter_provider is not meter_provider
    ):
        found = _current = _Instruments(tracer_provider, meter_provider)
    return found


# -- spans -------------------------------------------------------------------------------------
@contextlib.contextmanager
def _recording_span(name: str, attributes: Mapping[str, Any] | None, kind: str) -> Iterator[Any]:
    tracer = _instruments().tracer
    span_kind = _trace.SpanKind.CLIENT if kind == "client" else _trace.SpanKind.INTERNAL
    with tracer.start_as_current_span(
        name,
        kind=span_kind,
        attributes=attributes,
        record_exception=False,
        set_status_on_exception=False,
    ) as current:
        try:
            yield current
        except BaseException as exc:
            if current.is_recording():
                current.set_attribute("error.type", _error_type(exc))
                sqlstate = getattr(exc, "sqlstate", None) or getattr(
                    exc.__cause__, "sqlstate", None
                )
                if kind == "client" and isinstance(sqlstate, str):
                    current.set_attribute("db.response.status_code", sqlstate)
                current.set_status(_trace.Status(_trace.StatusCode.ERROR))
            raise


def span(
    name: str, attributes: Mapping[str, Any] | None = None, *, kind: str = "internal"
) -> contextlib.AbstractContextManager[Any]:
    """A span around a block (`with span(...) as s: ... s.set_attribute(...)`), the current
    span inside it; `kind` is `internal` or `client`. An exception leaving the block sets
    `error.type` (its code, never its message) and an error status. A no-op without the
    extra."""
    if not ENABLED or not _instruments().tracing:
        return _NOTHING
    return _recording_span(name, attributes, kind)


def set_error(current: Any) -> None:
    """Mark a span as failed (an error status without a description: never a message)."""
    if ENABLED and current.is_recording():
        current.set_status(_trace.Status(_trace.StatusCode.ERROR))


def traced(
    name: str | Callable[..., str],
    *,
    kind: str = "internal",
    attributes: Callable[..., Mapping[str, Any]] | None = None,
    result: Callable[[Any], Mapping[str, Any]] | None = None,
    on_success: Callable[..., None] | None = None,
) -> Callable[[F], F]:
    """Decorate a function or coroutine function so that each call is a span: `name` (or
    `name(*args, **kwargs)`), of `kind` (`internal` or `client`), with
    `attributes(*args, **kwargs)` at its start, `result(returned)` at its end, and
    `on_success(*args, **kwargs)` called once it returned. Without the extra the function is
    returned unchanged."""

    def start(args: tuple[Any, ...], kwargs: dict[str, Any]) -> Any:
        title = name(*args, **kwargs) if callable(name) else name
        given = attributes(*args, **kwargs) if attributes is not None else None
        return _recording_span(title, given, kind)

    def end(current: Any, returned: Any, args: tuple[Any, ...], kwargs: dict[str, Any]) -> None:
        if result is not None and current.is_recording():
            current.set_attributes(result(returned))
        if on_success is not None:
            on_success(*args, **kwargs)

    def decorate(function: F) -> F:
        if not ENABLED:
            return function
        if inspect.iscoroutinefunction(function):

            @functools.wraps(function)
            async def call_async(*args: Any, **kwargs: Any) -> Any:
                if not _instruments().tracing:
                    return await function(*args, **kwargs)
                with start(args, kwargs) as current:
                    returned = await function(*args, **kwargs)
                    end(current, returned, args, kwargs)
                    return returned

            return call_async  # type: ignore[return-value]

        @functools.wraps(function)
        def call(*args: Any, **kwargs: Any) -> Any:
            if not _instruments().tracing:
                return function(*args, **kwargs)
            with start(args, kwargs) as current:
                returned = function(*args, **kwargs)
                end(current, returned, args, kwargs)
                return returned

        return call  # type: ignore[return-value]

    return decorate


# -- compressions (from the telemetry events, D18) ---------------------------------------------
_KINDS = {
    "paxhistoria.game-agent-stack.v1": "game",
    "paxhistoria.catalyst-agent-stack.v1": "catalyst",
}


def compression_events(events: list[dict[str, Any]]) -> None:
    """Record the telemetry events of one logical compression (`jfsm.telemetry`, one per
    compress.v2 attempt, the last one carrying the compression's outcome): each attempt's
    duration, and the compression's outcome. Reads only kinds, outcomes and durations."""
    if not ENABLED or not events:
        return
    found = _instruments()
    if not found.metering:
        return
    for event in events:
        labels = {
            "jfsm.stack.kind": _KINDS.get(str(event.get("kind")), "other"),
            "jfsm.compression.outcome": str(event.get("outcome")),
        }
        if event.get("attempt"):  # attempt 0: none was made (the call raised or was cancelled)
            duration = event.get("durationMs")
            seconds = float(duration) / 1000.0 if isinstance(duration, (int, float)) else 0.0
            found.attempt_duration.record(seconds, labels)
    found.compressions.add(1, labels)


# -- stores --------------------------------------------------------------------------------------
_BACKENDS = {"MemoryStore": "memory", "FileStore": "file", "PostgresStore": "postgresql"}


def store_backend(store: object) -> str:
    """The backend label of a store (or of a subclass of one): `memory`, `file`,
    `postgresql`, else `other`."""
    for kind in type(store).__mro__:
        if kind.__name__ in _BACKENDS:
            return _BACKENDS[kind.__name__]
    return "other"


@contextlib.contextmanager
def _commit_span(store: Any, label: str, sets: int, deletes: int) -> Iterator[Any]:
    backend = store_backend(store)
    found = _instruments()
    started = time.perf_counter()
    outcome = "ok"
    attributes = {
        "jfsm.store.backend": backend,
        "jfsm.projection.label": label,
        "jfsm.projection.sets": sets,
        "jfsm.projection.deletes": deletes,
    }
    try:
        if found.tracing:
            with _recording_span("jfsm.store.commit", attributes, "internal") as current:
                yield current
        else:
            yield _NO_SPAN
    except BaseException as exc:
        outcome = _error_type(exc)
        if outcome == "store_fenced" and backend != "postgresql":  # that store counts its own
            fenced(backend, getattr(exc, "details", {}).get("game"))
        raise
    finally:
        labels = {"jfsm.store.backend": backend, "jfsm.store.outcome": outcome}
        found.commit_duration.record(time.perf_counter() - started, labels)
        if outcome == "ok" and found.metering:
            image = getattr(store, "image", None)
            if image is not None:
                footprint = image.footprint()
                found.footprint.record(footprint, {"jfsm.store.backend": backend})
                found.headroom.record(image.quota - footprint, {"jfsm.store.backend": backend})


def store_commit(
    store: object, label: str, sets: int = 0, deletes: int = 0
) -> contextlib.AbstractContextManager[Any]:
    """Around one store commit: a `jfsm.store.commit` span, its duration, and the game's
    footprint and quota headroom after it."""
    if not ENABLED:
        return _NOTHING
    found = _instruments()
    if not found.tracing and not found.metering:
        return _NOTHING
    return _commit_span(store, label, sets, deletes)


def fenced(backend: str, game: str | None = None, token: int | None = None) -> None:
    """A write or read refused because a newer owner holds the game: counted, and a
    `jfsm.lease.fence` span (a point in the trace)."""
    if not ENABLED:
        return
    found = _instruments()
    found.fenced.add(1, {"jfsm.store.backend": backend})
    if not found.tracing:
        return
    attributes: dict[str, Any] = {"jfsm.store.backend": backend}
    if game is not None:
        attributes["jfsm.game.id"] = game
    if token is not None:
        attributes["jfsm.lease.token"] = token
    with found.tracer.start_as_current_span("jfsm.lease.fence", attributes=attributes):
        pass


def takeover(backend: str) -> None:
    """A lease taken over from another owner (counted in `jfsm.lease.takeovers`)."""
    if ENABLED:
        _instruments().takeovers.add(1, {"jfsm.store.backend": backend})


def lease_name(*args: Any, takeover: bool = False, **kwargs: Any) -> str:
    """`jfsm.lease.takeover` for an open that takes the game over, else `jfsm.lease.acquire`
    (a `traced` name for the stores' opens)."""
    return "jfsm.lease.takeover" if takeover else "jfsm.lease.acquire"


def lease_previous(previous: str) -> None:
    """Say, on the current lease span, whose lease an open replaced: `none`, `self` (the same
    owner id), `expired` or `live` (another owner's); another owner's counts as a takeover."""
    if not ENABLED:
        return
    current = _trace.get_current_span()
    if current.is_recording():
        current.set_attribute("jfsm.lease.previous", previous)
    if previous in ("expired", "live"):
        takeover("postgresql")


def commit_batch(size: int) -> None:
    """One group-commit statement carried `size` commits."""
    if ENABLED:
        _instruments().batch_size.record(size, {"jfsm.store.backend": "postgresql"})


def history_lost(backend: str = "postgresql") -> None:
    """A store found that its database lost writes it had seen acknowledged
    (`store_history_lost`): counted in `jfsm.store.history_lost`. The store calls this once
    per detection."""
    if ENABLED:
        _instruments().history_lost.add(1, {"jfsm.store.backend": backend})


# -- PostgreSQL ----------------------------------------------------------------------------------
@functools.lru_cache(maxsize=64)
def _db_attributes(conninfo: str) -> tuple[tuple[str, Any], ...]:
    """`db.namespace`, `server.address` and `server.port` of a target (never its password
    or its user)."""
    out: list[tuple[str, Any]] = [("db.system.name", "postgresql")]
    try:
        from psycopg.conninfo import conninfo_to_dict

        params = conninfo_to_dict(conninfo)
    except Exception:
        return tuple(out)
    if params.get("dbname"):
        out.append(("db.namespace", str(params["dbname"])))
    host = str(params.get("host") or "")
    if host:
        out.append(("server.address", host.split(",")[0]))
    port = str(params.get("port") or "").split(",")[0]
    if port.isdigit():
        out.append(("server.port", int(port)))
    return tuple(out)


def db_name(operation: str, batch_size: int = 1) -> str:
    """A PostgreSQL statement's span name, `{db.operation.name} jfsm_game` (a batch of
    several commits: `BATCH commit jfsm_game`, as the conventions name a batch)."""
    return f"{'BATCH ' if batch_size > 1 else ''}{operation} jfsm_game"


def db_attributes(conninfo: str, operation: str, batch_size: int = 1) -> dict[str, Any]:
    """The attributes of a PostgreSQL statement's span: `db.system.name`, `db.namespace`,
    `server.address`, `server.port` (never the user, the password or the statement),
    `db.operation.name` (the store's name for the statement: `commit`, `checkpoint`,
    `seed`, `settle`, `renew`, `take`), `db.collection.name` and, for a batch,
    `db.operation.batch.size`."""
    attributes = dict(_db_attributes(conninfo))
    attributes["db.operation.name"] = f"{'BATCH ' if batch_size > 1 else ''}{operation}"
    attributes["db.collection.name"] = "jfsm_game"
    if batch_size > 1:
        attributes["db.operation.batch.size"] = batch_size
    return attributes


_pools: weakref.WeakSet[Any] = weakref.WeakSet()


def watch_pool(pool: Any) -> None:
    """Report `pool` (a `PgPool`) in the `db.client.connection.*` instruments while it
    lives."""
    if ENABLED:
        _pools.add(pool)
        _instruments()  # the observable instruments exist from now on


def _name(pool: Any) -> str:
    attributes = dict(_db_attributes(getattr(pool, "conninfo", "")))
    where = attributes.get("server.address", "")
    port = attributes.get("server.port", "")
    return f"{where}:{port}/{attributes.get('db.namespace', '')}"


def _stats() -> list[tuple[str, dict[str, int], int]]:
    """(pool name, psycopg_pool's statistics, maximum size) of every live pool watched."""
    out = []
    for pool in list(_pools):
        inner = getattr(pool, "pool", None)
        if inner is None or getattr(inner, "closed", True):
            continue
        with contextlib.suppress(Exception):
            out.append((_name(pool), dict(inner.get_stats()), int(inner.max_size)))
    return out


def _observe_connections(options: Any) -> Iterator[Any]:
    for name, stats, _ in _stats():
        size = stats.get("pool_size", 0)
        idle = stats.get("pool_available", 0)
        base = {"db.client.connection.pool.name": name}
        yield _metrics.Observation(idle, {**base, "db.client.connection.state": "idle"})
        yield _metrics.Observation(size - idle, {**base, "db.client.connection.state": "used"})


def _observe_max(options: Any) -> Iterator[Any]:
    for name, _, largest in _stats():
        yield _metrics.Observation(largest, {"db.client.connection.pool.name": name})


def _observe_pending(options: Any) -> Iterator[Any]:
    for name, stats, _ in _stats():
        waiting = stats.get("requests_waiting", 0)
        yield _metrics.Observation(waiting, {"db.client.connection.pool.name": name})


# -- the Prometheus endpoint of `jfsm driver --metrics` ----------------------------------------
def prometheus_text() -> tuple[Callable[[], bytes], str]:
    """Install an SDK meter provider whose reader is the Prometheus exporter (a registry of
    its own), as the global one, and return `(collect, content_type)`: `collect()` renders
    every metric above in Prometheus' text format (blocking CPU work: call it off the event
    loop). For an application (the driver), never a library. Raises `ImportError` without
    the extra `jfsm[prometheus]`."""
    from opentelemetry.exporter.prometheus import PrometheusMetricReader
    from opentelemetry.sdk.metrics import MeterProvider
    from prometheus_client import CONTENT_TYPE_LATEST, CollectorRegistry, generate_latest

    registry = CollectorRegistry()
    reader = PrometheusMetricReader(registry=registry)
    _metrics.set_meter_provider(MeterProvider(metric_readers=[reader]))
    _instruments()
    return (lambda: generate_latest(registry)), CONTENT_TYPE_LATEST


def _observe_requests(options: Any) -> Iterator[Any]:
    for name, stats, _ in _stats():
        base = {"db.client.connection.pool.name": name}
        asked = stats.get("requests_num", 0)
        waited = stats.get("requests_queued", 0)
        failed = stats.get("requests_errors", 0)
        yield _metrics.Observation(asked - waited, {**base, "jfsm.pool.request": "served"})
        yield _metrics.Observation(waited - failed, {**base, "jfsm.pool.request": "waited"})
        yield _metrics.Observation(failed, {**base, "jfsm.pool.request": "timed_out"})


def _observe_wait(options: Any) -> Iterator[Any]:
    for name, stats, _ in _stats():
        waited = stats.get("requests_wait_ms", 0) / 1000.0
        yield _metrics.Observation(waited, {"db.client.connection.pool.name": name})
