"""The benchmark pages of one run, and the checks that they still describe the code (R228,
R229).

`python -m benchmarks.run` measures every section once, on one commit, and `write` turns the
results into the pages of `docs/benchmarks/`: `results` (the engine, the file store, the
suite, memory, start-up and the docs build), `concurrency` (one worker, many games),
`postgres` (the PostgreSQL store) and `observability` (what OpenTelemetry costs). Each page
is a JSON file and the Markdown rendered from it; every JSON holds the run's `meta`
(command, commit, date, machine, load), so every page names the run it comes from, and its
`measures`: the page's headline numbers by name.

A page may cite a measure of another page of the run (`CITES`): the concurrency page shows
what `PostgresStore.commit` alone reaches beside the engine's rounds, and the PostgreSQL
page the engine's rounds beside the store's commits; the results page and the concurrency
page both show the main job. A cited measure is copied into the citing page's JSON under
the same name, so two pages from different runs disagree on it, and `disagreements` says
so.

`MEASURED` lists, per section, the paths of the code whose speed it measures (git
pathspecs). `stale` compares each page's commit with the last commit that touched those
paths: data measured before a change to the code it measures is stale.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from pathlib import Path
from typing import Any

from benchmarks.common import ROOT, git

__all__ = [
    "CITES",
    "MEASURED",
    "PAGES",
    "cite",
    "disagreements",
    "measures",
    "not_one_run",
    "stale",
    "write",
]

# page -> the sections of the run it shows
PAGES: dict[str, tuple[str, ...]] = {
    "results": ("memory", "docs", "footprint", "durable", "suite", "startup"),
    "concurrency": ("concurrency",),
    "postgres": ("postgres",),
    "observability": ("observability",),
}

# The engine and the stores it runs on in one process: everything under jfsm/ but the
# PostgreSQL store, the driver, the command line and the read-only tools, and the machine
# tables it loads.
_ENGINE = (
    "jfsm",
    ":(exclude)jfsm/stores/postgres",
    ":(exclude)jfsm/driver",
    ":(exclude)jfsm/cli.py",
    ":(exclude)jfsm/inspection.py",
    ":(exclude)jfsm/usage.py",
    ":(exclude)jfsm/guarantees.toml",
    "spec/machines",
)
_HARNESS = ("benchmarks/common.py", "benchmarks/data.py")

# section -> the code whose speed it measures (git pathspecs): its data is stale once any of
# them changed after the commit it was measured at
MEASURED: dict[str, tuple[str, ...]] = {
    "memory": (*_ENGINE, "benchmarks/memory.py", *_HARNESS),
    "footprint": (*_ENGINE, "benchmarks/footprint.py", *_HARNESS),
    "durable": (
        "jfsm/stores/file",
        "jfsm/stores/base.py",
        "jfsm/image.py",
        "jfsm/projection.py",
        "jfsm/records.py",
        "jfsm/jcs.py",
        "benchmarks/durable.py",
        *_HARNESS,
    ),
    "suite": ("jfsm", "conformance", "spec", "benchmarks/suite.py", *_HARNESS),
    "startup": ("jfsm", "benchmarks/startup.py", *_HARNESS),
    "docs": ("docs/hooks", "mkdocs.yml", "benchmarks/docs.py", *_HARNESS),
    "concurrency": (*_ENGINE, "jfsm/stores/postgres", "benchmarks/concurrency.py", *_HARNESS),
    "observability": (*_ENGINE, "benchmarks/observability.py", *_HARNESS),
    "postgres": (
        "jfsm/stores/postgres",
        "jfsm/stores/file",
        "jfsm/stores/base.py",
        "jfsm/image.py",
        "jfsm/projection.py",
        "jfsm/jcs.py",
        "benchmarks/postgres.py",
        "benchmarks/postgres_pool.py",
        "benchmarks/durable.py",
        *_HARNESS,
    ),
}

MAIN_JOB_WALL = "main job (jfsm conformance, quick profile): wall s"
MAIN_JOB_RSS = "main job (jfsm conformance, quick profile): peak RSS MiB, suite's process"
CITE_GAMES = 64
PG_COMMITS = f"store commits/s: PostgresStore.commit alone, {CITE_GAMES} games"
PG_ROUNDS = f"engine rounds/s: postgres, {CITE_GAMES} games"

# page -> the measures of other pages it shows (copied into its JSON under the same name)
CITES: dict[str, tuple[str, ...]] = {
    "results": (),
    "concurrency": (MAIN_JOB_WALL, MAIN_JOB_RSS, PG_COMMITS),
    "postgres": (PG_ROUNDS,),
    "observability": (),
}


def _put(out: dict[str, float], name: str, value: Any) -> None:
    if isinstance(value, (int, float)) and not isinstance(value, bool):
        out[name] = value


def _results_measures(data: dict[str, Any]) -> dict[str, float]:
    out: dict[str, float] = {}
    suite = data.get("suite") or {}
    main = (suite.get("quick_profile") or {}).get("after") or {}
    if main.get("run"):
        _put(out, MAIN_JOB_WALL, main.get("wall_s"))
        _put(out, MAIN_JOB_RSS, main.get("peak_rss_mib"))
    standard = (suite.get("standard_profile") or {}).get("after") or {}
    if standard.get("run"):
        _put(out, "standard profile: wall s", standard.get("wall_s"))
    goal = (data.get("footprint") or {}).get("goal") or {}
    _put(
        out,
        "footprint: record_round, largest over smallest footprint (worst stack)",
        goal.get("record_round_worst_ratio"),
    )
    _put(
        out,
        "footprint: before_generation, largest over smallest footprint (worst stack)",
        goal.get("before_generation_worst_ratio"),
    )
    throughput = (data.get("durable") or {}).get("throughput") or {}
    _put(
        out,
        "durable: FileStore commits/s, beside SQLite",
        throughput.get("filestore_commits_per_s"),
    )
    _put(out, "durable: SQLite commits/s, beside FileStore", throughput.get("sqlite_commits_per_s"))
    _put(
        out,
        "docs build: CPU s, real build median",
        ((data.get("docs") or {}).get("real") or {}).get("cpu_s_median"),
    )
    for case in (data.get("memory") or {}).get("cases") or []:
        _put(out, f"memory: peak RSS MiB, {case.get('case')}", case.get("peak_rss_mib"))
    return out


def _concurrency_measures(data: dict[str, Any]) -> dict[str, float]:
    out: dict[str, float] = {}
    for variant, rows in (data.get("variants") or {}).items():
        for row in rows:
            _put(out, f"engine rounds/s: {variant}, {row['games']} games", row.get("rounds_per_s"))
    job = data.get("main_job") or {}
    if job.get("run"):
        _put(out, MAIN_JOB_WALL, job.get("wall_s"))
        _put(out, MAIN_JOB_RSS, job.get("peak_rss_mib"))
    return out


def _postgres_measures(data: dict[str, Any]) -> dict[str, float]:
    out: dict[str, float] = {}
    if not data.get("available"):
        return out
    pool = data.get("pool") or {}
    for games, rate in ((pool.get("store_commits_per_s") or {}).get("postgres") or {}).items():
        _put(out, f"store commits/s: PostgresStore.commit alone, {games} games", rate)
    for row in pool.get("old_store") or []:
        _put(
            out,
            f"store commits/s: old store (a connection per game), {row['games']} games",
            row.get("commits_per_s"),
        )
    _put(
        out,
        "commit latency: PostgresStore over a bare INSERT; COMMIT",
        (pool.get("latency") or {}).get("ratio"),
    )
    for name, rate in ((data.get("commit") or {}).get("commits_per_s") or {}).items():
        _put(out, f"postgres page: {name} commits/s, beside the other two backends", rate)
    return out


def _observability_measures(data: dict[str, Any]) -> dict[str, float]:
    out: dict[str, float] = {}
    for variant, row in (data.get("variants") or {}).items():
        _put(out, f"OpenTelemetry: rounds/s, {variant}", row.get("rounds_per_s"))
    return out


_OWN: dict[str, Callable[[dict[str, Any]], dict[str, float]]] = {
    "results": _results_measures,
    "concurrency": _concurrency_measures,
    "postgres": _postgres_measures,
    "observability": _observability_measures,
}


def measures(page: str, data: dict[str, Any]) -> dict[str, float]:
    """The named headline numbers of a page's data (its own, then what it cites)."""
    return {**_OWN[page](data), **(data.get("cited") or {})}


