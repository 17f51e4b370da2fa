"""The worker's log output: text lines, or one JSON object per line (``--log-format json``).

A JSON line has ``ts, level, logger, message``, and on a transition ``job_id, task, queue,
state, attempt, duration_ms, outcome`` (plus ``error_type, error_message`` for a failed run).
The transition fields come from the record's ``extra`` (:func:`log_transition`, an events
subscriber): never arguments or results.
"""

from __future__ import annotations

import enum
import logging
import sys
from collections.abc import Callable
from datetime import UTC, datetime
from typing import Any

import msgspec

from akadze.events import Event, Events, Kind, Need
from akadze.outcomes import ErrorType, Verdict

#: the transition log line is written on the worker's logger, as it always was documented
transition_logger = logging.getLogger("akadze.worker")
#: a failed run's error message is logged up to this many characters (as stored on the job)
MAX_LOGGED_MESSAGE = 2000
#: the events (akadze.events.Kind values) the transition log line may log: the others log
#: their own line where they happen
LOGGED = frozenset({"ended", "committed", "cancelled", "requeued"})

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
    """The log formats, as ``--log-format`` names them: text lines, or one JSON object a line."""

    TEXT = "text"
    JSON = "json"


class JsonFormatter(logging.Formatter):
    """One JSON object per record, on one line (newlines inside values are escaped)."""

    def format(self, record: logging.LogRecord) -> str:
        """``record`` as one line: ts (UTC, milliseconds), level, logger, message, those of FIELDS
        the log call set, and the traceback when the record has one."""
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


def attach(events: Events) -> Callable[[], None]:
    """Subscribe the transition log line to ``events``: every run end and cancel at INFO, only
    the runs that ended with an error while the worker's logger is at WARNING, none above."""
    return events.subscribe(log_transition, kinds=[Kind(kind) for kind in LOGGED], interest=_interest)


def _interest() -> Need:
    if transition_logger.isEnabledFor(logging.INFO):
        return Need.ALL
    return Need.ERRORS if transition_logger.isEnabledFor(logging.WARNING) else Need.NOTHING


def log_transition(event: Event) -> None:
    """The worker's transition log line: one per run end and per cancel before a run.

    INFO for most; WARNING for a run that failed and will run again (with its error's type
    and message, as stored on the job); ERROR for a job that failed for good. The fields go on
    the record too (``extra``), for the JSON format (akadze/events/logs.py).
    """
    if event.kind not in LOGGED:
        return  # claims are not logged; rescues and fires log their own line where they happen
    outcome = event.outcome
    if outcome is Verdict.FAILED:
        level = logging.ERROR
    elif outcome is Verdict.RETRIED and event.error_type != ErrorType.RETRY:
        level = logging.WARNING
    else:
        level = logging.INFO  # an explicit Retry is the task's instruction, not a failure
    if not transition_logger.isEnabledFor(level):
        return
    duration_ms = round(event.duration_s * 1000, 1) if event.duration_s is not None else None
    fields = {
        "job_id": event.job_id,
        "task": event.task,
        "queue": event.queue,
        "state": event.to_state.value,
        "attempt": event.attempt,
        "duration_ms": duration_ms,
        "outcome": outcome.value if outcome is not None else None,
    }
    head = (
        event.job_id,
        event.task,
        event.queue,
        event.to_state.value,
        event.attempt,
        duration_ms if duration_ms is not None else "-",
    )
    if event.error_type is None:
        transition_logger.log(
            level, "job_id=%d task=%s queue=%s state=%s attempt=%d duration_ms=%s", *head, extra=fields
        )
        return
    message = event.error_message or ""
    if len(message) > MAX_LOGGED_MESSAGE:
        message = message[:MAX_LOGGED_MESSAGE] + " [truncated]"
    fields["error_type"] = event.error_type
    fields["error_message"] = message
    transition_logger.log(
        level,
        "job_id=%d task=%s queue=%s state=%s attempt=%d duration_ms=%s outcome=%s error=%s: %s",
        *head,
        outcome.value if outcome is not None else "-",
        event.error_type or "-",
        message,
        extra=fields,
    )
