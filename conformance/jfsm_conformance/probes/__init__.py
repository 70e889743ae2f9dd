"""Probes of hostile input and bounded waits, each built from the spec and judged on its own.

- `protocol`: hostile messages over the driver protocol (JF-ERR-006 to JF-ERR-010);
- `http`: hostile HTTP requests on raw sockets (JF-ERR-011, JF-ERR-012, JF-ERR-017);
- `state`: a hostile state directory (JF-ERR-016);
- `waits`: a hostile compress.v2 against a short attempt deadline (JF-CALL-006, -013, -014).

The steps send them through the world; the scenarios `hostile` and `waits` run them.
"""
