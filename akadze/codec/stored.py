"""JSON as the jobs table stores it, read back without trusting it.

A row may come from a producer in another language, or be edited by hand: arguments nested
deeper than any decoder here can follow, a JSON value other than an object, errors that are
not akadze's entries. Every job is decoded on its own, so one such row never fails the rows
read with it (a claim's batch, a rescue pass, a completion's hooks).
"""

from __future__ import annotations

import logging
import re
from collections.abc import Mapping
from typing import Any

import msgspec

from akadze.errors import ArgsTooDeepError, ArgsTooLargeError
from akadze.events.trace_context import joined
from akadze.job import Job, JobError, JobState

logger = logging.getLogger("akadze.db")

#: arguments and results may nest at most this many levels (``{}`` is one, ``{"a": []}`` two).
#: The worker validates arguments with pydantic's JSON parser, which refuses documents deeper
#: than about 200 levels, and Python's decoders stop near 1,000 (RecursionError): arguments
#: over the limit are refused at enqueue, and a stored row over it (written by another
#: producer) ends failed as undecodable at claim. Results over it are not JSON for akadze.
MAX_JSON_DEPTH = 100

_decoder = msgspec.json.Decoder()

#: a JSON string (skipped whole: brackets inside it do not nest) or a bracket
_NESTING = re.compile(rb'"[^"\\]*(?:\\.[^"\\]*)*"|[\[\]{}]')


def _too_deep(payload: bytes) -> bool:
    """Whether ``payload`` (JSON) nests deeper than MAX_JSON_DEPTH; two byte counts unless it
    holds more brackets than that."""
    if payload.count(b"[") + payload.count(b"{") <= MAX_JSON_DEPTH:
        return False
    return _exact_depth(payload, MAX_JSON_DEPTH) > MAX_JSON_DEPTH


def _exact_depth(payload: bytes, limit: int) -> int:
    """The deepest nesting in ``payload``, counted until it passes ``limit``."""
    depth = deepest = 0
    for match in _NESTING.finditer(payload):
        first = match.group()[0]
        if first == 0x22:  # a string
            continue
        if first in (0x5B, 0x7B):
            depth += 1
            if depth > deepest:
                deepest = depth
                if deepest > limit:
                    return deepest
        else:
            depth -= 1
    return deepest


def check_depth(task_name: str, payload: bytes) -> None:
    """Refuse encoded arguments nested deeper than MAX_JSON_DEPTH (ArgsTooDeepError)."""
    if _too_deep(payload):
        raise ArgsTooDeepError(task_name, MAX_JSON_DEPTH)


def check_payload(task_name: str, payload: bytes, max_bytes: int) -> None:
    """What every enqueue checks of encoded arguments before the row is written (the worker's
    task.enqueue and generated clients alike): the size limit (ArgsTooLargeError), the
    nesting limit (ArgsTooDeepError), and no NUL character, which PostgreSQL's jsonb cannot
    store (ValueError)."""
    if len(payload) > max_bytes:
        raise ArgsTooLargeError(task_name, len(payload), max_bytes)
    check_depth(task_name, payload)
    if b"\\u0000" in payload:
        raise ValueError(
            f"task {task_name!r}: an argument contains a NUL character, which PostgreSQL cannot store in JSON"
        )


class UnreadableArgs(dict[str, Any]):
    """The (empty) arguments of a stored job that cannot be decoded; ``reason`` says why,
    never with the value. The executor ends such a job failed as undecodable."""

    __slots__ = ("reason",)

    def __init__(self, reason: str) -> None:
        super().__init__()
        self.reason = reason


