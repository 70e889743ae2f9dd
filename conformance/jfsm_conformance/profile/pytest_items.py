"""The safety profile inside pytest: one item per SAFE property for `--jfsm-safety-adapter`.

```
pytest --jfsm-safety-adapter mypkg.mem:adapter [--jfsm-safety-examples 30]
       [--jfsm-safety-report-dir profile-report]
```

The adapter is a registered name or a user's `module:attr` (an `AdapterSpec`), as for
`jfsm profile --adapter`. The profile runs once, at the first item; each item then passes,
fails with the property's minimal example, or is skipped (by design, with the library's
reason; not applicable, with the scope's). Two more items judge the search itself:
JF-SAFE-020 (the summarizer was reached) and JF-SAFE-021 (what applies was exercised). A
harness error (unknown adapter, missing library, hang) fails every item with its message.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

__all__ = ["add_options", "collect"]


def add_options(group: Any) -> None:
    """Add the profile's options to the plugin's `jfsm` option group."""
    group.addoption(
        "--jfsm-safety-adapter",
        default=None,
        help="run the compaction safety profile against this adapter (NAME or module:attr)",
    )
    group.addoption("--jfsm-safety-examples", type=int, default=30)
    group.addoption("--jfsm-safety-steps", type=int, default=16)
    group.addoption("--jfsm-safety-report-dir", default="profile-report")


class _ProfileRun:
    """Runs the profile once per session, lazily."""

    def __init__(self, config: pytest.Config) -> None:
        self.config = config
        self.result: Any = None

    def get(self) -> Any:
        if self.result is None:
            from .report import write_report
            from .runner import ProfileOptions, run_profile

            opt = self.config.getoption
            self.result = run_profile(
                ProfileOptions(
                    adapter=opt("--jfsm-safety-adapter"),
                    examples=opt("--jfsm-safety-examples"),
                    steps=opt("--jfsm-safety-steps"),
                    progress=self.progress,
                )
            )
            if self.result.scope is not None:
                write_report(self.result, Path(opt("--jfsm-safety-report-dir")))
        return self.result

    def progress(self, line: str) -> None:
        reporter = self.config.pluginmanager.get_plugin("terminalreporter")
        if reporter is not None:
            reporter.write_line(f"jfsm profile: {line}")


class PropertyFailure(Exception):
    """A safety property failed."""


class PropertyItem(pytest.Item):
    def __init__(self, *, prop: Any, run: _ProfileRun, **kwargs: Any) -> None:
        super().__init__(**kwargs)
        self.prop = prop
        self.run = run

    def runtest(self) -> None:
        result = self.run.get()
        if result.harness_error:
            raise PropertyFailure(f"harness error: {result.harness_error}")
        row = next(v for v in result.verdicts if v["id"] == self.prop.id)
        if row["verdict"] == "fail":
            steps = "\n".join(f"  {s}" for s in row.get("example") or [])
            raise PropertyFailure(f"{row['message']}\nminimal example:\n{steps}")
        if row["verdict"] in ("by design", "not applicable", "not exercised"):
            pytest.skip(f"{row['verdict']}: {row['reason']}")
        if row["verdict"] == "error":
            raise PropertyFailure(row["reason"])

    def repr_failure(self, excinfo: Any, style: Any = None) -> str:
        if isinstance(excinfo.value, PropertyFailure):
            return f"{self.prop.id} {self.prop.title}\n{excinfo.value}"
        return str(super().repr_failure(excinfo))

    def reportinfo(self) -> tuple[Path, int, str]:
        return self.path, 0, f"{self.prop.id}: {self.prop.title}"


class ReachItem(pytest.Item):
    """One check of the search itself (JF-SAFE-020, -021): fails when it failed in either
    search, is skipped when neither judged it (decision R200)."""

    def __init__(self, *, rid: str, run: _ProfileRun, **kwargs: Any) -> None:
        super().__init__(**kwargs)
        self.rid = rid
        self.run = run

    def runtest(self) -> None:
        result = self.run.get()
        if result.harness_error:
            raise PropertyFailure(f"harness error: {result.harness_error}")
        searches = [result] + ([result.several] if result.several is not None else [])
        rows = [row for s in searches for row in s.reach if row["id"] == self.rid]
        failed = [row["message"] for row in rows if row["verdict"] == "fail"]
        if failed:
            raise PropertyFailure("\n".join(failed))
        if not any(row["verdict"] == "pass" for row in rows):
            pytest.skip("; ".join(f"{row['verdict']}: {row['message']}" for row in rows))

    def repr_failure(self, excinfo: Any, style: Any = None) -> str:
        if isinstance(excinfo.value, PropertyFailure):
            return f"{self.rid}\n{excinfo.value}"
        return str(super().repr_failure(excinfo))

    def reportinfo(self) -> tuple[Path, int, str]:
        return self.path, 0, self.rid


class PropertiesFile(pytest.File):
    def collect(self) -> Any:
        from .properties import PROPERTIES
        from .reach import REACH_IDS

        run = _ProfileRun(self.config)
        for prop in PROPERTIES:
            yield PropertyItem.from_parent(self, name=prop.id, prop=prop, run=run)
        for rid in REACH_IDS:
            yield ReachItem.from_parent(self, name=rid, rid=rid, run=run)


def collect(session: pytest.Session, config: pytest.Config) -> list[pytest.Item]:
    """The profile's items when `--jfsm-safety-adapter` is given, else none."""
    if not config.getoption("--jfsm-safety-adapter"):
        return []
    import importlib.util

    if importlib.util.find_spec("hypothesis") is None:
        from jfsm_conformance.usage import install_hint

        raise pytest.UsageError(
            f"--jfsm-safety-adapter needs {install_hint('conformance')} (missing: hypothesis)"
        )
    path = Path(__file__).with_name("properties.py")
    return list(PropertiesFile.from_parent(session, path=path).collect())
