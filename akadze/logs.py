"""The worker's log output: text lines, or one JSON object per line (``--log-format json``).

A JSON line has ``ts, level, logger, message``, and on a transition ``job_id, task, queue,
state, attempt, duration_ms, outcome`` (plus ``error_type, error_message`` for a failed run).
The transition fields come from the record's ``extra`` (akadze/events.py ``log_transition``):
never arguments or results.
"""

from __future__ import annotations

import enum
import logging
import sys
from datetime import UTC, datetime
from typing import Any

import msgspec

#: record attributes copied into a JSON line when a log call set them (``extra=``)
FIELDS = (
    "job_id",
    "task",
    "queue",
    "state",
    "attempt",
    "duration_ms",
    "outcome",
    "error_type",
    "error_message",
)

_encoder = msgspec.json.Encoder()


class LogFormat(enum.StrEnum):
    TEXT = "text"
    JSON = "json"


class JsonFormatter(logging.Formatter):
    """One JSON object per record, on one line (newlines inside values are escaped)."""

    def format(self, record: logging.LogRecord) -> str:
        moment = datetime.fromtimestamp(record.created, UTC).isoformat(timespec="milliseconds")
        line: dict[str, Any] = {
            "ts": moment.replace("+00:00", "Z"),
            "level": record.levelname,
            "logger": record.name,
            "message": record.getMessage(),
        }
        for name in FIELDS:
            value = record.__dict__.get(name, _MISSING)
            if value is not _MISSING:
                line[name] = value
        if record.exc_info:
            line["traceback"] = self.formatException(record.exc_info)
        return _encoder.encode(line).decode()


_MISSING = object()

TEXT_FORMAT = "%(asctime)s %(levelname)s %(name)s %(message)s"


def configure(
    level: str | int = "INFO", log_format: LogFormat | str = LogFormat.TEXT, *, tracebacks: bool = False
) -> None:
    """Send the process's logs to stderr in ``log_format``, at ``level``.

    With ``tracebacks``, a failed run's traceback is logged (akadze.worker.traceback at DEBUG)
    even when ``level`` is above DEBUG.
    """
    handler = logging.StreamHandler(sys.stderr)
    handler.setFormatter(
        JsonFormatter() if LogFormat(log_format) is LogFormat.JSON else logging.Formatter(TEXT_FORMAT)
    )
    root = logging.getLogger()
    for old in list(root.handlers):
        root.removeHandler(old)
    root.addHandler(handler)
    root.setLevel(level.upper() if isinstance(level, str) else level)
    if tracebacks:
        logging.getLogger("akadze.worker.traceback").setLevel(logging.DEBUG)
