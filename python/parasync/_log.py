"""Where the package's lines go: the standard logging module, to the logger
of the module that says them ("parasync.worker", "parasync.summaries").
The package adds no handler and leaves the root logger alone.

A program that configured no logging at all -- no handler on the logger or
above it -- still sees every line on stderr as before, in parasync-node's
form ("HH:MM:SS.mmm worker:1 state training: ..."), as Python's own last
resort shows an unconfigured program's warnings. The app's launcher follows
a worker by these lines (core/formats/task_state_line.h), so a worker script
that configures nothing is followed as it always was. A program that
configures logging gets ordinary records: its handlers decide, and
FORMAT/DATE_FORMAT keep the form the launcher reads:

    logging.basicConfig(level=logging.INFO, format=parasync.LOG_FORMAT, datefmt=parasync.LOG_DATE_FORMAT)

A level set on "parasync" (or below it) is kept either way:
logging.getLogger("parasync").setLevel(logging.WARNING) leaves the warnings.
"""

from __future__ import annotations

import logging
import sys

FORMAT = "%(asctime)s.%(msecs)03d %(message)s"
DATE_FORMAT = "%H:%M:%S"


class _Stderr(logging.Handler):
    """Writes to whatever sys.stderr is when the line comes."""

    def emit(self, record: logging.LogRecord) -> None:
        try:
            sys.stderr.write(self.format(record) + "\n")
            sys.stderr.flush()
        except Exception:  # what logging's own handlers do with a broken stream
            self.handleError(record)


_unconfigured = _Stderr()
_unconfigured.setFormatter(logging.Formatter(FORMAT, DATE_FORMAT))


def _level_set_below_root(logger: logging.Logger) -> int:
    """The level set on `logger` or the nearest parent that has one, the root
    not counted (its WARNING is the default, not the user's choice)."""
    node: logging.Logger | None = logger
    while node is not None and node.parent is not None:
        if node.level:
            return node.level
        node = node.parent
    return logging.NOTSET


def say(logger: logging.Logger, level: int, line: str) -> None:
    """Logs `line` at `level` on `logger`; while the program configured no
    logging, writes it to stderr with parasync-node's time stamp instead
    (see the module's text)."""
    if logger.hasHandlers():
        logger.log(level, line)
        return
    if logger.manager.disable >= level or level < (_level_set_below_root(logger) or logging.INFO):
        return
    _unconfigured.handle(logger.makeRecord(logger.name, level, "(unknown file)", 0, line, (), None))
