"""The composed job listing and search of the dashboard: which jobs a filter takes, in which
order, a page at a time (keyset), and how a text search stays bounded. Queries runs the
statements built here (JobQueries.job_page); no IO here.

Two orders, each on an index with a million finished jobs (tests/web/test_dashboard_plans.py):

- newest first by id, without a time range: the primary key, or for failed and cancelled rows
  akadze_jobs_state_id_idx, _task_id_idx or _queue_id_idx (partial on those two states, so that
  only the jobs that end so write them: migration 0009);
- newest finished first, by (finished_at, id), with a time range: a time range selects finished
  jobs by when they finished, read from akadze_jobs_prune_idx (every finished row) or
  akadze_jobs_failed_idx (failed rows).

Error text and argument values have no index (one would cost every job a write): a search for
them reads a window of at most ``scan`` jobs in the listing's order (of the state and time
range asked; the task and queue are matched in the window with the text), and the page says how
far it looked, so that "Older" goes on from there. Every user value is a bound
parameter; the SQL text is fixed here.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from datetime import datetime
from typing import Any

import msgspec
from sqlalchemy import (
    ColumnElement,
    Select,
    Text,
    and_,
    bindparam,
    case,
    column,
    false,
    func,
    literal,
    or_,
    select,
    true,
    tuple_,
)
from sqlalchemy.dialects.postgresql import JSONB

from akadze.db.tables import jobs
from akadze.job import FINISHED_STATES, JobRef, JobState


class ArgMatch(msgspec.Struct, frozen=True):
    """An argument whose value, as text (a string as it is, anything else as JSON), equals
    ``value``: the argument ``name``, or any top-level argument when ``name`` is None."""

    name: str | None
    value: str


class JobFilter(msgspec.Struct, frozen=True):
    """Which jobs a listing, a search or a bulk action takes: any of ``states`` (all when
    empty), and each other field when given."""

    states: tuple[JobState, ...] = ()
    task: str | None = None
    queue: str | None = None
    #: finished at or after / before these moments: the listing is then of finished jobs, by
    #: when they finished
    finished_from: datetime | None = None
    finished_to: datetime | None = None
    #: text an error's type or message contains (any case)
    error: str | None = None
    #: an argument's value (only where the dashboard may show arguments)
    arg: ArgMatch | None = None
    #: only these jobs (a selection in the listing)
    ids: tuple[int, ...] = ()

    @property
    def by_finish(self) -> bool:
        """Whether the listing is ordered by when the jobs finished (a time range is given)."""
        return self.finished_from is not None or self.finished_to is not None

    @property
    def searches_text(self) -> bool:
        """Whether a page reads a bounded window of jobs (error text or an argument value)."""
        return self.error is not None or self.arg is not None


class Cursor(msgspec.Struct, frozen=True):
    """Where a page ends: the next page lists what comes after this job in the listing's order."""

    id: int
    #: the job's finished_at, in a listing by when jobs finished
    finished_at: datetime | None = None


class JobSummary(JobRef, frozen=True):
    """A job as a listing shows it: never its arguments, result or errors (they can be large)."""

    priority: int
    attempt: int
    max_attempts: int
    run_at: datetime
    cancel_requested: bool
    created_at: datetime
    started_at: datetime | None
    finished_at: datetime | None

    @classmethod
    def of(cls, row: Mapping[str, Any]) -> JobSummary:
        """A summary from a listing row; the state becomes a JobState (ValueError for an unknown one)."""
        return cls(
            **{name: row[name] for name in cls.__struct_fields__ if name != "state"},
            state=JobState(row["state"]),
        )


class JobPage(msgspec.Struct, frozen=True):
    """One page of a listing or search."""

    jobs: list[JobSummary]
    #: where the next page starts; None when nothing is left
    next: Cursor | None
    #: for a text search: how many jobs this page read, looking for matches
    scanned: int | None = None

    @classmethod
    def of(
        cls, rows: Sequence[Mapping[str, Any]], where: JobFilter, *, limit: int, scan: int | None
    ) -> JobPage:
        """From job_page_query's rows: ``limit`` + 1 rows ask whether another page follows."""
        if not where.searches_text or scan is None:
            found = [JobSummary.of(row) for row in rows]
            more = len(found) > limit
            found = found[:limit]
            return cls(found, _cursor(found[-1], where) if more and found else None)
        found = [JobSummary.of(row) for row in rows if row["id"] is not None]
        scanned = int(rows[0]["scanned"]) if rows else 0
        if len(found) > limit:
            return cls(found[:limit], _cursor(found[limit - 1], where), scanned)
        end = rows[0] if rows else None
        if scanned < scan or end is None or end["end_id"] is None:
            return cls(found, None, scanned)  # the window reached the end of the filter's jobs
        return cls(found, Cursor(int(end["end_id"]), end["end_at"] if where.by_finish else None), scanned)


def _cursor(job: JobSummary, where: JobFilter) -> Cursor:
    return Cursor(job.id, job.finished_at if where.by_finish else None)


_SUMMARY = [jobs.c[name] for name in JobSummary.__struct_fields__]


