"""A randomized nemesis, kept in the tests (issue 38, decisions R187-R190): faults drawn from
a seed at random times and for random durations, several at once, against workers of one
shared store (PostgreSQL, a Patroni cluster, a shared state directory), and a checker over
the whole history of what their clients were told, as Jepsen does.

One concept a module: `schedule` (the faults, drawn from a seed), `history` (what happened,
as invoke / ok / fail / info events), `workers` (worker processes on the driver protocol),
`embedded` (the embedded engine's worker process), `clients` (what callers do, recorded),
`bystanders` (processes beside the store that it must not harm), `systems` (each backend),
`faults` (the nemesis playing a schedule), `checker` (the verdict), `runner` (one run, and
nothing left running), `__main__` (the command: `uv run python -m tests.nemesis --help`).
"""
