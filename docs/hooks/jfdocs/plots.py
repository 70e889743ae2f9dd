"""The benchmark pages' plots, drawn at build time from the benchmarks' JSON (issue 32, R228).

A run of `python -m benchmarks.run` writes each page's results as JSON and the page as
Markdown with tables (`docs/benchmarks/`); the page names its plots as images
(`concurrency-rounds.svg`, `results-footprint.svg`, `postgres-commits.svg`...), and this
module draws them from the same JSON with matplotlib, as SVG, for the hook to add to the
build as generated files. So a plot never drifts from the table below it, and no image is
committed. The SVG is deterministic (no date, fixed ids) and keeps its text as text.

`plots(docs_dir)` returns site path -> SVG for every benchmark JSON that exists; a JSON
without the keys a plot needs (an older run) draws nothing for it.
"""

from __future__ import annotations

import io
import json
from collections.abc import Callable
from pathlib import Path
from typing import Any

__all__ = ["concurrency_plots", "plots", "postgres_plots", "results_plots"]

# One look for every plot: a store keeps its colour on every plot of the site.
_STYLE: dict[str, dict[str, Any]] = {
    "filestore": {"color": "#3f51b5", "marker": "o", "label": "FileStore"},
    "postgres": {"color": "#c2185b", "marker": "s", "label": "PostgresStore"},
    "bare insert": {
        "color": "#616161",
        "marker": "^",
        "linestyle": "--",
        "label": "bare INSERT; COMMIT (same pool size)",
    },
    "filestore unfrozen": {
        "color": "#3f51b5",
        "marker": "o",
        "linestyle": ":",
        "alpha": 0.6,
        "label": "FileStore, imports not frozen",
    },
    "postgres unfrozen": {
        "color": "#c2185b",
        "marker": "s",
        "linestyle": ":",
        "alpha": 0.6,
        "label": "PostgresStore, imports not frozen",
    },
}


def _axes(title: str, xlabel: str, ylabel: str) -> tuple[Any, Any]:
    import matplotlib

    matplotlib.use("svg")
    from matplotlib import pyplot as plt

    plt.rcParams.update(
        {"svg.hashsalt": "jfsm", "svg.fonttype": "none", "font.size": 10, "axes.grid": True}
    )
    fig, ax = plt.subplots(figsize=(7.0, 4.2))
    ax.set_title(title)
    ax.set_xlabel(xlabel)
    ax.set_ylabel(ylabel)
    ax.grid(True, which="both", alpha=0.3)
    return fig, ax


def _figure(title: str, ylabel: str, games: list[int]) -> tuple[Any, Any]:
    fig, ax = _axes(title, "games on one event loop", ylabel)
    ax.set_xscale("log", base=2)
    ax.set_yscale("log")
    ax.set_xticks(games, [str(n) for n in games])
    return fig, ax


def _null_locator() -> Any:
    from matplotlib.ticker import NullLocator

    return NullLocator()


def _svg(fig: Any) -> str:
    from matplotlib import pyplot as plt

    out = io.StringIO()
    fig.tight_layout()
    fig.savefig(out, format="svg", metadata={"Date": None})
    plt.close(fig)
    return out.getvalue()


def _line(ax: Any, rows: list[dict[str, Any]], key: str, name: str) -> None:
    points = [(r["games"], r[key]) for r in rows if r.get(key)]
    if points:
        xs, ys = zip(*points, strict=True)
        ax.plot(xs, ys, **_STYLE.get(name, {"label": name}))


def concurrency_plots(result: dict[str, Any]) -> dict[str, str]:
    """The plots of `concurrency.md`: rounds/s, the longest callback and the loop's latency
    against games; {} for a JSON from before issue 32."""
    variants: dict[str, list[dict[str, Any]]] = result.get("variants") or {}
    if not isinstance(variants, dict) or not variants:
        return {}
    games = list(result.get("config", {}).get("games") or [1])
    out: dict[str, str] = {}

    fig, ax = _figure("Rounds/s", "rounds/s (all games)", games)
    for name in ("filestore", "postgres", "bare insert"):
        _line(ax, variants.get(name, []), "rounds_per_s", name)
    ax.legend(loc="best", fontsize=8)
    out["concurrency-rounds.svg"] = _svg(fig)

    fig, ax = _figure("The longest single callback (collector on)", "milliseconds", games)
    for name in ("filestore", "postgres", "filestore unfrozen", "postgres unfrozen"):
        _line(ax, variants.get(name, []), "callback_max_ms", name)
    goal = result.get("goal_callback_ms", 5.0)
    ax.axhline(goal, color="#2e7d32", linewidth=1, label=f"goal: {goal:g} ms")
    idle = (result.get("idle") or {}).get("callback", {}).get("max_ms")
    if idle:
        ax.axhline(idle, color="#9e9e9e", linewidth=1, linestyle="-.", label="idle loop")
    ax.legend(loc="best", fontsize=8)
    out["concurrency-callback.svg"] = _svg(fig)

    fig, ax = _figure("The loop's latency (a 1 ms ticker's overshoot, max)", "milliseconds", games)
    for name in ("filestore", "postgres"):
        rows = variants.get(name, [])
        _line(ax, rows, "lag_max_ms", name)
        points = [(r["games"], r["ready_cpu_ms"]) for r in rows if r.get("ready_cpu_ms")]
        if points:
            xs, ys = zip(*points, strict=True)
            style = _STYLE[name]
            ax.plot(
                xs,
                ys,
                color=style["color"],
                linestyle="--",
                linewidth=1,
                label=f"{style['label']}: N × CPU of a round",
            )
    ax.legend(loc="best", fontsize=8)
    out["concurrency-latency.svg"] = _svg(fig)
    return out


