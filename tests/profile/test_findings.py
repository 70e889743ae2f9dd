"""Every findings page's reproduction script reproduces its defect against the pinned
release, in a throwaway environment (shared per release for the session)."""

from __future__ import annotations

import subprocess
from pathlib import Path

import pytest

from .release_venvs import ROOT, ReleaseVenvs

FINDINGS = ROOT / "docs" / "safety" / "findings"

# one venv for langmem 0.0.30 and langchain 1.5.2 (langmem runs on it): shared with
# test_matrix_cell.py, whose langmem cell asks for the same first pin
LANGMEM = ("langmem", "0.0.30", ("langchain==1.5.2",))
STRANDS = ("strands-agents", "1.62.0", ("strands-agents", "1.62.0", ()))
PYDANTIC_AI = ("pydantic-ai-slim", "2.68.0", ("pydantic-ai-slim", "2.68.0", ()))
MAF = ("agent-framework-core", "1.26.0", ("agent-framework-core", "1.26.0", ()))
# script -> (the distribution it targets, its pinned release, the venv that holds it)
SCRIPTS = {
    "langchain_empty_summary.py": ("langchain", "1.5.2", LANGMEM),
    "langchain_39261_placeholder.py": ("langchain", "1.5.2", LANGMEM),
    "langmem_empty_summary.py": ("langmem", "0.0.30", LANGMEM),
    "openai_agents_empty_summary.py": (
        "openai-agents",
        "0.24.0",
        ("openai-agents", "0.24.0", ()),
    ),
    "llamaindex_failing_summarizer.py": (
        "llama-index-core",
        "0.14.25",
        ("llama-index-core", "0.14.25", ()),
    ),
    "llamaindex_memory_failing_block.py": (
        "llama-index-core",
        "0.14.25",
        ("llama-index-core", "0.14.25", ()),
    ),
    "adk_empty_summary.py": ("google-adk", "2.13.0", ("google-adk", "2.13.0", ())),
    "langchain_trim_window_loss.py": ("langchain", "1.5.2", LANGMEM),
    "llamaindex_delete_then_set.py": (
        "llama-index-core",
        "0.14.25",
        ("llama-index-core", "0.14.25", ()),
    ),
    "semantic_kernel_empty_summary.py": (
        "semantic-kernel",
        "1.45.0",
        ("semantic-kernel", "1.45.0", ()),
    ),
    "strands_failed_summary_count.py": STRANDS,
    "strands_resummarize_summary.py": STRANDS,
    "agno_blank_summary.py": ("agno", "3.1.10", ("agno[sqlite]", "3.1.10", ())),
    "pydantic_ai_docs_processor_window.py": PYDANTIC_AI,
    "pydantic_ai_blank_summary.py": PYDANTIC_AI,
    "maf_concurrent_run_summary_lost.py": MAF,
    "maf_default_history_pitfall.py": MAF,
    "crewai_empty_summary.py": ("crewai", "1.15.30", ("crewai", "1.15.30", ())),
    # camel-ai imports FastMCP from mcp.server, which mcp 2 removed
    "camel_failed_summary_clears_memory.py": (
        "camel-ai",
        "0.2.90",
        ("camel-ai", "0.2.90", ("mcp<2",)),
    ),
}
_VERSION = "import sys, importlib.metadata as m; print(m.version(sys.argv[1]))"
# what a script's REPRODUCED line must count, where its page states a number
SAYS = {"pydantic_ai_blank_summary.py": "REPRODUCED: 10 of the 10 earlier messages are gone"}


def test_every_findings_page_has_a_tested_script() -> None:
    scripts = {p.name for p in FINDINGS.glob("*.py")}
    assert scripts == set(SCRIPTS)
    index = (FINDINGS / "index.md").read_text("utf-8")
    for name in scripts:
        assert f"]({name})" in index


@pytest.mark.slow
@pytest.mark.req(
    "JF-SAFE-002",
    "JF-SAFE-004",
    "JF-SAFE-005",
    "JF-SAFE-006",
    "JF-SAFE-010",
    "JF-SAFE-011",
    "JF-SAFE-013",
    "JF-SAFE-003",
    "JF-SAFE-007",
    "JF-SAFE-012",
)
@pytest.mark.parametrize("script", sorted(SCRIPTS))
def test_script_reproduces_against_the_pinned_release(
    script: str, release_venvs: ReleaseVenvs, tmp_path: Path
) -> None:
    dist, version, (package, pinned, also) = SCRIPTS[script]
    python = release_venvs.get(package, pinned, also)
    installed = subprocess.run(
        [str(python), "-c", _VERSION, dist], capture_output=True, text=True, timeout=60
    )
    assert installed.stdout.strip() == version, installed.stderr
    done = subprocess.run(
        [str(python), str(FINDINGS / script)],
        cwd=tmp_path,
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert done.returncode == 0, done.stdout[-2000:] + done.stderr[-2000:]
    assert "REPRODUCED:" in done.stdout
    assert SAYS.get(script, "REPRODUCED:") in done.stdout, done.stdout
