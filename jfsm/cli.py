"""The `jfsm` command line."""

from __future__ import annotations

import argparse
import sys

__all__ = ["main"]


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="jfsm", description=__doc__)
    sub = parser.add_subparsers(dest="command", required=True)
    sub.add_parser("conformance", help="run the conformance suite (not yet implemented)")
    return parser


def main(argv: list[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    if args.command == "conformance":
        print("jfsm conformance: not yet implemented", file=sys.stderr)
        return 2
    return 2


if __name__ == "__main__":
    sys.exit(main())
