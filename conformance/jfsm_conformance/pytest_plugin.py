"""A pytest plugin: run the conformance suite inside pytest, one test per requirement.

Installing jfsm registers it (the `pytest11` entry point `jfsm-conformance`); point it at an
implementation:

```
pytest --jfsm-driver "stdio:node dist/driver.js" \\
       --jfsm-profile quick --jfsm-select JF-COMP --jfsm-report-dir conformance-report
```

Without `--jfsm-driver` the plugin adds nothing. With it, pytest collects one item per
requirement of the catalog; its node ID is the catalog's path and the requirement ID
(`.../jfsm/_spec/requirements.toml::JF-COMP-003`), so a node ID pytest printed selects that
requirement again (`pytest --jfsm-driver D PATH::JF-COMP-003`), and `-k JF-COMP-003` works
too. The suite runs once, at the first item, for the requirements selected (by node ID,
`-k` or `--jfsm-select`); each item then passes, fails with the suite's message (check, trace path,
replay command), is xfailed (`--jfsm-expected-failures`), or is skipped with the reason the
requirement is not covered. A harness error (driver dead or mute) fails every item.
While the suite runs, its progress lines (counts and an estimate in long phases) go to the
terminal. Without the suite's extra (`jfsm[conformance]`: Hypothesis) a `--jfsm-driver` run
stops with a usage error saying what to install.

`--jfsm-safety-adapter NAME|module:attr` runs the compaction safety profile instead (or as
well): one item per SAFE property (see `jfsm_conformance.profile.pytest_items`).
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

__all__ = [
    "pytest_addoption",
    "pytest_collect_file",
    "pytest_collection_modifyitems",
    "pytest_sessionstart",
]


def pytest_addoption(parser: pytest.Parser) -> None:
    group = parser.getgroup("jfsm", "jfsm conformance suite")
    group.addoption(
        "--jfsm-driver",
        default=None,
        help="run the jfsm conformance suite against this driver "
        "(python:MODULE:FACTORY, stdio:COMMAND or http:URL)",
    )
    group.addoption("--jfsm-profile", default="quick", choices=["quick", "standard", "thorough"])
    group.addoption("--jfsm-select", default="", help="requirement ID prefix")
    group.addoption("--jfsm-expected-failures", default=None, help="JSON or TOML {id, reason} file")
    group.addoption("--jfsm-report-dir", default="conformance-report")
    from jfsm_conformance.profile.pytest_items import add_options

    add_options(group)


class _SuiteRun:
    """Runs the suite once per session, lazily."""

    def __init__(self, config: pytest.Config) -> None:
        self.config = config
        self.result: Any = None

    def get(self) -> Any:
        if self.result is None:
            import importlib.util

            missing = [m for m in ("hypothesis", "jsonschema") if not importlib.util.find_spec(m)]
            if missing:
                from jfsm_conformance.usage import install_hint

                raise pytest.UsageError(
                    f"--jfsm-driver needs {install_hint('conformance')} "
                    f"(missing: {', '.join(missing)})"
                )
            from jfsm_conformance.run.cli import load_expected_failures
            from jfsm_conformance.run.report import write_report
            from jfsm_conformance.run.runner import Options, run

            opt = self.config.getoption
            expected = (
                load_expected_failures(opt("--jfsm-expected-failures"))
                if opt("--jfsm-expected-failures")
                else {}
            )
            options = Options(
                driver=opt("--jfsm-driver"),
                profile=opt("--jfsm-profile"),
                select=self.select(),
                expected_failures=expected,
                report_dir=Path(opt("--jfsm-report-dir")),
                progress=self.progress,
            )
            self.result = run(options)
            write_report(self.result, options.report_dir)
        return self.result

    def select(self) -> str:
        """`--jfsm-select`, narrowed to the requirement items pytest kept (node IDs, `-k`)
        when they are fewer than the catalog's selected requirements."""
        from jfsm_conformance.run.runner import load_catalog

        prefix = self.config.getoption("--jfsm-select")
        kept = [i.requirement["id"] for i in self.items if isinstance(i, RequirementItem)]
        everything = [r["id"] for r in load_catalog() if r["id"].startswith(prefix)]
        if kept and len(set(kept)) < len(everything):
            return ",".join(dict.fromkeys(kept))
        return prefix

    @property
    def items(self) -> list[pytest.Item]:
        session = getattr(self.config, "_jfsm_session", None)
        return list(getattr(session, "items", []) or [])

    def progress(self, line: str) -> None:
        reporter = self.config.pluginmanager.get_plugin("terminalreporter")
        if reporter is not None:
            reporter.write_line(f"jfsm: {line}")


