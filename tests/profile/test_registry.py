"""The registered adapters are `AdapterSpec`s that `--adapter module:attr` takes unchanged,
and each built-in module is a template that runs from a copy; a wrong name is one line; the
library's warnings go into the report; a scope's `not_applicable` is honoured."""

from __future__ import annotations

import ast
import logging
import os
import shutil
import subprocess
import sys
import warnings
from pathlib import Path

import pytest

from jfsm_conformance.profile import (
    AdapterSpec,
    ObservedStorage,
    ProfileOptions,
    Scope,
    run_profile,
)
from jfsm_conformance.profile.adapters import ADAPTERS, resolve
from jfsm_conformance.profile.adapters.toy import BUGS, ToyMemory
from jfsm_conformance.profile.report import summary_lines, to_json, to_markdown

ADAPTERS_DIR = Path(__file__).resolve().parents[2] / "conformance/jfsm_conformance/profile/adapters"
JFSM = Path(sys.executable).with_name("jfsm")


def _env() -> dict[str, str]:
    env = dict(os.environ)
    env.pop("PYTHONPATH", None)
    return env


def _jfsm(*args: str, cwd: Path) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [str(JFSM), "profile", *args],
        cwd=cwd,
        env=_env(),
        capture_output=True,
        text=True,
        timeout=300,
    )


def _top_level_names(path: Path) -> set[str]:
    tree = ast.parse(path.read_text("utf-8"))
    return {
        target.id
        for node in tree.body
        if isinstance(node, ast.Assign)
        for target in node.targets
        if isinstance(target, ast.Name)
    }


def test_every_registered_name_is_a_module_attr_of_an_adapter_spec() -> None:
    """Each name stands for `module:attr` in the adapters package, `attr` is assigned at
    the module's top level, and `--list` prints that reference (read statically: most
    libraries are not installed here)."""
    for name, entry in ADAPTERS.items():
        module, _, attr = entry.ref.partition(":")
        path = ADAPTERS_DIR / f"{module}.py"
        assert path.is_file(), name
        assert attr in _top_level_names(path), (name, entry.ref)
        assert entry.qualified == f"jfsm_conformance.profile.adapters.{entry.ref}"
        assert bool(entry.extra) == bool(entry.package) == (name not in ("toy", "reference"))
    listed = subprocess.run(
        [str(JFSM), "profile", "--list"], capture_output=True, text=True, timeout=60
    ).stdout
    for name, entry in ADAPTERS.items():
        assert f"{name} " in listed and entry.qualified in listed


def test_built_in_modules_import_only_absolutely() -> None:
    """No relative import in an adapter module, so a copy of one runs outside the package."""
    relative = [
        f"{path.name}: from {'.' * node.level}{node.module or ''}"
        for path in sorted(ADAPTERS_DIR.glob("*.py"))
        if path.name != "__init__.py"
        for node in ast.walk(ast.parse(path.read_text("utf-8")))
        if isinstance(node, ast.ImportFrom) and node.level
    ]
    assert relative == []


def test_every_toy_bug_has_its_spec() -> None:
    for bug in filter(None, BUGS):
        factory, scope = resolve(f"toy:{bug}")
        memory = factory(None)  # type: ignore[arg-type]
        assert isinstance(memory, ToyMemory) and memory.bug == bug
        assert bug in scope.library


@pytest.mark.slow
def test_the_toy_runs_by_its_module_attr_and_from_a_copy(tmp_path: Path) -> None:
    """The model to copy works as-is: `jfsm_conformance.profile.adapters.toy:<name>`, and a
    verbatim copy of `toy.py` in the user's directory as `mytoy:<name>`."""
    done = _jfsm(
        *("--adapter", "jfsm_conformance.profile.adapters.toy:stale_snapshot"),
        *("--examples", "20", "--no-shrink", "--report-dir", "r"),
        cwd=tmp_path,
    )
    assert done.returncode == 1, done.stderr[-2000:]
    assert "JF-SAFE-009" in (tmp_path / "r" / "profile.md").read_text("utf-8")
    shutil.copyfile(ADAPTERS_DIR / "toy.py", tmp_path / "mytoy.py")
    good = _jfsm(
        "--adapter", "mytoy:adapter", "--examples", "10", "--report-dir", "g", cwd=tmp_path
    )
    assert good.returncode == 0, good.stderr[-2000:]
    bad = _jfsm(
        *("--adapter", "mytoy:reorder", "--examples", "15", "--no-shrink"),
        *("--report-dir", "b"),
        cwd=tmp_path,
    )
    assert bad.returncode == 1, bad.stderr[-2000:]
    assert "| JF-SAFE-008 | `order-kept` | fail |" in (tmp_path / "b" / "profile.md").read_text(
        "utf-8"
    )


