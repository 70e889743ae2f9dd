"""The benchmark pages' plots, drawn at build time from the benchmarks' JSON (issue 32).

A benchmark writes its results as JSON and its page as Markdown with tables
(`docs/benchmarks/`); the page names its plots as images (`concurrency-rounds.svg`...),
and this module draws them from the same JSON with matplotlib, as SVG, for the hook to add
to the build as generated files. So a plot never drifts from the table below it, and no
image is committed. The SVG is deterministic (no date, fixed ids) and keeps its text as
text.

`plots(docs_dir)` returns site path -> SVG for every benchmark JSON that exists; a JSON
without the keys a plot needs (an older run) draws nothing for it.
"""

from __future__ import annotations

import io
import json
from collections.abc import Callable
from pathlib import Path
from typing import Any

__all__ = ["concurrency_plots", "plots"]

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


def _figure(title: str, ylabel: str, games: list[int]) -> tuple[Any, Any]:
    import matplotlib

    matplotlib.use("svg")
    from matplotlib import pyplot as plt

    plt.rcParams.update(
        {"svg.hashsalt": "jfsm", "svg.fonttype": "none", "font.size": 10, "axes.grid": True}
    )
    fig, ax = plt.subplots(figsize=(7.0, 4.2))
    ax.set_title(title)
    ax.set_xlabel("games on one event loop")
    ax.set_ylabel(ylabel)
    ax.set_xscale("log", base=2)
    ax.set_yscale("log")
    ax.set_xticks(games, [str(n) for n in games])
    ax.grid(True, which="both", alpha=0.3)
    return fig, ax


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


_DRAWERS: dict[str, Callable[[dict[str, Any]], dict[str, str]]] = {
    "concurrency.json": concurrency_plots,
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
