"""What the library said while the profile drove it: its warnings and log records.

While the profile searches or replays, the library's `warnings` (all of them) and its log
records at WARNING and above are captured instead of printed (decision R116): one handler on
the root logger, put in place of the handlers of loggers that print on their own, all put
back afterwards. They are counted by *group*, not by exact text (decision R203): a warning
by its category and the source line that issued it, a log record by its level, logger and
source line, each group keeping the first message as its sample. So a library that warns
"call 1", "call 2"... from one line is one group, counted as many times as it warned.

A coroutine that was never awaited is not the library's word but the adapter's fault (an
`await` forgotten in `compact()`): its `RuntimeWarning` is counted apart, in `unawaited`, by
the coroutine's name, and the profile says so under JF-SAFE-020 (decision R201).
"""

from __future__ import annotations

import logging
import re
import warnings
from collections import Counter
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import PurePath

__all__ = ["Said", "captured"]

_UNAWAITED = re.compile(r"^coroutine '([^']+)' was never awaited")


@dataclass
class Said:
    """Counts per group (`groups`: label -> count), each group's first message
    (`samples`), and the coroutines never awaited (`unawaited`: name -> count)."""

    groups: Counter[str] = field(default_factory=Counter)
    samples: dict[str, str] = field(default_factory=dict)
    unawaited: Counter[str] = field(default_factory=Counter)

    def add(self, label: str, message: str) -> None:
        self.groups[label] += 1
        self.samples.setdefault(label, _one_line(message))

    def total(self) -> int:
        return sum(self.groups.values())


def source(path: str, line: int) -> str:
    """A source line as `package/module.py:N`: the path from the last `site-packages` (or
    its last two parts), so that a group reads the same on every machine."""
    parts = PurePath(path).parts
    if "site-packages" in parts:
        at = len(parts) - 1 - parts[::-1].index("site-packages")
        parts = parts[at + 1 :]
    else:
        parts = parts[-2:]
    return f"{'/'.join(parts)}:{line}"


def _one_line(text: str) -> str:
    line = " ".join(text.split())
    return line if len(line) <= 200 else line[:197] + "..."


class _Handler(logging.Handler):
    """Counts each log record into its group: `LEVEL logger at source`."""

    def __init__(self, into: Said) -> None:
        super().__init__(logging.WARNING)
        self.into = into

    def emit(self, record: logging.LogRecord) -> None:
        try:
            text = record.getMessage()
        except Exception:  # a library's malformed log call must not stop the profile
            text = str(record.msg)
        label = f"{record.levelname} {record.name} at {source(record.pathname, record.lineno)}"
        self.into.add(label, text)


@contextmanager
def captured(into: Said) -> Iterator[None]:
    """Count the library's warnings and its log records at WARNING and above into `into`
    instead of printing them (see the module docs); everything is put back on exit."""
    handler = _Handler(into)
    root = logging.getLogger()
    printing = [
        logger
        for logger in logging.Logger.manager.loggerDict.values()
        if isinstance(logger, logging.Logger) and logger.handlers
    ]
    saved = {logger.name: logger.handlers for logger in printing}
    for logger in printing:
        logger.handlers = [handler]
    root_handlers = root.handlers
    root.handlers = [handler]
    try:
        with warnings.catch_warnings(record=True) as caught:
            warnings.simplefilter("always")
            try:
                yield
            finally:
                for w in caught:
                    text = str(w.message)
                    if (
                        issubclass(w.category, RuntimeWarning)
                        and (m := _UNAWAITED.match(text)) is not None
                    ):
                        into.unawaited[m.group(1)] += 1
                        continue
                    label = f"{w.category.__name__} at {source(w.filename, w.lineno)}"
                    into.add(label, text)
    finally:
        root.handlers = root_handlers
        for logger in printing:
            logger.handlers = saved[logger.name]
