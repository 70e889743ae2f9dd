"""Deterministic scenarios: fixed step sequences that pin each requirement at least once.

The Hypothesis machines (`jfsm_conformance.machines.memory`) explore interleavings at random; these
scenarios make sure every requirement the suite can observe is exercised in every run, at the
spec thresholds, whatever the random draw. Each scenario names the requirement IDs it targets
(for `--select` and the coverage table) and only calls `Session` steps, so a failing scenario
has a replayable trace like any other failure.

The scenarios are grouped by area in the modules of this package; importing it registers
them all in `SCENARIOS`, in run order.
"""

from __future__ import annotations

from jfsm_conformance.scenarios import (
    compression,
    durability,
    guesses,
    history,
    hostile,
    store,
    waits,
)
from jfsm_conformance.scenarios.registry import SCENARIOS, Scenario

__all__ = ["SCENARIOS", "Scenario"]

# the areas in the order their scenarios run (each module's scenarios in their own order)
AREAS = [
    module.__name__ for module in (compression, history, guesses, store, durability, hostile, waits)
]
SCENARIOS.sort(key=lambda scenario: AREAS.index(scenario.run.__module__))