def _page_data(page: str, results: dict[str, Any]) -> dict[str, Any]:
    if page == "results":
        return {"meta": results["meta"], **{s: results[s] for s in PAGES[page] if s in results}}
    (section,) = PAGES[page]
    return {"meta": results["meta"], **results[section]}


def cite(pages: dict[str, dict[str, Any]]) -> None:
    """Give each page's data its `cited` measures (`CITES`, from the other pages' own) and
    its `measures` (own and cited), in place."""
    own = {page: _OWN[page](data) for page, data in pages.items()}
    for page, data in pages.items():
        data["cited"] = {
            name: value
            for name in CITES[page]
            for other, values in own.items()
            if other != page and (value := values.get(name)) is not None
        }
        data["measures"] = measures(page, data)


def write(out: Path, results: dict[str, Any], log: Callable[[str], None]) -> list[str]:
    """Write `PAGE.json` and `PAGE.md` into `out` for every page whose sections ran, each
    with the run's meta, its measures and the measures it cites; returns the pages
    written. A cited measure another page of the run lacks is left out."""
    from benchmarks import concurrency, observability, postgres
    from benchmarks.report import render

    renderers: dict[str, Callable[[dict[str, Any]], str]] = {
        "results": render,
        "concurrency": concurrency.render,
        "postgres": postgres.render,
        "observability": lambda data: observability.render(data, data["meta"]),
    }
    pages = {
        page: _page_data(page, results)
        for page, sections in PAGES.items()
        if any(s in results and "error" not in results[s] for s in sections)
    }
    cite(pages)
    out.mkdir(parents=True, exist_ok=True)
    for page, data in pages.items():
        (out / f"{page}.json").write_text(
            json.dumps(data, indent=1, ensure_ascii=False) + "\n", encoding="utf-8"
        )
        (out / f"{page}.md").write_text(renderers[page](data), encoding="utf-8")
        log(f"wrote {out / page}.json and .md")
    return list(pages)


