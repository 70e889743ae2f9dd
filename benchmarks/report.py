"""Rendering the results JSON as Markdown (`docs/benchmarks/results.md`)."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from benchmarks.common import run_stamp

__all__ = ["render"]


def _fmt(value: Any, digits: int = 1) -> str:
    if value is None:
        return "n/a"
    if isinstance(value, bool):
        return "yes" if value else "**no**"
    if isinstance(value, float):
        if abs(value) >= 100:
            return f"{value:,.0f}"
        return f"{value:,.{digits}f}"
    if isinstance(value, int):
        return f"{value:,}"
    return str(value)


def _table(header: Sequence[str], rows: Sequence[Sequence[Any]]) -> list[str]:
    out = ["| " + " | ".join(header) + " |", "|" + "|".join("---" for _ in header) + "|"]
    for row in rows:
        out.append("| " + " | ".join(_fmt(c) if not isinstance(c, str) else c for c in row) + " |")
    return out


def _goals(r: dict[str, Any]) -> list[str]:
    rows = []
    fp = r.get("footprint")
    if fp:
        g = fp["goal"]
        rows.append(
            [
                "1a. record_round O(change)",
                g["text"],
                f"{_fmt(g['record_round_worst_ratio'], 2)}× (worst stack)",
                _fmt(
                    g["record_round_worst_ratio"] is not None
                    and g["record_round_worst_ratio"] <= 1.25
                ),
            ]
        )
        rows.append(
            [
                "1b. before_generation O(1)",
                g["text"] + " (same stack)",
                f"{_fmt(g['before_generation_worst_ratio'], 2)}× (worst stack)",
                _fmt(
                    g["before_generation_worst_ratio"] is not None
                    and g["before_generation_worst_ratio"] <= 1.25
                ),
            ]
        )
    du = r.get("durable")
    if du:
        g = du["goal"]
        rows.append(
            [
                "2. FileStore vs SQLite",
                "throughput ratio ≥ 1.0",
                f"{_fmt(g['ratio'], 2)}×",
                _fmt(g["met"]),
            ]
        )
    do = r.get("docs")
    if do and "goal" in do:
        g = do["goal"]
        rows.append(
            [
                "5. Docs build CPU",
                g["text"],
                f"{_fmt(g['cpu_s'])} s",
                _fmt(g["met"]),
            ]
        )
    rows += _suite_goals(r.get("suite") or {})
    st = r.get("startup")
    if st and "goal" in st:
        bare = {row["variant"]: row["ratio_to_bare_python"] for row in st["rows"]}
        imported = _fmt(bare.get("python -c 'import jfsm'"), 2)
        rows.append(
            [
                "Start-up CPU",
                st["goal"]["text"],
                f"{_fmt(st['goal']['worst_cpu_s'], 3)} s (import: {imported}× bare Python)",
                _fmt(st["goal"]["met"]),
            ]
        )
    return _table(["Goal", "Target", "Measured", "Met"], rows)


SUITE_STANDARD_S = 180.0  # issue 14: the standard profile under 3 minutes on 2 cores
SUITE_RSS_MIB = 1024.0  # issue 14: the suite's process under 1 GB in any profile


MAIN_JOB_S = 20.0  # issue 32 (item 3): the main job in 20 s on an idle 2-core machine


def _suite_goals(su: dict[str, Any]) -> list[list[str]]:
    """The suite's speed and memory goals, from the profiles this run measured."""
    rows = []
    main = (su.get("quick_profile") or {}).get("after") or {}
    if main.get("run"):
        rows.append(
            [
                "3c. main job (`jfsm conformance`)",
                f"wall ≤ {MAIN_JOB_S:.0f} s on an idle machine; peak RSS reported",
                f"{main['wall_s']:.1f} s; peak RSS {main['peak_rss_mib']:.0f} MiB (suite), "
                f"{main.get('tree_peak_rss_mib', 0):.0f} MiB "
                "(with the processes it started, sampled every 0.5 s)",
                _fmt(main["wall_s"] <= MAIN_JOB_S),
            ]
        )
    standard = (su.get("standard_profile") or {}).get("after") or {}
    if standard.get("run"):
        rows.append(
            [
                "3a. standard profile",
                f"wall < {SUITE_STANDARD_S:.0f} s on this machine",
                f"{standard['wall_s']:.0f} s",
                _fmt(standard["wall_s"] < SUITE_STANDARD_S),
            ]
        )
    peaks = {}
    for key, name in (("quick_profile", "quick"), ("standard_profile", "standard")):
        after = (su.get(key) or {}).get("after") or {}
        if after.get("run"):
            peaks[name] = after["peak_rss_mib"]
    th = su.get("thorough_profile") or {}
    if th.get("run"):
        peaks["thorough" + (" (stopped early)" if th.get("limit_s") else "")] = th["peak_rss_mib"]
    if peaks:
        rows.append(
            [
                "3b. suite's peak RSS",
                f"< {SUITE_RSS_MIB:.0f} MiB in every profile",
                ", ".join(f"{k} {v:.0f} MiB" for k, v in peaks.items()),
                _fmt(max(peaks.values()) < SUITE_RSS_MIB),
            ]
        )
    return rows


