"""The compaction safety profile: library-independent properties (requirement area SAFE) of
a memory that keeps a conversation and compacts an old prefix into a summary, checked by a
Hypothesis state machine through a small adapter per library. See `docs/safety/`."""

from .adapter import Adapter, AdapterFactory, AdapterSpec, ObservedStorage, Scope, Unavailable
from .properties import PROPERTIES, Property
from .report import write_report
from .runner import ProfileOptions, ProfileResult, run_profile
from .summarizer import ScriptedSummarizer, SummarizerFailed, SummarizerTimeout

__all__ = [
    "PROPERTIES",
    "Adapter",
    "AdapterFactory",
    "AdapterSpec",
    "ObservedStorage",
    "ProfileOptions",
    "ProfileResult",
    "Property",
    "Scope",
    "ScriptedSummarizer",
    "SummarizerFailed",
    "SummarizerTimeout",
    "Unavailable",
    "run_profile",
    "write_report",
]