class RequirementItem(pytest.Item):
    def __init__(self, *, requirement: dict[str, Any], suite: _SuiteRun, **kwargs: Any) -> None:
        super().__init__(**kwargs)
        self.requirement = requirement
        self.suite = suite

    def runtest(self) -> None:
        from jfsm_conformance.run.report import replay_command

        result = self.suite.get()
        if result.harness_error:
            raise RequirementFailure(f"harness error: {result.harness_error}")
        verdict = next((v for v in result.verdicts if v["id"] == self.requirement["id"]), None)
        if verdict is None:
            pytest.skip("not selected")
        if verdict["verdict"] == "fail":
            lines = []
            for f in verdict["failures"]:
                lines.append(f"{f['source']} / {f['check']}:\n{f['message']}")
                if f.get("trace"):
                    lines.append(f"replay: {replay_command(f['trace'])}")
            raise RequirementFailure("\n\n".join(lines))
        if verdict["verdict"] == "xfail":
            pytest.xfail(verdict.get("reason") or "expected failure")
        if verdict["verdict"] == "not covered":
            pytest.skip(verdict.get("reason") or "not covered")

    def repr_failure(self, excinfo: Any, style: Any = None) -> str:
        if isinstance(excinfo.value, RequirementFailure):
            return f"{self.requirement['id']} {self.requirement['title']}\n{excinfo.value}"
        return str(super().repr_failure(excinfo))

    def reportinfo(self) -> tuple[Path, int, str]:
        return self.path, 0, f"{self.requirement['id']}: {self.requirement['title']}"


class RequirementFailure(Exception):
    """A requirement failed in the conformance run."""


class CatalogFile(pytest.File):
    def collect(self) -> Any:
        from jfsm_conformance.run.runner import load_catalog

        suite = _SuiteRun(self.config)
        prefix = self.config.getoption("--jfsm-select")
        for req in load_catalog():
            if req["id"].startswith(prefix):
                yield RequirementItem.from_parent(
                    self, name=req["id"], requirement=req, suite=suite
                )


def _is_catalog(file_path: Path) -> bool:
    from jfsm_conformance.client.protocol import spec_dir

    try:
        return file_path.name == "requirements.toml" and file_path.samefile(
            spec_dir() / "requirements.toml"
        )
    except OSError:
        return False


def pytest_collect_file(file_path: Path, parent: pytest.Collector) -> Any:
    """The catalog, named on the command line (`PATH::JF-CAT-001`), is collected as the
    requirement items; nothing else is, and nothing without `--jfsm-driver`."""
    if parent.config.getoption("--jfsm-driver") and _is_catalog(file_path):
        return CatalogFile.from_parent(parent, path=file_path)
    return None


def pytest_sessionstart(session: pytest.Session) -> None:
    session.config._jfsm_session = session  # type: ignore[attr-defined]


def pytest_collection_modifyitems(
    session: pytest.Session, config: pytest.Config, items: list[pytest.Item]
) -> None:
    if config.getoption("--jfsm-safety-adapter", None):
        from jfsm_conformance.profile.pytest_items import collect

        items.extend(collect(session, config))
    if not config.getoption("--jfsm-driver"):
        return
    from jfsm_conformance.client.protocol import spec_dir
    from jfsm_conformance.run.runner import select_error

    problem = select_error(config.getoption("--jfsm-select"))
    if problem:
        raise pytest.UsageError(problem.replace("--select", "--jfsm-select", 1))
    if any(isinstance(item, RequirementItem) for item in items):
        return  # the catalog was named on the command line and collected already
    catalog = CatalogFile.from_parent(session, path=spec_dir() / "requirements.toml")
    items.extend(catalog.collect())