def test_an_unknown_adapter_is_one_line(tmp_path: Path) -> None:
    done = _jfsm("--adapter", "llamaindex_adapter", cwd=tmp_path)
    assert done.returncode == 2
    lines = done.stderr.strip().splitlines()
    assert len(lines) == 1, done.stderr
    assert "'llamaindex_adapter'" in lines[0]
    assert "--list" in lines[0] and "module:attr" in lines[0]
    assert not (tmp_path / "profile-report").exists()


def test_a_missing_library_is_one_line_naming_the_extra(tmp_path: Path) -> None:
    name = "agno"
    try:
        import agno  # noqa: F401

        pytest.skip("agno is installed here: its adapter does not miss its library")
    except ImportError:
        pass
    done = _jfsm("--adapter", name, cwd=tmp_path)
    assert done.returncode == 2
    lines = done.stderr.strip().splitlines()
    assert len(lines) == 1, done.stderr
    assert ADAPTERS[name].extra in lines[0] and "not installed" in lines[0]


class NoisyMemory:
    """A correct memory whose library warns and logs on every compaction."""

    def __init__(self, summarizer: object) -> None:
        self.summarizer = summarizer
        self.entries: list[str] = []
        self.observed = ObservedStorage()

    async def append(self, user: str, assistant: str) -> None:
        self.entries += [user, assistant]

    async def compact(self) -> None:
        warnings.warn("the noisy library is deprecated", DeprecationWarning, stacklevel=1)
        logging.getLogger("noisy.lib").warning("compacting %d entries", 3)

    async def read(self) -> list[str]:
        return list(self.entries)

    def observed_states(self) -> list[list[str]]:
        return self.observed.take()

    def fail_next_write(self, armed: bool = True) -> None:
        self.observed.arm(armed)

    async def close(self) -> None:
        return None


NOISY = Scope(library="noisy", version="1", entry_point="NoisyMemory.compact")


def test_library_warnings_go_into_the_report(capsys: pytest.CaptureFixture[str]) -> None:
    printing = logging.getLogger("noisy.printing")
    own = logging.StreamHandler(sys.stderr)
    printing.addHandler(own)
    root_before = list(logging.getLogger().handlers)
    spec = AdapterSpec(factory=NoisyMemory, scope=NOISY)

    async def also_print(self: NoisyMemory) -> None:
        await NoisyMemory.compact(self)
        printing.error("a logger with a handler of its own")

    try:
        result = run_profile(
            ProfileOptions(adapter="noisy", examples=5, progress=lambda _: None),
            spec=AdapterSpec(
                factory=lambda s: type("M", (NoisyMemory,), {"compact": also_print})(s),
                scope=spec.scope,
            ),
        )
        assert printing.handlers == [own]  # put back after the run
    finally:
        printing.handlers.clear()
    assert logging.getLogger().handlers == root_before
    out = capsys.readouterr()
    assert "deprecated" not in out.err + out.out
    assert "compacting" not in out.err + out.out and "of its own" not in out.err + out.out
    said = result.recorder.warnings
    groups = {label.split(" at ")[0]: label for label in said.groups}  # by category, source
    assert said.groups[groups["DeprecationWarning"]] > 0
    assert said.samples[groups["DeprecationWarning"]] == "the noisy library is deprecated"
    assert said.groups[groups["WARNING noisy.lib"]] > 0
    assert said.samples[groups["WARNING noisy.lib"]] == "compacting 3 entries"
    assert said.groups[groups["ERROR noisy.printing"]] > 0
    assert all("test_registry.py:" in label for label in said.groups)
    assert {k: v["count"] for k, v in to_json(result)["library_warnings"].items()} == dict(
        said.groups
    )
    assert "## The library's warnings and log records" in to_markdown(result)
    assert any("library warnings" in line for line in summary_lines(result))


def test_not_applicable_properties_are_never_searched() -> None:
    """A scope's `not_applicable` makes those properties n/a with its reason and takes them
    out of the search, even where a bug would fail them (the toy's reorder bug fails
    JF-SAFE-008 and nothing else)."""
    reason = "no summarizer: nothing is ever replaced"
    scope = Scope(
        library="toy",
        version="0",
        entry_point="ToyMemory.compact",
        not_applicable={"JF-SAFE-008": reason},
    )
    factory, _ = resolve("toy:reorder")
    result = run_profile(
        ProfileOptions(adapter="toy:reorder", examples=15, progress=lambda _: None),
        factory=factory,
        scope=scope,
    )
    row = next(v for v in result.verdicts if v["id"] == "JF-SAFE-008")
    assert (row["verdict"], row["reason"], row["example"]) == ("not applicable", reason, None)
    assert result.exit_code == 0  # the bug's property was not searched, so nothing failed
    assert to_json(result)["scope"]["not_applicable"] == {"JF-SAFE-008": reason}