def _footprint(fp: dict[str, Any]) -> list[str]:
    out = ["## 1. O(change), not O(store)", ""]
    out.append(
        "Each cell is a separately built store (game-data writes, rounds with a compression "
        "check before each generation, checkpoints), with its game stack shaped to the given "
        "canonical length (a summary plus exact chunks). One repetition visits every cell "
        f"once, in rotated order. A measured round is {fp['measured_round_chars']} code points "
        f"({fp['config']['record_reps']} per cell, so the stack grows by about "
        f"{fp['config']['record_reps'] * (fp['measured_round_chars'] + 42):,} code points "
        "during the measurement). `before_generation` is timed in batches of "
        f"{fp['config']['gen_batch']} calls (per-call figures), and so is `len(text())`. "
        "Naive: the same engine over a "
        "store whose preflight JCS-serializes the whole post-state store and change log with "
        "`jfsm.jcs.canonical_bytes` on every commit; `len(text())` builds the canonical text "
        "instead of reading the kept length. Times in µs."
    )
    out += [
        "",
        "![record_round and before_generation against the footprint](results-footprint.svg)",
        "",
    ]
    rows = []
    for c in fp["cells"]:
        nr = c["naive_record_round"]
        rows.append(
            [
                _fmt(c["footprint_mib"], 3),
                _fmt(c["stack_length"]),
                _fmt(c["keys"]),
                _fmt(c["rounds"]),
                _fmt(c["record_round"]["median_us"]),
                _fmt(c["record_round"]["p90_us"]),
                _fmt(c["before_generation"]["median_us"]),
                _fmt(c["before_generation"]["p90_us"]),
                _fmt(nr["median_us"]) if nr["n"] else "–",
                _fmt(c["naive_measure_text"]["median_us"]),
            ]
        )
    out += _table(
        [
            "Footprint MiB",
            "Stack chars",
            "Keys",
            "Rounds",
            "record_round median",
            "record_round p90",
            "before_generation median",
            "before_generation p90",
            "naive record_round median",
            "naive len(text()) median",
        ],
        rows,
    )
    if fp["skipped"]:
        out.append("")
        out.append("Not built: " + "; ".join(f"{s['cell']} ({s['reason']})" for s in fp["skipped"]))
    out += ["", "Largest over smallest footprint, same stack (medians):", ""]
    out += _table(
        ["Stack chars", "From MiB", "To MiB", "record_round ratio", "before_generation ratio"],
        [
            [
                _fmt(r["stack"]),
                _fmt(r["from_mib"], 2),
                _fmt(r["to_mib"], 2),
                _fmt(r["record_round_ratio"], 3),
                _fmt(r["before_generation_ratio"], 3),
            ]
            for r in fp["ratios_largest_over_smallest"]
        ],
    )
    out += ["", "Longest over shortest stack, same footprint (medians):", ""]
    out += _table(
        [
            "Footprint MiB",
            "From chars",
            "To chars",
            "before_generation ratio",
            "naive len(text()) ratio",
        ],
        [
            [
                _fmt(r["mib"], 2),
                _fmt(r["from_stack"]),
                _fmt(r["to_stack"]),
                _fmt(r["before_generation_ratio"], 3),
                _fmt(r["naive_text_ratio"], 3),
            ]
            for r in fp["before_generation_vs_stack"]
        ],
    )
    out += ["", "Naive re-serializing preflight against the engine (record_round medians):", ""]
    out += _table(
        ["Cell", "Engine µs", "Naive µs", "Naive / engine"],
        [
            [r["cell"], _fmt(r["engine_us"]), _fmt(r["naive_us"]), _fmt(r["naive_over_engine"])]
            for r in fp["naive"]
        ],
    )
    return out


