"""The coverage table: which named checks and scenarios verify each requirement.

`coverage_rows()` is static (nothing runs): it joins the catalog with the named checks of
`jfsm_conformance.verify.checks.CHECKS` and the scenarios of
`jfsm_conformance.scenarios.SCENARIOS`. Every
requirement verifiable by the suite must be covered by at least one check; the others carry
the catalog's reason. `python -m jfsm_conformance.run.coverage` prints the table as Markdown.
"""

from __future__ import annotations

from typing import Any

from jfsm_conformance.run.runner import load_catalog
from jfsm_conformance.scenarios import SCENARIOS
from jfsm_conformance.verify.checks import CHECKS

__all__ = ["coverage_rows", "to_markdown", "uncovered_suite_requirements"]


def coverage_rows() -> list[dict[str, Any]]:
    """One row per catalog requirement: id, level, title, verification, checks, scenarios,
    covered (bool) and reason (the catalog's, for requirements the suite cannot observe)."""
    rows = []
    for req in load_catalog():
        rid = req["id"]
        checks = [
            {"name": c.name, "description": c.description} for c in CHECKS.values() if rid in c.ids
        ]
        scenarios = [s.name for s in SCENARIOS if rid in s.ids]
        suite = req.get("verification") == "suite"
        rows.append(
            {
                "id": rid,
                "level": req["level"],
                "title": req["title"],
                "verification": req.get("verification"),
                "checks": checks,
                "scenarios": scenarios,
                "covered": bool(checks) and suite,
                "reason": None if suite else req.get("reason"),
            }
        )
    return rows


def uncovered_suite_requirements() -> list[str]:
    """IDs the catalog says the suite verifies but no named check covers (should be empty)."""
    return [r["id"] for r in coverage_rows() if r["verification"] == "suite" and not r["checks"]]


def to_markdown(rows: list[dict[str, Any]] | None = None) -> str:
    rows = coverage_rows() if rows is None else rows
    lines = ["| ID | level | verified by | checks | scenarios |", "|---|---|---|---|---|"]
    for r in rows:
        checks = ", ".join(f"`{c['name']}`" for c in r["checks"]) or "—"
        detail = checks if r["verification"] == "suite" else f"{r['verification']}: {r['reason']}"
        scen = ", ".join(r["scenarios"]) or "—"
        lines.append(f"| {r['id']} | {r['level']} | {r['verification']} | {detail} | {scen} |")
    return "\n".join(lines) + "\n"


if __name__ == "__main__":
    print(to_markdown())
