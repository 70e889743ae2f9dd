"""Spec gaps an implementer reading only the site had to guess (issue 14), pinned where the
rendered spec itself shows the answer."""

from __future__ import annotations

import hashlib
import re
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]


@pytest.mark.req("JF-CALL-004")
def test_worked_idempotency_key_hashes_the_array_it_shows() -> None:
    """The compress.v2 page's worked key is the SHA-256 of the JCS array it prints, and that
    array ends with the `retry` element of the derivation (0 for a first ask)."""
    sys.path.insert(0, str(ROOT / "docs" / "hooks"))
    try:
        from jfdocs.ref_wire import idempotency_example
    finally:
        sys.path.remove(str(ROOT / "docs" / "hooks"))
    text = idempotency_example()
    match = re.search(r"JCS of the array: `(\[.*?\])`", text)
    key = re.search(r"key: `(jfsm-[0-9a-f]{64})`", text)
    assert match and key, text
    assert match.group(1).endswith(",0]")
    assert "jfsm-" + hashlib.sha256(match.group(1).encode("utf-8")).hexdigest() == key.group(1)
