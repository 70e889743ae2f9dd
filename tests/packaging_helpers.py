"""Helpers the packaging tests share: the lock's versions as a constraints file."""

from __future__ import annotations

import tomllib
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent


def locked_export_command(out: Path) -> list[str]:
    """`uv export` of the lock's versions for the engine and its non-profile extras into `out`.

    The `profile-*` extras stay out: two of them conflict (R110), so uv refuses
    `--all-extras`, and no install in these tests uses them.
    """
    project = tomllib.loads((ROOT / "pyproject.toml").read_text(encoding="utf-8"))["project"]
    extras = [
        flag
        for name in project["optional-dependencies"]
        if not name.startswith("profile-")
        for flag in ("--extra", name)
    ]
    return [
        "uv", "export", "--frozen", "--no-dev", *extras, "--no-hashes", "--no-emit-project",
        "--project", str(ROOT), "-o", str(out),
    ]  # fmt: skip