def _durable(du: dict[str, Any]) -> list[str]:
    t = du["throughput"]
    out = ["## 2. Durable file store vs SQLite", ""]
    out.append(
        f"{t['projections']:,} projections (rounds-like sets, mean set value "
        f"{t['mean_set_value_bytes']:,} bytes; summary publications setting one key and "
        f"deleting 50; plain deletes) after a pre-fill of {t['prefill_keys']:,} game-data "
        f"keys, through `FileStore.commit` and SQLite {du['sqlite_version']} (WAL, "
        "`synchronous=FULL`, one transaction per projection, key/value table), alternating "
        f"in batches of {t['batch']}. Same final state in both: {_fmt(t['same_final_state'])}. "
        "Times in µs."
    )
    out.append("")
    k = t["by_kind"]
    rows = []
    for name, key in (("FileStore", "filestore"), ("SQLite", "sqlite")):
        rows.append(
            [
                name,
                _fmt(t[f"{key}_commits_per_s"]),
                _fmt(t[f"{key}_commit"]["median_us"]),
                _fmt(t[f"{key}_commit"]["p90_us"]),
                _fmt(k["round"][key]["median_us"]),
                _fmt(k["publish"][key]["median_us"]),
                _fmt(k["delete"][key]["median_us"]),
            ]
        )
    out += _table(
        [
            "Backend",
            "Commits/s (median batch)",
            "Commit median",
            "Commit p90",
            f"Round median ({k['round']['count']})",
            f"Publish median ({k['publish']['count']})",
            f"Delete median ({k['delete']['count']})",
        ],
        rows,
    )
    out += [
        "",
        f"Throughput ratio FileStore/SQLite (median of batch pairs): "
        f"**{_fmt(t['ratio_filestore_over_sqlite'], 3)}** (p10 {_fmt(t['ratio_p10'], 3)}, "
        f"p90 {_fmt(t['ratio_p90'], 3)}). CPU part of a FileStore commit (preflight + record "
        f"encoding, no I/O): median {_fmt(t['filestore_cpu_part']['median_us'])} µs.",
        "",
        "Log write strategies (raw I/O of one 4 KiB record, interleaved):",
        "",
    ]
    out += _table(
        ["Strategy", "Median µs", "p90 µs", "vs append + fsync"],
        [
            [
                s["strategy"],
                _fmt(s["median_us"]),
                _fmt(s["p90_us"]),
                _fmt(s["over_append_fsync"], 2),
            ]
            for s in du["io_strategies"]
        ],
    )
    out += [
        "",
        "Reopen (`FileStore.open` + close against reading the same files and "
        "`json.loads`), medians in ms:",
        "",
    ]
    out += _table(
        [
            "Store",
            "Footprint MiB",
            "Bytes on disk",
            "FileStore.open ms",
            "read + json.loads ms",
            "Ratio",
        ],
        [
            [
                r["variant"],
                _fmt(r["footprint_mib"], 2),
                _fmt(r["bytes_on_disk"]),
                _fmt(r["filestore_open"]["median_us"] / 1000),
                _fmt(r["plain_read_json_loads"]["median_us"] / 1000),
                _fmt(r["open_over_plain"], 2),
            ]
            for r in du["reopen"]
        ],
    )
    return out


