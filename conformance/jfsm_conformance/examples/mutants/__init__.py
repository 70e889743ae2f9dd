"""Mutants of the reference engine, for `tests/suite/test_mutants.py`.

Each factory below is a `python:` driver whose engine differs from the reference in ONE
plausible way; the suite must fail every one of them with a fitting requirement ID:

```
jfsm conformance --driver python:jfsm_conformance.examples.mutants:threshold_inclusive
```

A mutant breaks one policy through a seam the reference offers (decision R32), never by
copying engine code, so it cannot drift from the engine it mutates:

- a `StackCompression` subclass (its guards `due` / `has_chunks`, `prefix`, `call`,
  `judge`, the `on_plan_publication` handler, `events`), a `ForcedCompression` or `Scene`
  subclass (`before_generation`; `outcome_exchange`, an effect handler), or another
  rebuild planner, installed as a class attribute of a `GameEngine` subclass;
- a `Store` wrapper handed to the engine (the quota and duplication policies);
- a compressor subclass handed to the driver (what goes on the wire);
- a protocol-level wrapper that rewrites messages or replies.

The reference modules are never patched.
"""

from jfsm_conformance.examples.mutants.compression import *  # noqa: F403
from jfsm_conformance.examples.mutants.memory import *  # noqa: F403
from jfsm_conformance.examples.mutants.protocol import *  # noqa: F403
from jfsm_conformance.examples.mutants.seams import MUTANTS

__all__ = ["MUTANTS", *MUTANTS]
