"""jfsm benchmarks (issue 8): `uv run python -m benchmarks.run [--quick] [--out DIR]`.

Sections: `footprint` (O(change) record_round and before_generation against a naive
re-serializing preflight), `durable` (FileStore against SQLite WAL, and reopen), `suite`
(conformance throughput) and `memory` (peak RSS of an engine holding a large store).
"""
