"""A run of the suite and what reads it.

- `model`: what a run is told and returns (profiles, options, failures, the catalog);
- `runner`: one run, phase by phase (scenarios, machines, workers), into one ledger and one
  verdict a requirement;
- `companions`: the reference engine's own processes in the default run;
- `report`, `coverage`: the JSON, Markdown, JUnit and terminal reports, the coverage table;
- `smoke`: a handshake and one op of each kind;
- `cli`: `jfsm conformance`.

What the parts below record (exercise counts, transcripts, traces) lives in `record/`, and
the one-line usage errors in `usage`: nothing below the runner imports it (decision R222).
"""
