"""Generators of the rendered spec site (run by `docs/hooks/generate.py` at build time).

Every module here is pure with respect to the site: it reads `spec/`, the test tree and the
public functions of `jfsm` and returns Markdown text. Nothing is written to `docs/`.
"""
