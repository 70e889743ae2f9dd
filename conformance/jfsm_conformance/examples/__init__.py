"""Deliberately broken drivers: the suite must fail each of them, naming the right requirements.

Each wraps the reference driver through the driver protocol only (`BrokenDriver.inner`) and
bends what an implementation would get wrong. `tests/suite/test_suite_bites.py` runs the
suite against every one of them.
"""
