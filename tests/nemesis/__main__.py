"""`uv run python -m tests.nemesis --backend BACKEND [--seed N] [--seconds S] [--schedule FILE]`:
one nemesis run (`nemesis.runner`), its verdict printed.

Without `--seed` the seed is `JFSM_NEMESIS_SEED`, else drawn at random; it is printed
first either way. With `--schedule` the faults are that file's (a failing run's
`schedule.json`), played exactly. Writes `OUT/BACKEND-SEED/` (schedule, history, report;
`--out` defaults to the temporary directory's `jfsm-nemesis`).
Exit 0 when every check passed, 1 when one failed (the seed, the schedule's path, the
findings and the replay command printed), 2 for a usage error or a system that cannot start
here (one line). Ctrl-C and SIGTERM end the run and everything it started.
"""

from __future__ import annotations

import json
import os
import random
import signal
import sys
import tempfile
from pathlib import Path
from types import FrameType

from jfsm.usage import UsageParser, usage_error

from .runner import Options, run
from .schedule import BACKENDS


def build_parser() -> UsageParser:
    parser = UsageParser(prog="python -m tests.nemesis", description=__doc__)
    parser.add_argument("--backend", choices=BACKENDS, required=True)
    parser.add_argument("--seed", type=int, default=None)
    parser.add_argument("--seconds", type=float, default=60.0)
    parser.add_argument("--schedule", type=Path, default=None, help="replay this schedule file")
    parser.add_argument(
        "--out",
        type=Path,
        default=Path(tempfile.gettempdir()) / "jfsm-nemesis",
        help="(default: %(default)s)",
    )
    parser.add_argument("--workers", type=int, default=4)
    parser.add_argument("--games", type=int, default=6)
    parser.add_argument("--lease", type=float, default=2.0)
    parser.add_argument("--ttl", type=int, default=10)
    parser.add_argument(
        "--record",
        action="store_true",
        help="keep this run as its backend's entry of tests/nemesis/long-runs.json and "
        "rewrite the Deploying page's table from it",
    )
    return parser


def _terminate(signum: int, frame: FrameType | None) -> None:
    raise KeyboardInterrupt


def main(argv: list[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    seed = args.seed
    if seed is None:
        seed = int(os.environ.get("JFSM_NEMESIS_SEED") or random.randrange(1 << 31))
    if args.schedule is not None and not args.schedule.is_file():
        return usage_error("nemesis", f"no schedule file {args.schedule}")
    print(f"nemesis: backend {args.backend}, seed {seed}", flush=True)
    signal.signal(signal.SIGTERM, _terminate)
    options = Options(
        args.backend,
        seed,
        seconds=args.seconds,
        workers=args.workers,
        games=args.games,
        lease=args.lease,
        ttl=args.ttl,
        out=args.out,
        schedule=args.schedule,
    )
    try:
        report = run(options)
    except RuntimeError as exc:  # the system cannot start here (its reason first)
        return usage_error("nemesis", str(exc) or "could not run")
    except KeyboardInterrupt:
        print("nemesis: interrupted; everything it started is stopped", file=sys.stderr)
        return 130
    print(json.dumps(report["counts"], sort_keys=True))
    if args.record:
        from .table import record, write_table

        record(report)
        write_table()
    if report["passed"] and report["leaked"] == 0:
        print(f"nemesis: passed ({args.backend}, seed {seed})")
        return 0
    print(f"nemesis: FAILED ({args.backend}, seed {seed}): {', '.join(report['failed'])}")
    for name, items in report["findings"].items():
        for item in items[:5]:
            print(f"  {name}: {item}")
    print(f"  schedule: {report['schedule']}")
    print(f"  replay: {report['replay']}")
    return 1


if __name__ == "__main__":
    sys.exit(main())
