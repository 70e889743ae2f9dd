"""jfsm benchmarks: `uv run python -m benchmarks.run [--quick] [--out DIR]`.

One run measures every section and writes every page of `docs/benchmarks/` (R228):
`results` (footprint: O(change) record_round and before_generation against a naive
re-serializing preflight; durable: FileStore against SQLite WAL, and reopen; suite:
conformance throughput and profiles; memory: peak RSS of an engine holding a large store;
startup; docs: the site's build), `concurrency` (one worker, many games) and `postgres`
(the PostgreSQL store). `benchmarks.pages` writes them and checks they are still fresh.
"""
