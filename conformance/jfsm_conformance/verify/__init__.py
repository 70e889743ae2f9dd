"""Checking and blame: what was observed, against what was expected, as named checks.

- `checks`: the named checks, each tagged with the requirement IDs it verifies, and the
  run's `Ledger`;
- `verifier`: the `Verifier`, one part a kind of observation (`replies`, `store`,
  `requests`, `telemetry`) over one ledger;
- `blame`: which requirement a difference breaks, and the order findings are reported in;
- `ownership`: the history checker of the workers machine (one owner a game, no
  acknowledged write lost);
- `excerpts`: short excerpts of observed text for failure messages.

The checking code never acts: nothing here imports the world, the fake or the driver
client (`tests/packaging/test_architecture.py` holds it to that).
"""
