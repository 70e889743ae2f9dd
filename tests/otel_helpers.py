"""An OpenTelemetry SDK for one test: in-memory span exporter and metric reader installed as
the global providers, and what they recorded, as plain data.

The API lets a process set its global providers once; the SDK's own tests (and
`opentelemetry-test-utils`' `reset_trace_globals`) reset that guard between tests, as
`recording` does here, and put the unset state back at the end so no later test of the
same worker records anything.
"""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from typing import Any

from opentelemetry import metrics, trace
from opentelemetry.metrics import _internal as metrics_internal
from opentelemetry.sdk.metrics import MeterProvider
from opentelemetry.sdk.metrics.export import InMemoryMetricReader
from opentelemetry.sdk.trace import ReadableSpan, TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter
from opentelemetry.util._once import Once


def _set_globals(tracer_provider: Any, meter_provider: Any) -> None:
    trace._TRACER_PROVIDER_SET_ONCE = Once()
    trace._TRACER_PROVIDER = None
    metrics_internal._METER_PROVIDER_SET_ONCE = Once()
    metrics_internal._METER_PROVIDER = None
    if tracer_provider is not None:
        trace.set_tracer_provider(tracer_provider)
    if meter_provider is not None:
        metrics.set_meter_provider(meter_provider)


@dataclass
class Point:
    """One data point of one metric: its name, labels and value (sum, or a histogram's
    count and sum)."""

    name: str
    labels: dict[str, Any]
    value: float
    total: float | None = None


@dataclass
class Recorded:
    """What the SDK recorded: finished spans and the metrics' data points."""

    exporter: InMemorySpanExporter
    reader: InMemoryMetricReader
    _points: list[Point] = field(default_factory=list)

    def spans(self) -> list[ReadableSpan]:
        return list(self.exporter.get_finished_spans())

    def names(self) -> set[str]:
        return {span.name for span in self.spans()}

    def points(self) -> list[Point]:
        out = []
        data = self.reader.get_metrics_data()
        for resource in data.resource_metrics if data is not None else ():
            for scope in resource.scope_metrics:
                for metric in scope.metrics:
                    for point in metric.data.data_points:
                        count = getattr(point, "count", None)
                        if count is not None:
                            out.append(
                                Point(metric.name, dict(point.attributes or {}), count, point.sum)
                            )
                        else:
                            out.append(
                                Point(metric.name, dict(point.attributes or {}), point.value)
                            )
        return out

    def total(self, name: str, **labels: Any) -> float:
        """The sum (or histogram count) of metric `name` over the points with `labels`."""
        return sum(
            p.value
            for p in self.points()
            if p.name == name and all(p.labels.get(k) == v for k, v in labels.items())
        )


@contextmanager
def recording() -> Iterator[Recorded]:
    """Install an SDK with in-memory exporter and reader as the global providers for the
    block; the providers are unset again after it."""
    exporter = InMemorySpanExporter()
    tracer_provider = TracerProvider()
    tracer_provider.add_span_processor(SimpleSpanProcessor(exporter))
    reader = InMemoryMetricReader()
    meter_provider = MeterProvider(metric_readers=[reader])
    _set_globals(tracer_provider, meter_provider)
    try:
        yield Recorded(exporter, reader)
    finally:
        tracer_provider.shutdown()
        meter_provider.shutdown()
        _set_globals(None, None)


def text_values(recorded: Recorded) -> list[tuple[str, str]]:
    """Every string the SDK would export, with where it is: span and event names, attribute
    keys and values (sequences flattened), resource-free; metric names and label keys and
    values."""
    found: list[tuple[str, str]] = []

    def attributes(where: str, attrs: Any) -> None:
        for key, value in dict(attrs or {}).items():
            found.append((f"{where} key", str(key)))
            values = value if isinstance(value, (list, tuple)) else [value]
            found.extend((f"{where} {key}", str(v)) for v in values)

    for span in recorded.spans():
        found.append(("span name", span.name))
        attributes(f"span {span.name}", span.attributes)
        for event in span.events:
            found.append((f"event of {span.name}", event.name))
            attributes(f"event {event.name}", event.attributes)
        for link in span.links:
            attributes(f"link of {span.name}", link.attributes)
        if span.status.description:
            found.append((f"status of {span.name}", span.status.description))
    for point in recorded.points():
        found.append(("metric name", point.name))
        attributes(f"metric {point.name}", point.labels)
    return found


def leaks(texts: list[str], found: list[tuple[str, str]], width: int = 8) -> list[str]:
    """Where any `width`-character slice of `texts` (or a whole text shorter than that)
    appears in `found`: empty when no text leaked."""
    slices: set[str] = set()
    for text in texts:
        if len(text) < width:
            slices.add(text)
        slices.update(text[i : i + width] for i in range(len(text) - width + 1))
    out = []
    for where, value in found:
        for piece in slices:
            if piece in value:
                out.append(f"{where}: {value!r} holds {piece!r}")
                break
    return out