def decode_stored_args(raw: str) -> dict[str, Any]:
    """A stored job's arguments from their JSON text, or UnreadableArgs: never raises.

    A row written by another producer may hold anything jsonb takes: arguments nested deeper
    than MAX_JSON_DEPTH (or than the decoder's recursion allows), or a JSON value other than
    an object. Decoding one row must not fail the others read with it."""
    # counted on the text; encoded only for the exact count (more brackets than the limit)
    if raw.count("[") + raw.count("{") > MAX_JSON_DEPTH and _too_deep(raw.encode()):
        return UnreadableArgs(f"its arguments nest deeper than the limit of {MAX_JSON_DEPTH} levels")
    try:
        value = _decoder.decode(raw)
    except (RecursionError, msgspec.DecodeError) as exc:
        return UnreadableArgs(f"its arguments cannot be decoded ({type(exc).__name__})")
    if type(value) is not dict:
        return UnreadableArgs(f"its arguments are a JSON {_json_kind(value)}, not an object")
    return value


def decode_stored(raw: str | None) -> Any:
    """A stored JSON column (errors, result) from its text; raises on what cannot be decoded
    (RecursionError, msgspec.DecodeError): the caller decides what that row becomes."""
    if raw is None:
        return None
    return _decoder.decode(raw)


def _json_kind(value: Any) -> str:
    if isinstance(value, str):
        return "string"
    if isinstance(value, list):
        return "array"
    if isinstance(value, bool):
        return "boolean"
    if value is None:
        return "null"
    return "number"


#: a state by its stored name: a dict look-up, several times cheaper than ``JobState(name)``
STATES: dict[str, JobState] = {state.value: state for state in JobState}


def row_to_job(row: Mapping[str, Any], *, json_text: bool = False) -> Job:
    """A Job from a row. With ``json_text`` the row's JSON columns are text (the statement
    cast them), decoded here per row: a row that cannot be decoded must not fail the rows
    read with it. Its arguments become UnreadableArgs (the executor fails the job), its errors
    or result nothing. Otherwise they arrive decoded (SQLAlchemy's asyncpg dialect installs
    the codec on every connection of its pool, the raw driver connection included).

    Every claimed job passes here, so it costs what it must and no more: the Job is built
    from its fields in order (msgspec matches keywords one by one: twice the time), the
    state by a dict look-up, and the errors of a job that has none (``[]``, almost every
    claimed job) and a result the statement did not send are not decoded."""
    job_id = row["id"]
    if json_text:
        args: dict[str, Any] = decode_stored_args(row["args"])
        raw_errors = row["errors"]
        if raw_errors == "[]":
            errors: tuple[JobError, ...] = ()
        else:
            errors = _job_errors(_stored_or(raw_errors, [], job_id, "errors"), job_id)
        raw_result = row["result"]
        result = None if raw_result is None else _stored_or(raw_result, None, job_id, "result")
    else:
        args, result = row["args"], row["result"]
        errors = _job_errors(row["errors"] or [], job_id)
    worker_id = row["worker_id"]
    # absent from statements that do not select them; a traceparent alone is kept as its bytes
    trace = row.get("trace_context")
    if trace is None:
        trace = joined(row.get("trace_parent"))
    # positional, in Job's field order (tests/test_stored.py holds the order to Job's)
    return Job(
        job_id,
        row["task"],
        row["queue"],
        STATES[row["state"]],
        row["priority"],
        args,
        row["attempt"],
        row["max_attempts"],
        row["run"],
        row["run_at"],
        row["expires_at"],
        row["cancel_requested"],
        errors,
        result,
        str(worker_id) if worker_id is not None else None,
        row["args_fp"],
        row["created_at"],
        row["started_at"],
        row["finished_at"],
        False,
        trace,
        row.get("workflow_id"),
        row.get("step"),
    )


def _stored_or(raw: str | None, default: Any, job_id: int, column: str) -> Any:
    try:
        return decode_stored(raw)
    except (RecursionError, msgspec.DecodeError) as exc:
        logger.warning("job_id=%d: its stored %s cannot be decoded (%s)", job_id, column, type(exc).__name__)
        return default


def _job_errors(errors: Any, job_id: int) -> tuple[JobError, ...]:
    try:
        return tuple(JobError(e["attempt"], e["at"], e["type"], e["message"]) for e in errors)
    except (TypeError, KeyError, IndexError):
        # written by something else than akadze: the job runs without its history
        logger.warning("job_id=%d: its stored errors are not akadze's error entries", job_id)
        return ()
