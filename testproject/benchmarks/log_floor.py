"""The observability section's floor under kept logs: a handler that keeps what a job's own
logs keep of each record (level, logger, message, time) in a tuple and nothing else, put by
the project's ``LOGGING`` on the job's logger with each job's own logs off. No capture
through ``logging`` can cost a drain less than this one handler does."""

from __future__ import annotations

import logging


class KeepFields(logging.Handler):
    """Keeps the last record's fields; no lock, no format, no filter."""

    last: tuple[str, str, str, float] | None = None

    def handle(self, record: logging.LogRecord) -> bool:
        self.last = (record.levelname, record.name, record.getMessage(), record.created)
        return True

    def emit(self, record: logging.LogRecord) -> None:  # pragma: no cover: handle() does it
        self.handle(record)