def _suite(su: dict[str, Any]) -> list[str]:
    out = ["## 3. Conformance suite throughput", ""]
    if not su.get("available"):
        out.append(f"Suite not available: {su.get('reason')}")
        return out
    rt = su.get("roundtrips", {})
    if rt.get("available") is False:
        out.append(f"Driver round trips: {rt['reason']}")
    else:
        out += ["Driver round trips through the suite's `DriverClient` (µs):", ""]
        rows = []
        for transport in ("in_process", "stdio"):
            for op in ("record_round", "generate"):
                s = rt[f"{transport}:{op}"]
                rows.append(
                    [
                        transport.replace("_", " "),
                        f"`{op}`",
                        _fmt(s["median_us"]),
                        _fmt(s["p90_us"]),
                        _fmt(s["ops_per_s"]),
                    ]
                )
        out += _table(["Transport", "Op", "Median µs", "p90 µs", "Ops/s"], rows)
    out.append("")
    ma = su.get("machines", {})
    if ma.get("available") is False:
        out.append(f"State machines: {ma['reason']}")
    else:
        out += [
            "Hypothesis state machine (`jfsm_conformance.machines.memory`) over a `Session`: a "
            "step is one verified operation.",
            "",
        ]
        out += _table(
            [
                "Machine",
                "Transport",
                "Runs",
                "Steps/run",
                "Steps/s",
                "Protocol messages/s",
                "s/run",
                "Status",
            ],
            [
                [
                    m["machine"],
                    m["transport"].replace("_", " "),
                    _fmt(m["runs"]),
                    "/".join(str(x) for x in m["steps_per_run"]),
                    _fmt(m["steps_per_s"]),
                    _fmt(m["messages_per_s"]),
                    _fmt(m["seconds_per_run"], 2),
                    ", ".join(m["status"]),
                ]
                for m in ma.get("runs", [])
            ],
        )
    out.append("")
    out += _profiles(su)
    return out


def _has_rss_samples(su: dict[str, Any]) -> bool:
    runs = [((su.get(k) or {}).get("after") or {}) for k in ("quick_profile", "standard_profile")]
    runs.append(su.get("thorough_profile") or {})
    return any(run.get("rss_mib_samples") for run in runs)


def _profiles(su: dict[str, Any]) -> list[str]:
    out = [
        "### Profiles before and after (speed and memory, decisions R54-R58)",
        "",
        "`jfsm conformance --profile P` in a fresh subprocess, the code before (commit "
        "`e2e1584`, its default driver `python:jfsm.driver:durable_reference_driver`: the "
        "reference engine with its retry backoff, every game kept open) and after (this "
        "commit, default driver: the reference engine without backoff, at most 8 durable "
        "games open), one after the other in this run. Peak RSS is the suite's process "
        "(suite, fake compress.v2 and the in-process driver). Steps are verified session "
        "steps (scenarios and machines); messages are protocol messages sent to the driver.",
        "",
    ]
    if su.get("peak_rss_note"):  # a correction recorded with the numbers
        out += [su["peak_rss_note"], ""]
    rows = []
    notes = []
    for key, name in (("quick_profile", "quick"), ("standard_profile", "standard")):
        qp = su.get(key, {})
        if not qp.get("run"):
            notes.append(f"{name} profile: {qp.get('reason')}")
            continue
        for when in ("before", "after"):
            r = qp.get(when, {})
            if not r.get("run"):
                notes.append(f"{name} profile {when}: {r.get('reason')}")
                continue
            rows.append(
                [
                    name,
                    f"{when} ({r['code']})",
                    f"{r['wall_s']:.1f}",
                    f"{r['peak_rss_mib']:.0f}",
                    _fmt(r.get("steps")),
                    _fmt(r.get("steps_per_s")),
                    _fmt(r.get("messages")),
                    _fmt(r.get("messages_per_s")),
                    str(r["exit_code"]),
                    ", ".join(f"{k} {v}" for k, v in sorted(r["counts"].items())),
                ]
            )
        if qp.get("wall_ratio") is not None:
            notes.append(
                f"{name} profile: before / after wall time **{qp['wall_ratio']}×**, "
                f"peak RSS {qp['rss_ratio']}×."
            )
    if rows:
        out += _table(
            [
                "Profile",
                "Run",
                "Wall s",
                "Peak RSS MiB",
                "Steps",
                "Steps/s",
                "Messages",
                "Messages/s",
                "Exit",
                "Verdicts",
            ],
            rows,
        )
        out.append("")
    out += [f"- {n}" for n in notes]
    if _has_rss_samples(su):  # the docs build draws the plot from the same samples
        out += ["", "![The suite's resident memory over time, by profile](results-suite-rss.svg)"]
    th = su.get("thorough_profile", {})
    if th.get("run"):
        samples = th.get("rss_mib_samples") or []
        shown = ", ".join(f"{t:.0f} s {m:.0f}" for t, m in samples[::6])
        how = (
            f"stopped by SIGTERM after {th['wall_s']:.0f} s"
            if th.get("limit_s")
            else f"the whole profile, {th['wall_s']:.0f} s"
        )
        out += [
            "",
            f"Thorough profile (this commit), {how}: "
            f"exit code {th['exit_code']}, partial report {th.get('partial')} (phase "
            f"`{th.get('phase')}`), peak RSS **{th['peak_rss_mib']:.0f} MiB**, "
            f"{_fmt(th.get('steps_per_s'))} steps/s. RSS (MiB) every 30 s: {shown}.",
        ]
    after = (su.get("quick_profile") or {}).get("after") or {}
    if after.get("rules"):
        idle = after.get("rules_idle") or {}
        ran = {k: v - idle.get(k, 0) for k, v in after["rules"].items()}
        out += [
            "",
            "Machine rules that ran (a verified step) in the quick profile, after: "
            + ", ".join(f"`{k}` {v}" for k, v in ran.items())
            + ".",
        ]
    out.append("")
    return out


