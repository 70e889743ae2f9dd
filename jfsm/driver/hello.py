"""The arguments of the driver protocol's `hello`, checked: the compress.v2 base URL, the
threshold override, the shorter compress.v2 attempt deadline the suite may ask for
(`compressDeadlineSeconds`, capability `deadlineOverride`, decision R79) and the lease
length it may ask a shared store's process for (`leaseSeconds`, decision R122)."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from jfsm.errors import InvalidInput
from jfsm.spec import load_json

__all__ = ["LEASE_MAX", "HelloArgs", "parse_hello"]


@dataclass(frozen=True)
class HelloArgs:
    url: str
    thresholds: dict[str, int] | None
    # keyword arguments for the compressor factory: {"timeout": seconds} when asked
    compressor: dict[str, Any] = field(default_factory=dict)
    lease: float | None = None  # leaseSeconds: the lease length asked for, if any


#: the longest lease hello may ask for (`spec/driver/ops.schema.json`, hello_args)
LEASE_MAX = 3600.0


def _deadline_max() -> float:
    bounds = load_json("compress-v2.json")["bounds"]
    return float(bounds["attempt_deadline_seconds_max"]["value"])


def parse_hello(args: Mapping[str, Any], protocol: int) -> HelloArgs:
    """`hello`'s arguments; `InvalidInput` naming the first one that is wrong."""
    if args.get("protocol") != protocol:
        raise InvalidInput(f"protocol {args.get('protocol')!r} unsupported; speaks {protocol}")
    if "compressUrl" not in args:
        raise InvalidInput("missing argument 'compressUrl'", field="compressUrl")
    url = args["compressUrl"]
    if not isinstance(url, str):
        raise InvalidInput("compressUrl must be a string", field="compressUrl")
    thresholds = args.get("thresholds")
    if thresholds is not None and not (
        isinstance(thresholds, Mapping)
        and set(thresholds) <= {"game", "catalyst"}
        and all(
            isinstance(v, int) and not isinstance(v, bool) and v > 0 for v in thresholds.values()
        )
    ):
        raise InvalidInput("thresholds must be {game?, catalyst?} positive integers")
    deadline = args.get("compressDeadlineSeconds")
    if deadline is not None and not (
        isinstance(deadline, (int, float))
        and not isinstance(deadline, bool)
        and 0 < deadline <= _deadline_max()
    ):
        raise InvalidInput(
            f"compressDeadlineSeconds must be a number above 0 and at most {_deadline_max()}",
            field="compressDeadlineSeconds",
        )
    lease = args.get("leaseSeconds")
    if lease is not None and not (
        isinstance(lease, (int, float)) and not isinstance(lease, bool) and 0 < lease <= LEASE_MAX
    ):
        raise InvalidInput(
            f"leaseSeconds must be a number above 0 and at most {LEASE_MAX:g}",
            field="leaseSeconds",
        )
    return HelloArgs(
        url,
        None if thresholds is None else dict(thresholds),
        {} if deadline is None else {"timeout": float(deadline)},
        None if lease is None else float(lease),
    )
