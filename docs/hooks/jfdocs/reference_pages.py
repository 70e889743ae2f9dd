"""Generated parts of the hand-written reference pages (pure).

The prose of the reference pages lives in Markdown under `docs/reference/` (store layout,
canonical text, compress.v2, driver protocol, error codes). Each generated part is a marker
line `<!-- jfsm:NAME -->` there, replaced at build time by `FRAGMENTS[NAME]()`; a value inside
a sentence is an inline marker, replaced by `VALUES[NAME]()`. Everything is read from
`spec/` through `jfsm.spec` and from the public definitions of `jfsm`. Each renderer knows the
documented shape of its file and falls back to a plain JSON rendering for anything it does
not know, so a new member in a spec file shows up on the site instead of being dropped.
Inconsistencies between the spec and the reference engine are shown as a red box on the page
(and fail the docs tests), never silently dropped.
"""

from __future__ import annotations

from collections.abc import Callable

from jfdocs import ref_store as store
from jfdocs import ref_wire as wire
from jfsm.spec import constants

__all__ = ["FRAGMENTS", "VALUES"]

FRAGMENTS: dict[str, Callable[[], str]] = {
    "layout-keys": store.layout_keys,
    "layout-records": store.layout_records,
    "layout-schema": store.layout_schema,
    "canonical-blocks": store.canonical_blocks,
    "length-formula": store.length_formula,
    "thresholds": store.thresholds,
    "vectors": store.vectors,
    "compress-comment": wire.compress_comment,
    "compress-endpoint": wire.compress_endpoint,
    "compress-request": wire.compress_request,
    "compress-headers": wire.compress_headers,
    "idempotency-example": wire.idempotency_example,
    "compress-reply": wire.compress_reply,
    "compress-outcomes": wire.section("outcomes", ("Outcome", "When")),
    "compress-transport-failures": wire.section("transport_failures", ("Code", "When")),
    "compress-refusal": wire.section("refusal", ("Aspect", "Rule")),
    "compress-limits": wire.section("limits", ("Limit", "Rule")),
    "compress-retry": wire.section("retry", ("Setting", "Value")),
    "compress-idempotency": wire.section("idempotency", ("Side", "Rule")),
    "compress-telemetry": wire.compress_telemetry,
    "compress-other": wire.compress_other,
    "compress-schemas": wire.compress_schemas,
    "driver-version": wire.driver_version,
    "driver-transports": wire.driver_transports,
    "driver-messages": wire.driver_messages,
    "driver-rules": wire.driver_rules,
    "driver-error-codes": wire.driver_error_codes,
    "driver-ops": wire.driver_ops,
    "driver-shared": wire.driver_shared,
    "driver-schemas": wire.driver_schemas,
    "error-codes": wire.error_codes,
    "protocol-error-codes": wire.protocol_error_codes,
    "exception-tree": wire.exception_tree,
    "limits": wire.limits_table,
    "driver-http": wire.driver_http,
    "codes-due": wire.codes_due,
    "spec-downloads": store.spec_downloads,
}
"""Block markers: each stands alone on its line."""

VALUES: dict[str, Callable[[], str]] = {
    "game-threshold": lambda: f"{constants().game_threshold:,}",
    "catalyst-threshold": lambda: f"{constants().catalyst_threshold:,}",
    "quota-bytes": lambda: f"{constants().quota_bytes:,}",
    "quota-mib": lambda: f"{constants().quota_bytes / 1048576:g}",
    "summary-envelope": lambda: str(constants().summary_envelope),
    "exchange-envelope": lambda: str(constants().exchange_envelope),
    "reserved-prefix": lambda: f"`{constants().reserved_key_prefix}`",
    "chunk-origins": lambda: ", ".join(f"`{o}`" for o in constants().chunk_origins),
    "game-kind": lambda: f"`{constants().game_kind}`",
    "catalyst-kind": lambda: f"`{constants().catalyst_kind}`",
    "spec-version": lambda: f"`{constants().spec_version}`",
    "error-details": wire.error_details,
}
"""Inline markers: a value inside a sentence."""