def _memory(me: dict[str, Any]) -> list[str]:
    out = ["## 4. Memory", ""]
    goal = me.get("goal_peak_over_footprint")
    before = me.get("before_r51", {})
    out.append(
        "Peak RSS of a fresh subprocess (VmHWM; `getrusage` ru_maxrss agrees) holding an "
        "engine over the store; baseline = the interpreter with jfsm imported "
        f"({_fmt(me['baseline_peak_rss_mib'])} MiB)."
        + (f" Goal: peak at most {goal:g}× the footprint in both cases." if goal else "")
        + (
            " *Before R51*: the same measurement on the whole-file snapshot reader (commit "
            "`e2e1584`), which decoded the whole file as one Latin-1 text."
            if before
            else ""
        )
    )
    out.append("")
    out += _table(
        [
            "Case",
            "Footprint MiB",
            "Peak RSS MiB",
            "Peak / footprint",
            "Before R51",
            "Goal met",
            "(Peak − baseline) / footprint",
            "RSS after (gc) MiB",
            "(RSS after − baseline) / footprint",
        ],
        [
            [
                c["case"],
                _fmt(c["footprint_mib"], 2),
                _fmt(c["peak_rss_mib"]),
                _fmt(c["peak_over_footprint"], 2),
                _fmt(before.get(c["case"]), 2),
                "–" if not goal else "yes" if c["peak_over_footprint"] <= goal else "**no**",
                _fmt(c["peak_minus_baseline_over_footprint"], 2),
                _fmt(c["rss_after_mib"]),
                _fmt(c["resident_minus_baseline_over_footprint"], 2),
            ]
            for c in me["cases"]
        ],
    )
    reader = me.get("reader")
    if reader:
        out.append("")
        out.append(
            f"Snapshot reader alone (`jfsm.stores.file.snapshot.read_snapshot`, windows of 1 MiB, "
            f"decision R51) over the {_fmt(reader['file_mib'], 2)} MiB snapshot: "
            f"**{_fmt(reader['mib_per_s'])} MiB/s** (median of 5), peak of its Python "
            f"allocations (`tracemalloc`) {_fmt(reader['traced_peak_over_file'], 2)}× the "
            "file (the members it returns are about 1×)."
        )
    return out


