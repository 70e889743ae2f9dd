"""The process of a lane of a run (decision R170): `python -m jfsm_conformance.run.lane`.

The default run's machines are CPU work, which the threads of one Python process cannot
share out; the runner starts this process for them, sends it the run's options as JSON on
stdin and reads back progress lines and the lane's records (`runner.serve_lane`).
"""

from __future__ import annotations

import sys

from jfsm_conformance.run.runner import serve_lane

__all__: list[str] = []

if __name__ == "__main__":
    sys.exit(serve_lane())