_STACKS = ("#3f51b5", "#00897b", "#f57c00", "#8e24aa", "#6d4c41")


def results_plots(result: dict[str, Any]) -> dict[str, str]:
    """The plots of `results.md`: record_round and before_generation against the store's
    footprint (one line per stack length, the naive preflight beside them), and the suite's
    resident memory over time by profile. Each is drawn only when its data is there."""
    out: dict[str, str] = {}
    cells = [c for c in (result.get("footprint") or {}).get("cells") or [] if "record_round" in c]
    if cells:
        fig, ax = _axes(
            "Cost of one call against the store's size", "footprint (MiB)", "median µs per call"
        )
        ax.set_xscale("log")
        ax.set_yscale("log")
        sizes = sorted({c["footprint_mib_target"] for c in cells})
        ax.set_xticks(sizes, [f"{x:g}" for x in sizes])
        ax.xaxis.set_minor_locator(_null_locator())
        stacks = sorted({c["stack_length"] for c in cells})
        for colour, stack in zip(_STACKS, stacks, strict=False):
            row = sorted(
                (c for c in cells if c["stack_length"] == stack),
                key=lambda c: c["footprint_mib_target"],
            )
            xs = [c["footprint_mib_target"] for c in row]
            label = f"{stack:,}-char stack"
            ax.plot(
                xs,
                [c["record_round"]["median_us"] for c in row],
                color=colour,
                marker="o",
                label=f"record_round, {label}",
            )
            ax.plot(
                xs,
                [c["before_generation"]["median_us"] for c in row],
                color=colour,
                marker="s",
                linestyle="--",
                alpha=0.7,
                label=f"before_generation, {label}",
            )
            naive = [
                (c["footprint_mib_target"], c["naive_record_round"]["median_us"])
                for c in row
                if (c.get("naive_record_round") or {}).get("median_us")
            ]
            if naive:
                nx, ny = zip(*naive, strict=True)
                ax.plot(
                    nx,
                    ny,
                    color=colour,
                    marker="^",
                    linestyle=":",
                    label=f"naive record_round, {label}",
                )
        ax.legend(loc="upper left", fontsize=6.5, ncol=2)
        out["results-footprint.svg"] = _svg(fig)
    suite = result.get("suite") or {}
    runs = []
    for key, name in (("quick_profile", "quick"), ("standard_profile", "standard")):
        after = (suite.get(key) or {}).get("after") or {}
        runs.append((name, after.get("rss_mib_samples") or []))
    runs.append(("thorough", (suite.get("thorough_profile") or {}).get("rss_mib_samples") or []))
    if any(samples for _, samples in runs):
        fig, ax = _axes("The suite's resident memory over time", "seconds", "RSS (MiB)")
        for colour, (name, samples) in zip(_STACKS, runs, strict=False):
            if samples:
                xs, ys = zip(*samples, strict=True)
                ax.plot(xs, ys, color=colour, label=f"{name} profile")
        ax.legend(loc="best", fontsize=8)
        out["results-suite-rss.svg"] = _svg(fig)
    return out


def postgres_plots(result: dict[str, Any]) -> dict[str, str]:
    """The plot of `postgres.md`: the store's commits/s against games, the pooled store and
    the old one (a connection per game); {} for a JSON from before R228."""
    pool = result.get("pool") or {}
    pooled = (pool.get("store_commits_per_s") or {}).get("postgres") or {}
    if not pooled:
        return {}
    old = [(r["games"], r["commits_per_s"]) for r in pool.get("old_store") or []]
    games = sorted({int(n) for n in pooled} | {n for n, _ in old})
    fig, ax = _figure("PostgresStore.commit alone (no engine)", "store commits/s", games)
    from matplotlib.ticker import FuncFormatter, LogLocator

    ax.yaxis.set_major_locator(LogLocator(base=10, subs=(1.0, 2.0, 5.0)))
    ax.yaxis.set_major_formatter(FuncFormatter(lambda v, _: f"{v:,.0f}"))
    ax.yaxis.set_minor_formatter(FuncFormatter(lambda v, _: ""))
    xs = sorted(int(n) for n in pooled)
    ax.plot(
        xs,
        [pooled[str(n)] if str(n) in pooled else pooled[n] for n in xs],
        **{**_STYLE["postgres"], "label": "PostgresStore (one pool, group commit)"},
    )
    if old:
        ox, oy = zip(*sorted(old), strict=True)
        ax.plot(
            ox,
            oy,
            color="#616161",
            marker="^",
            linestyle="--",
            label="old store (a connection per game)",
        )
    ax.legend(loc="best", fontsize=8)
    return {"postgres-commits.svg": _svg(fig)}


_DRAWERS: dict[str, Callable[[dict[str, Any]], dict[str, str]]] = {
    "concurrency.json": concurrency_plots,
    "results.json": results_plots,
    "postgres.json": postgres_plots,
}


def plots(docs_dir: Path) -> dict[str, str]:
    """Site path -> SVG for every benchmark JSON under `docs_dir/benchmarks/` that has
    plots. Raises `ImportError` without matplotlib (the docs dependency group)."""
    out: dict[str, str] = {}
    folder = docs_dir / "benchmarks"
    for name, draw in _DRAWERS.items():
        path = folder / name
        if not path.is_file():
            continue
        result = json.loads(path.read_text(encoding="utf-8"))
        for svg_name, svg in draw(result).items():
            out[f"benchmarks/{svg_name}"] = svg
    return out
