"""What OpenTelemetry costs the engine: rounds per second of one game, three ways, in one run.

    uv run python -m benchmarks.observability [--quick] --out DIR

Each variant is a fresh interpreter that plays the same game (an in-memory store, the
in-process fake compressor, a threshold small enough that about every fourth round
publishes a summary, so every span and metric of a round and of a compression is
exercised) and reports rounds per second of CPU time (`time.process_time`: a shared
machine's load does not count):

- **no extra**: `opentelemetry` cannot be imported (an import hook refuses it, as when the
  extra `jfsm[otel]` is not installed): the engine's traced methods are the plain ones;
- **API, no SDK**: the API installed, no provider configured (what a library's user gets
  who configured nothing): every span is a non-recording one;
- **SDK, in memory**: the SDK with a `SimpleSpanProcessor` into an `InMemorySpanExporter`
  and an `InMemoryMetricReader` (every span exported as it ends, no batching thread).

The variants are interleaved (A B C A B C ...) and reported as medians, with each one's
ratio to **no extra**: the ratios travel across machines, the rates do not.
"""

from __future__ import annotations

import argparse
import json
import statistics
import subprocess
import sys
from pathlib import Path
from typing import Any

from benchmarks.common import ratio, run_meta, run_stamp

__all__ = ["VARIANTS", "main", "render", "run", "section"]

ROOT = Path(__file__).resolve().parent.parent

_BLOCK = """
import importlib.abc, sys
class NotInstalled(importlib.abc.MetaPathFinder):
    def find_spec(self, name, path, target=None):
        if name == "opentelemetry" or name.startswith("opentelemetry."):
            raise ModuleNotFoundError(name, name=name)
        return None
sys.meta_path.insert(0, NotInstalled())
"""

_SDK = """
from opentelemetry import metrics, trace
from opentelemetry.sdk.metrics import MeterProvider
from opentelemetry.sdk.metrics.export import InMemoryMetricReader
from opentelemetry.sdk.trace import TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter
exporter = InMemorySpanExporter()
provider = TracerProvider()
provider.add_span_processor(SimpleSpanProcessor(exporter))
trace.set_tracer_provider(provider)
metrics.set_meter_provider(MeterProvider(metric_readers=[InMemoryMetricReader()]))
"""

_GAME = """
import asyncio, json, time
from jfsm import GameEngine, MemoryStore, observability
from jfsm.testing import FakeCompressor

ROUNDS = {rounds}

async def main():
    async with GameEngine(MemoryStore(), FakeCompressor(), game_id="bench",
                          thresholds={{"game": 2000, "catalyst": 2000}}) as engine:
        for n in range(20):  # warm up
            await engine.record_round("warm " * 20, "up " * 20)
            await engine.before_generation()
        published = 0
        started = time.process_time()
        for n in range(ROUNDS):
            await engine.record_round(f"player input {{n}} " * 20, f"simulated output {{n}} " * 20)
            report = await engine.before_generation()
            published += report.outcome == "published"
        return time.process_time() - started, published

seconds, published = asyncio.run(main())
print(json.dumps({{"rounds_per_s": ROUNDS / seconds, "published": published,
                  "enabled": observability.ENABLED}}))
"""

#: Variant name -> the code run before the game.
VARIANTS = {"no extra": _BLOCK, "API, no SDK": "", "SDK, in memory": _SDK}


def _once(prelude: str, rounds: int) -> dict[str, Any]:
    done = subprocess.run(
        [sys.executable, "-c", prelude + _GAME.format(rounds=rounds)],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=600,
        check=False,
    )
    if done.returncode != 0:
        raise RuntimeError(done.stderr[-2000:])
    result: dict[str, Any] = json.loads(done.stdout)
    return result


