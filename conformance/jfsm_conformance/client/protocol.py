"""The driver protocol v1 as data: the op registry and schemas of `spec/driver/`.

The spec directory is found by `jfsm.spec` (the one spec reader; it imports nothing from the
engine), re-exported here as `spec_dir`.

`Protocol.check_reply(op, reply)` validates a reply envelope and, for a success, the op's
result schema; it raises `ProtocolViolation` with a message naming the op, the JSON path and
what was wrong. The suite calls it on every reply, so a driver that answers outside the
protocol is reported as such instead of failing some unrelated check later.
"""

from __future__ import annotations

import json
from functools import cache
from pathlib import Path
from typing import Any

from jsonschema import Draft202012Validator
from referencing import Registry, Resource

from jfsm.spec import spec_dir

__all__ = ["Protocol", "ProtocolViolation", "Reply", "protocol", "spec_dir"]


class ProtocolViolation(Exception):
    """A driver reply that breaks the driver protocol (envelope or result schema)."""


class Reply(dict[str, Any]):
    """A reply envelope (a dict) with helpers."""

    @property
    def ok(self) -> bool:
        return bool(self.get("ok"))

    @property
    def result(self) -> Any:
        return self.get("result")

    @property
    def code(self) -> str | None:
        return None if self.ok else self["error"].get("code")


class Protocol:
    """The op registry with compiled validators."""

    def __init__(self, root: Path) -> None:
        driver = root / "driver"
        self.registry_doc: dict[str, Any] = json.loads(
            (driver / "protocol.json").read_text("utf-8")
        )
        resources = []
        self._schemas: dict[str, Any] = {}
        for name in ("envelope.schema.json", "ops.schema.json"):
            schema = json.loads((driver / name).read_text("utf-8"))
            Draft202012Validator.check_schema(schema)
            self._schemas[name] = schema
            resources.append((schema["$id"], Resource.from_contents(schema)))
        self._registry = Registry().with_resources(resources)
        self.ops = {op["name"]: op for op in self.registry_doc["ops"]}
        self.error_codes = frozenset(self.registry_doc["error_codes"])
        self._validators: dict[str, Draft202012Validator] = {}

    def _validator(self, ref: str) -> Draft202012Validator:
        found = self._validators.get(ref)
        if found is None:
            file, _, pointer = ref.partition("#")
            base = self._schemas[file]["$id"]
            found = Draft202012Validator({"$ref": f"{base}#{pointer}"}, registry=self._registry)
            self._validators[ref] = found
        return found

    def _errors(self, ref: str, value: Any) -> list[str]:
        errors = sorted(self._validator(ref).iter_errors(value), key=lambda e: list(e.path))
        return [f"{e.json_path}: {e.message[:200]}" for e in errors[:5]]

    def check_request(self, message: dict[str, Any]) -> None:
        """Raise `ValueError` if the suite itself built a malformed request envelope."""
        problems = self._errors(self.registry_doc["envelope"]["request"], message)
        if problems:
            raise ValueError(f"the suite built a bad request: {problems}")

    def check_reply(self, op: str, reply: Any) -> None:
        """Validate a reply to `op`; raise `ProtocolViolation` naming the problem."""
        problems = self._errors(self.registry_doc["envelope"]["reply"], reply)
        if problems:
            raise ProtocolViolation(
                f"reply to {op!r} is not a protocol v1 reply envelope: {'; '.join(problems)}"
            )
        if reply["ok"] and op in self.ops:
            problems = self._errors(self.ops[op]["result"], reply["result"])
            if problems:
                raise ProtocolViolation(
                    f"result of {op!r} violates {self.ops[op]['result']}: {'; '.join(problems)}"
                )


@cache
def protocol() -> Protocol:
    """The protocol loaded from the spec directory (cached)."""
    return Protocol(spec_dir())