def _filters(
    where: JobFilter, before: Cursor | None, max_id: int | None, *, window: bool = False
) -> list[ColumnElement[bool]]:
    """The filter's clauses on akadze_jobs, and the keyset's bound. For a text search's
    ``window``, only those an index walk serves in the listing's order (the state, the time
    range, the bounds): the task and queue are matched in the window with the text, so that a
    window is always its number of jobs of that walk, however rare the task."""
    clauses: list[ColumnElement[bool]] = []
    states = list(where.states)
    if where.by_finish:
        states = [s for s in states or FINISHED_STATES if s in FINISHED_STATES]
    others = [state.value for state in states if state is not JobState.QUEUED]
    if JobState.QUEUED in states:
        # the queued jobs are in two partial indexes, the claimable and the parked ones
        # (migration 0012): spelled as both, the planner reads the two (a BitmapOr)
        queued = and_(
            jobs.c.state == JobState.QUEUED.value, or_(jobs.c.parked.is_(None), jobs.c.parked.isnot(None))
        )
        clauses.append(or_(queued, jobs.c.state.in_(others)) if others else queued)
    elif len(others) == 1:
        clauses.append(jobs.c.state == others[0])
    elif others:
        clauses.append(jobs.c.state.in_(others))
    if where.task is not None and not window:
        clauses.append(jobs.c.task == where.task)
    if where.queue is not None and not window:
        clauses.append(jobs.c.queue == where.queue)
    if where.ids:
        clauses.append(jobs.c.id.in_(list(where.ids)))
    if where.finished_from is not None:
        clauses.append(jobs.c.finished_at >= where.finished_from)
    if where.finished_to is not None:
        clauses.append(jobs.c.finished_at < where.finished_to)
    if max_id is not None:
        clauses.append(jobs.c.id <= max_id)
    if before is not None:
        if where.by_finish and before.finished_at is not None:
            # the first clause bounds the index range; the row comparison breaks ties by id
            clauses.append(jobs.c.finished_at <= before.finished_at)
            clauses.append(tuple_(jobs.c.finished_at, jobs.c.id) < tuple_(before.finished_at, before.id))
        else:
            clauses.append(jobs.c.id < before.id)
    return clauses


def _order(where: JobFilter, columns: Any = jobs.c) -> list[Any]:
    if where.by_finish:
        return [columns.finished_at.desc(), columns.id.desc()]
    return [columns.id.desc()]


def _text_match(where: JobFilter, columns: Any) -> ColumnElement[bool]:
    """The task, queue, error text and argument value predicates, over the window's columns."""
    clauses: list[ColumnElement[bool]] = []
    if where.task is not None:
        clauses.append(columns.task == where.task)
    if where.queue is not None:
        clauses.append(columns.queue == where.queue)
    if where.error is not None:
        errors = case(
            (func.jsonb_typeof(columns.errors) == "array", columns.errors), else_=func.jsonb_build_array()
        )
        entry = func.jsonb_array_elements(errors).table_valued(column("value", JSONB)).alias("e")
        said = func.coalesce(entry.c.value["type"].astext, "") + ": "
        said = said + func.coalesce(entry.c.value["message"].astext, "")
        needle = func.lower(bindparam("error_text", where.error, type_=Text))
        clauses.append(
            select(literal(1)).select_from(entry).where(func.strpos(func.lower(said), needle) > 0).exists()
        )
    if where.arg is not None:
        value = bindparam("arg_value", where.arg.value, type_=Text)
        if where.arg.name is not None:
            clauses.append(columns.args[bindparam("arg_name", where.arg.name, type_=Text)].astext == value)
        else:
            pair = func.jsonb_each_text(columns.args).table_valued(column("key", Text), column("value", Text))
            pair = pair.alias("a")
            found = select(literal(1)).select_from(pair).where(pair.c.value == value).exists()
            clauses.append(case((func.jsonb_typeof(columns.args) == "object", found), else_=false()))
    return and_(true(), *clauses)


def job_page_query(
    where: JobFilter,
    *,
    before: Cursor | None,
    limit: int,
    scan: int | None = None,
    max_id: int | None = None,
) -> Select[Any]:
    """A page of ``where``: ``limit`` jobs after ``before`` in the listing's order, none newer
    than ``max_id``. With a text search and ``scan``, reads at most ``scan`` jobs of the other
    filters and returns, on every row (and on one row of NULL jobs when none matched), how many
    it read (``scanned``) and the last one's key (``end_id``, ``end_at``)."""
    if not where.searches_text or scan is None:
        clauses = _filters(where, before, max_id)
        return select(*_SUMMARY).where(*clauses).order_by(*_order(where)).limit(limit)
    window = (
        select(*_SUMMARY, jobs.c.errors, jobs.c.args)
        .where(*_filters(where, before, max_id, window=True))
        .order_by(*_order(where))
        .limit(scan)
        .cte("scanned")
        .prefix_with("MATERIALIZED")
    )
    read = select(func.count().label("scanned")).select_from(window).subquery("read")
    last = (
        select(window.c.id.label("end_id"), window.c.finished_at.label("end_at"))
        .order_by(*_last_first(where, window.c))
        .limit(1)
        .lateral("last")
    )
    matched = (
        select(*[window.c[name] for name in JobSummary.__struct_fields__])
        .where(_text_match(where, window.c))
        .order_by(*_order(where, window.c))
        .limit(limit)
        .lateral("matched")
    )
    return (
        select(
            *[matched.c[name] for name in JobSummary.__struct_fields__],
            read.c.scanned,
            last.c.end_id,
            last.c.end_at,
        )
        .select_from(read.outerjoin(last, true()).outerjoin(matched, true()))
        .order_by(*_order(where, matched.c))
    )


def _last_first(where: JobFilter, columns: Any) -> list[Any]:
    """The listing's order reversed: the window's last job first."""
    if where.by_finish:
        return [columns.finished_at.asc(), columns.id.asc()]
    return [columns.id.asc()]