def run(*, quick: bool = False, log: Any = print) -> dict[str, Any]:
    """Measure the three variants, interleaved; returns medians and ratios."""
    rounds, repeats = (200, 1) if quick else (2000, 7)
    samples: dict[str, list[float]] = {name: [] for name in VARIANTS}
    published: dict[str, int] = {}
    for repeat in range(repeats):
        for name, prelude in VARIANTS.items():
            result = _once(prelude, rounds)
            expected = name != "no extra"
            if result["enabled"] is not expected:
                raise RuntimeError(f"{name}: observability.ENABLED is {result['enabled']}")
            samples[name].append(result["rounds_per_s"])
            published[name] = result["published"]
        log(f"  repeat {repeat + 1}/{repeats}")
    medians = {name: statistics.median(values) for name, values in samples.items()}
    base = medians["no extra"]
    return {
        "rounds": rounds,
        "repeats": repeats,
        "published_per_run": published["no extra"],
        "variants": {
            name: {
                "rounds_per_s": round(medians[name], 1),
                "samples": [round(v, 1) for v in samples[name]],
                "ratio_to_no_extra": ratio(medians[name], base),
            }
            for name in VARIANTS
        },
    }


def section(result: dict[str, Any], level: str = "##") -> list[str]:
    """The Markdown of a result, under a heading of `level`."""
    lines = [
        f"{level} OpenTelemetry: what it costs",
        "",
        "`python -m benchmarks.observability`: one game of "
        f"{result['rounds']:,} rounds (`record_round` then `before_generation`; "
        f"{result['published_per_run']} summaries published per run) on an in-memory store "
        "with the in-process fake compressor, in a fresh interpreter per run, "
        f"{result['repeats']} runs of each variant interleaved; rounds per second of CPU time, "
        "medians. See [Observability](../guide/observability.md).",
        "",
        "| Variant | rounds/s | ratio to no extra | runs |",
        "|---|---|---|---|",
    ]
    for name, row in result["variants"].items():
        runs = ", ".join(f"{v:,.0f}" for v in row["samples"])
        lines.append(
            f"| {name} | {row['rounds_per_s']:,.1f} | {row['ratio_to_no_extra']} | {runs} |"
        )
    lines += [
        "",
        "**no extra**: `opentelemetry` cannot be imported, so the traced methods are the plain "
        "functions. **API, no SDK**: the global providers are the API's own, and the engine "
        "skips its spans and measures ([R208](../decisions.md#r208)). **SDK, in memory**: "
        "every span and metric recorded, each span exported as it ends (a "
        "`SimpleSpanProcessor`), the heaviest set-up; a `BatchSpanProcessor` moves the "
        "export to a thread of its own.",
    ]
    return lines


def render(result: dict[str, Any], meta: dict[str, Any] | None = None) -> str:
    """The Markdown page of a result (`docs/benchmarks/observability.md`), opening with the
    run that measured it."""
    lines = section(result, "#")
    if meta:
        lines[2:2] = [run_stamp(meta, "observability"), ""]
    return "\n".join(lines) + "\n"


def main(argv: list[str] | None = None) -> int:
    """This section alone, into `--out` (the docs' pages come from `benchmarks.run`)."""
    parser = argparse.ArgumentParser(prog="python -m benchmarks.observability")
    parser.add_argument("--quick", action="store_true", help="tiny sizes (CI smoke)")
    parser.add_argument("--out", type=Path, required=True, help="output directory")
    args = parser.parse_args(argv)
    from benchmarks.pages import MEASURED

    command = "python -m benchmarks.observability" + (" --quick" if args.quick else "")
    meta = run_meta(command, args.quick, MEASURED["observability"])
    result = run(quick=args.quick, log=lambda line: print(line, file=sys.stderr))
    args.out.mkdir(parents=True, exist_ok=True)
    (args.out / "observability.json").write_text(
        json.dumps({"meta": meta, **result}, indent=1) + "\n", encoding="utf-8"
    )
    (args.out / "observability.md").write_text(render(result, meta), encoding="utf-8")
    print(f"wrote {args.out / 'observability.md'}", file=sys.stderr)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
