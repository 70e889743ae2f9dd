"""Talking to a driver: the driver protocol v1 as data (`protocol`: the op registry and
schemas of `spec/driver/`) and the suite's side of it (`driver`: a driver spec parsed,
started and spoken to over stdio, HTTP or in process, with ids, timeouts and every reply
checked against its schema).

Nothing here judges a requirement beyond the protocol's own shape: the replies go to the
steps (`jfsm_conformance.steps`), which check them with the verifier.
"""
