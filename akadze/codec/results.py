"""Typed results: a finished job's stored JSON result, decoded to the task's declared return type.

``task.result_of(job)`` (worker side) and a generated client's ``result_of`` wait for the job,
then decode its result with the return annotation: pydantic on the worker side
(:class:`ResultType`), msgspec against the mirrored type in a producer (akadze.client). A job
that ended failed raises :class:`JobFailedError` (its last error's type and message), one that
ended cancelled :class:`JobCancelledError`. Results are stored as plain JSON (a task returning
anything else fails with ResultNotJson), so the useful return types are JSON ones: TypedDicts,
lists, dicts, numbers, strings, Literals and unions of them.
"""

from __future__ import annotations

import functools
import inspect
import typing
from collections.abc import Callable
from typing import Any

import msgspec
import pydantic

from akadze.codec import schema_fingerprint
from akadze.codec.wireschema import WireSchema
from akadze.errors import DependencyFailed, JobCancelledError, JobFailedError
from akadze.job import Job, JobState
from akadze.outcomes import ErrorType

__all__ = ["JobCancelledError", "JobFailedError", "ResultType", "finished_result"]


def return_annotation(fn: Callable[..., Any]) -> Any:
    """The declared return type of what runs (a partial's function, a callable instance's
    ``__call__``); ``Any`` when undeclared or unresolvable."""
    while isinstance(fn, functools.partial):
        fn = fn.func
    if not (inspect.isfunction(fn) or inspect.ismethod(fn)) and callable(getattr(fn, "__call__", None)):  # noqa: B004
        fn = type(fn).__call__
    try:
        hints = typing.get_type_hints(fn, include_extras=True)
    except Exception:  # an unresolvable annotation: results are then plain JSON
        return Any
    return hints.get("return", Any)


class ResultType:
    """A task's return type: how its results decode, and the fingerprint of its schema."""

    def __init__(self, fn: Callable[..., Any]) -> None:
        self.annotation = return_annotation(fn)
        self._adapter: pydantic.TypeAdapter[Any] | None = None

    @property
    def adapter(self) -> pydantic.TypeAdapter[Any]:
        """The pydantic adapter of the return type, built on first use."""
        if self._adapter is None:
            self._adapter = pydantic.TypeAdapter(self.annotation)
        return self._adapter

    def decode(self, result: Any) -> Any:
        """``result`` (the stored JSON, decoded) validated into the return type (JSON mode)."""
        return self.adapter.validate_json(msgspec.json.encode(result))

    @property
    def fingerprint(self) -> str | None:
        """The fingerprint of the return type's schema (akadze.codec.schema_fingerprint), or
        None when pydantic cannot describe it."""
        try:
            return schema_fingerprint(self.adapter.json_schema(schema_generator=WireSchema))
        except (pydantic.PydanticUserError, pydantic.PydanticSchemaGenerationError):
            return None


def finished_result(job: Job) -> Any:
    """The stored result of a finished job: JobFailedError or JobCancelledError if it has none."""
    if job.state is JobState.FAILED:
        last = job.errors[-1] if job.errors else None
        raise JobFailedError(job.id, job.task, last.type if last else None, last.message if last else None)
    if job.state is JobState.CANCELLED:
        last = job.errors[-1] if job.errors else None
        if last is not None and last.type == ErrorType.DEPENDENCY_FAILED:
            raise DependencyFailed(job.id, job.task, last.message)
        raise JobCancelledError(job.id, job.task)
    return job.result
