"""The reference driver: the conformance driver protocol v1 over the reference engine.

Used in process (`python:jfsm.driver:reference_driver`; `durable_reference_driver`: file
stores in a temporary directory), over stdio (`jfsm driver [--state DIR]`, JSON lines,
`serve_stdio`) and over HTTP (`jfsm driver --http PORT`, `serve_http`). With a state
directory each game lives in a durable `FileStore` in its folder; with `store_url`
(`--store postgresql://...`) every game lives in that database; with `shared`
(`--state DIR --shared`) processes on one host share the state directory (sharedStore).

The modules: `dispatch` (the op table, `ReferenceDriver`), `wire` (framing and refusals),
`stdio` and `http` (serving), `hello` (hello's arguments), `state` (a state directory and
its side files), `pg` (games and side files in PostgreSQL), `shared_dir` (games in a state
directory several processes share), `shared` (the ownership ops), `crash` (crash injection
for the suite).
"""

from jfsm.driver.dispatch import (
    PROTOCOL_VERSION,
    ReferenceDriver,
    durable_reference_driver,
    reference_driver,
)
from jfsm.driver.http import serve_http
from jfsm.driver.stdio import serve_stdio

__all__ = [
    "PROTOCOL_VERSION",
    "ReferenceDriver",
    "durable_reference_driver",
    "reference_driver",
    "serve_http",
    "serve_stdio",
]