def _docs(do: dict[str, Any]) -> list[str]:
    real, base = do["real"], do["baseline"]
    out = ["## 5. Docs build", ""]
    out.append(
        "`python -m mkdocs build` in a fresh subprocess per build, at the repository root, "
        f"{do['config']['repeats']} build{'s' if do['config']['repeats'] != 1 else ''} of each, "
        "interleaved A B. A: the real build "
        "(`mkdocs build --strict`, what `tests/packaging/test_docs.py` runs). B: the same theme, "
        "plugins and Markdown extensions without the generation hook `docs/hooks/generate.py` (a "
        "temporary config: `INHERIT` of `mkdocs.yml`, `hooks: []`), so without the generated "
        "reference pages, diagrams, worked example, published spec files and fragments"
        + (f"; B is not strict: {base['not_strict_because']}" if not base.get("strict") else "")
        + ". CPU: the child's user + system time (`getrusage(RUSAGE_CHILDREN)`), which does "
        "not depend on the machine's load the way wall time does. Medians in seconds."
    )
    out.append("")
    out += _table(
        ["Build", "Strict", "Builds", "HTML pages", "Warnings", "CPU s", "Wall s", "CPU s, each"],
        [
            [
                name,
                _fmt(v["strict"]),
                _fmt(v["n"]),
                _fmt(v["pages"]),
                _fmt(v["warnings"]),
                _fmt(v["cpu_s_median"], 2),
                _fmt(v["wall_s_median"], 2),
                ", ".join(f"{r['cpu_s']:.2f}" for r in v["runs"]),
            ]
            for name, v in (("A. real", real), ("B. no hook", base))
        ],
    )
    out += [
        "",
        f"Real over baseline: CPU **{_fmt(do['cpu_ratio_real_over_baseline'], 2)}×**, wall "
        f"{_fmt(do['wall_ratio_real_over_baseline'], 2)}×. Goal: {do['goal']['text']} (the "
        "budget the docs test used to assert): "
        + ("met." if do["goal"]["met"] else "**not met**."),
    ]
    return out


def _startup(st: dict[str, Any]) -> list[str]:
    out = [
        "## Start-up: `import jfsm` and `jfsm --version` against bare Python",
        "",
        "CPU seconds (user + system) of a fresh interpreter, from the child's resource usage; "
        "the three variants interleaved.",
        "",
    ]
    out += _table(
        ["Variant", "Runs", "CPU s, median", "CPU s, max", "Ratio to `python -c pass`"],
        [
            [
                f"`{r['variant']}`",
                _fmt(r["n"]),
                _fmt(r["cpu_s_median"], 3),
                _fmt(r["cpu_s_max"], 3),
                _fmt(r["ratio_to_bare_python"], 2),
            ]
            for r in st["rows"]
        ],
    )
    out += [
        "",
        f"Goal: {st['goal']['text']}: " + ("met." if st["goal"]["met"] else "**not met**."),
    ]
    return out


def _observability(ob: dict[str, Any]) -> list[str]:
    from benchmarks.observability import section

    return section(ob)


def render(results: dict[str, Any]) -> str:
    meta = results["meta"]
    lines = ["# jfsm benchmarks", "", run_stamp(meta)]
    lines += [
        "",
        "The other pages of this run: [One worker, many games](concurrency.md) and "
        "[PostgreSQL store benchmarks](postgres.md).",
    ]
    lines += [
        "",
        "Method: `time.perf_counter_ns`, many repetitions, medians (p90 beside them); "
        "variants measured side by side in one process, interleaved A B A B. The machine is "
        "shared, so absolute numbers are noisy; the ratios are the result.",
        "",
        "## Goals",
        "",
    ]
    lines += _goals(results)
    for key, fn in (
        ("footprint", _footprint),
        ("durable", _durable),
        ("suite", _suite),
        ("memory", _memory),
        ("startup", _startup),
        ("observability", _observability),
        ("docs", _docs),
    ):
        section = results.get(key)
        lines.append("")
        if section is None:
            lines.append(f"## {key}: not run")
            continue
        if "error" in section:
            lines.append(f"## {key}: failed")
            lines.append("")
            lines.append(f"```\n{section['error']}\n```")
            continue
        lines += fn(section)
    return "\n".join(lines) + "\n"