# -- the checks ----------------------------------------------------------------------------


def _load(folder: Path) -> dict[str, dict[str, Any]]:
    return {
        page: json.loads((folder / f"{page}.json").read_text(encoding="utf-8"))
        for page in PAGES
        if (folder / f"{page}.json").is_file()
    }


def not_one_run(folder: Path) -> list[str]:
    """What keeps the pages in `folder` from being one run's: a page missing, a page without
    the run's meta (from before R228), a quick run, or pages from different runs."""
    problems = [
        f"{page}.json is missing" for page in PAGES if not (folder / f"{page}.json").is_file()
    ]
    runs: dict[tuple[Any, Any], list[str]] = {}
    for page, data in _load(folder).items():
        meta = data.get("meta") or {}
        if not meta.get("commit_full"):
            problems.append(f"{page}.json names no run (no meta.commit_full: from before R228)")
            continue
        if meta.get("quick"):
            problems.append(f"{page}.json is from a quick run: its numbers mean nothing")
        runs.setdefault((meta.get("commit_full"), meta.get("started_utc")), []).append(page)
    if len(runs) > 1:
        problems.append(
            "the pages come from different runs: "
            + "; ".join(f"{', '.join(p)} from {c[:7]} at {t}" for (c, t), p in runs.items())
        )
    return problems


def disagreements(folder: Path) -> list[str]:
    """Every measure two pages of `folder` both hold with different values."""
    seen: dict[str, tuple[str, float]] = {}
    problems = []
    for page, data in _load(folder).items():
        for name, value in (data.get("measures") or {}).items():
            if name in seen and seen[name][1] != value:
                problems.append(f"{name!r}: {seen[name][1]} on {seen[name][0]}, {value} on {page}")
            seen.setdefault(name, (page, value))
    return problems


def stale(folder: Path, root: Path = ROOT) -> list[str]:
    """Each page of `folder` whose data is older than the code it measures: a path of
    `MEASURED` (for the page's sections) was changed by a commit the page's commit does not
    contain, or the run had local changes in those paths. A commit git does not know is
    reported too."""
    problems = []
    for page, data in _load(folder).items():
        meta = data.get("meta") or {}
        commit = meta.get("commit_full")
        if not commit:
            continue  # reported by not_one_run
        if meta.get("dirty"):
            problems.append(f"{page}: measured with local changes to the code it measures")
        if git("-C", str(root), "cat-file", "-e", f"{commit}^{{commit}}") is None:
            problems.append(f"{page}: commit {commit[:7]} is not in this repository's history")
            continue
        for section in PAGES[page]:
            paths = MEASURED[section]
            last = git("-C", str(root), "log", "-1", "--format=%H %s", "--", *paths)
            if not last:
                continue
            sha, subject = last.split(" ", 1)
            inside = git("-C", str(root), "merge-base", "--is-ancestor", sha, commit)
            if inside is None:  # exit 1: `sha` is not an ancestor of the page's commit
                problems.append(
                    f"{page}: section {section} measured at {commit[:7]}, but the code it "
                    f"measures changed after it ({sha[:7]} {subject[:60]})"
                )
    return problems
