"""Workflows: steps (jobs) that wait for other steps, enqueued as one graph (docs/workflows.md).

``task.bind(**kwargs)`` makes a :class:`Call` (a task with checked arguments, not enqueued);
``Workflow.add`` names it a step with the steps it waits for; ``Workflow.enqueue`` checks the
whole graph (unknown names, cycles) before anything is written, then inserts every step and
edge in one statement. What happens to a step when its parents end is the database's work, in
the statement that ends them (db/sql: claim_completing, claim_limited, request_cancel, ...).
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Literal, Self, TypeAlias

from sqlalchemy.ext.asyncio import AsyncConnection, AsyncSession

from akadze.db.queries import NewJobs, NewStep, Queries
from akadze.db.raw import RawConnections
from akadze.db.status import raise_if_schema_missing
from akadze.errors import ConfigError, WorkflowError
from akadze.hooks import EnqueueHook, call
from akadze.job import MAX_NAME_LENGTH, Job

if TYPE_CHECKING:
    from akadze.app import Akadze

#: what a parent's failure or cancel does to a step: end it cancelled, or run it all the same
AfterFailure: TypeAlias = Literal["cancel", "run"]
_AFTER_FAILURE = ("cancel", "run")

#: the most steps one workflow may hold (each is a job; the insert is one statement)
MAX_STEPS = 100_000
#: the most edges one workflow may hold (a step may wait for every other step)
MAX_EDGES = 1_000_000


@dataclass(frozen=True, slots=True, repr=False)
class Call:
    """A task with its arguments (checked and encoded) and its options, not yet enqueued: what
    ``task.bind(...)`` returns, on a registered task, on what ``using(...)`` returns, and on a
    generated client's task. Add it to a :class:`Workflow` as a step.

    A ``using(session=...)`` given before ``bind`` is not used: the workflow's ``enqueue(session=)``
    decides the transaction of every step.
    """

    #: the task's name
    task: str
    #: the job's columns: the task's options after using(...)
    new: NewJobs
    #: the arguments as the row stores them (JSON text)
    args: str
    #: whose task it is (the registered task's app, or the producer clients' database):
    #: every step of a workflow must have the same
    owner: object
    #: where the steps go without a session: an engine and its raw connections
    placement: Callable[[], tuple[Any, RawConnections | None]]
    #: the owner's on_enqueue hooks, called for each step in the insert's transaction
    hooks: tuple[EnqueueHook, ...] = ()

    def __repr__(self) -> str:
        # never the arguments: they may hold secrets, and reprs end up in logs
        return f"<Call {self.task!r} queue={self.new.queue!r}>"


@dataclass(frozen=True, slots=True)
class _Step:
    call: Call
    after: tuple[str, ...]
    after_failure: AfterFailure


class Workflow:
    """A graph of steps to enqueue together.

    Example::

        wf = Workflow(name="order 42")
        wf.add("charge", charge.bind(order_id=42))
        wf.add("ship", ship.bind(order_id=42), after=["charge"])
        wf.add("mail", mail.bind(order_id=42), after=["charge"])
        wf.add("close", close.bind(order_id=42), after=["ship", "mail"])
        jobs = await wf.enqueue()          # {"charge": Job, "ship": Job, ...}

    A step runs once every step in its ``after`` has succeeded. If one of them ends failed or
    cancelled, the step ends cancelled (error type ``akadze.DependencyFailed``), and so do the
    steps after it; with ``after_failure="run"`` it runs once they have all finished, whatever
    their end.
    """

    def __init__(self, name: str | None = None) -> None:
        if name is not None and (not isinstance(name, str) or "\x00" in name):
            raise ConfigError(f"a workflow's name must be a string without NUL, or None; got {name!r}")
        self.name = name
        self._steps: dict[str, _Step] = {}
        self._edges = 0

    def __repr__(self) -> str:
        return f"<Workflow {self.name!r} steps={len(self._steps)}>"

    def __len__(self) -> int:
        return len(self._steps)

    def add(
        self,
        step: str,
        call: Call,
        *,
        after: Iterable[str] = (),
        after_failure: AfterFailure = "cancel",
    ) -> Self:
        """Add ``call`` as the step named ``step``, waiting for the steps named in ``after``
        (which may be added later: names are checked at :meth:`enqueue`).

        Raises:
            WorkflowError: (a ValueError) a step name used twice, an empty or too long name, a
                call of another app's task than the other steps', an ``after_failure`` other
                than "cancel" or "run", more than MAX_STEPS steps or MAX_EDGES edges.
        """
        if not isinstance(call, Call):
            raise TypeError(f"step {step!r}: add() takes the Call that task.bind(...) returns, got {call!r}")
        _check_step_name(step)
        if step in self._steps:
            raise WorkflowError(
                step, f"a step named {step!r} is already in this workflow; name each step once"
            )
        if call.new.unique is not None:
            raise WorkflowError(
                step,
                f"task {call.task!r} has a Unique key; a workflow step cannot be unique (enqueue it alone)",
            )
        if isinstance(after, str):
            after = (after,)
        parents = tuple(dict.fromkeys(after))
        for parent in parents:
            if not isinstance(parent, str):
                raise WorkflowError(step, f"after= holds step names, got {parent!r}")
        if after_failure not in _AFTER_FAILURE:
            raise WorkflowError(step, f"after_failure must be 'cancel' or 'run', got {after_failure!r}")
        if self._steps:
            first = next(iter(self._steps.values())).call
            if call.owner is not first.owner:
                raise WorkflowError(
                    step,
                    f"task {call.task!r} belongs to another app than the workflow's other steps "
                    f"(task {first.task!r}); a workflow's steps are enqueued with one app",
                )
        if len(self._steps) >= MAX_STEPS:
            raise WorkflowError(step, f"a workflow holds at most {MAX_STEPS} steps")
        if self._edges + len(parents) > MAX_EDGES:
            raise WorkflowError(step, f"a workflow holds at most {MAX_EDGES} edges")
        self._steps[step] = _Step(call, parents, after_failure)
        self._edges += len(parents)
        return self

    def check(self) -> list[str]:
        """The step names, parents before children; :class:`WorkflowError` for an unknown step
        name in an ``after`` or a cycle (``enqueue`` calls it before anything is written). Pure."""
        steps = self._steps
        if not steps:
            raise WorkflowError(None, "the workflow has no step; add() one before enqueue()")
        for name, step in steps.items():
            for parent in step.after:
                if parent not in steps:
                    raise WorkflowError(
                        name, f"step {name!r} waits for {parent!r}, which is not a step of this workflow"
                    )
        order, cycle = _ordered({name: step.after for name, step in steps.items()})
        if cycle:
            raise WorkflowError(cycle[0], f"the steps wait for each other in a cycle: {' -> '.join(cycle)}")
        return order

    async def enqueue(self, session: AsyncConnection | AsyncSession | None = None) -> dict[str, Job]:
        """Check the graph, then insert every step and edge in one statement: in the caller's
        transaction with ``session`` (an AsyncConnection or AsyncSession; inside a task, the
        connection of ``complete_tx()``, so that a running step fans out with its success),
        else in a transaction of its own on the steps' app.

        Returns:
            Step name -> its new Job (``job.workflow_id`` and ``job.step`` set), in the order
            the steps were added.

        Raises:
            WorkflowError: (a ValueError) an unknown step name, a cycle, no step; nothing
                is inserted.
        """
        order = self.check()
        # parents first: a parent's id is below its children's, the order every statement
        # that ends steps locks them in (docs/workflows.md, "Locks")
        steps = [
            NewStep(name, step.call.new, step.call.args, step.after, step.after_failure)
            for name, step in ((name, self._steps[name]) for name in order)
        ]
        hooks = next(iter(self._steps.values())).call.hooks
        try:
            if session is not None:
                if not isinstance(session, AsyncConnection | AsyncSession):
                    raise ConfigError(
                        "session must be a SQLAlchemy AsyncConnection or AsyncSession, "
                        f"got {type(session).__qualname__}"
                    )
                conn = await session.connection() if isinstance(session, AsyncSession) else session
                return await self._insert(conn, steps, hooks)
            engine, _ = next(iter(self._steps.values())).call.placement()
            if engine is None:
                raise ConfigError("no database: pass session= or configure an engine")
            async with engine.begin() as conn:
                return await self._insert(conn, steps, hooks)
        except Exception as exc:
            raise_if_schema_missing(exc)
            raise

    async def _insert(
        self, conn: AsyncConnection, steps: list[NewStep], hooks: tuple[EnqueueHook, ...]
    ) -> dict[str, Job]:
        jobs = await Queries.enqueue_workflow(conn, self.name, steps)
        for job in jobs.values() if hooks else ():
            await call(hooks, conn, job)
        return {name: jobs[name] for name in self._steps}


def _check_step_name(step: object) -> None:
    if not isinstance(step, str) or not step.strip():
        raise WorkflowError(None, f"a step name must be a non-empty string, got {step!r}")
    if len(step) > MAX_NAME_LENGTH:
        raise WorkflowError(step, f"step name is {len(step)} characters long; the limit is {MAX_NAME_LENGTH}")
    if "\x00" in step:
        raise WorkflowError(step, f"step name {step!r} contains a NUL character")


def _ordered(after: dict[str, tuple[str, ...]]) -> tuple[list[str], list[str]]:
    """The steps of ``after`` (step -> the steps it waits for) parents first, and a cycle as
    the names along it (the first repeated at the end; [] when there is none). A depth-first
    walk, iterative (a 100,000-step chain meets no recursion limit), linear in steps and edges."""
    order: list[str] = []
    white, grey, black = 0, 1, 2
    color = dict.fromkeys(after, white)
    for root in after:
        if color[root] != white:
            continue
        color[root] = grey
        path = [root]
        stack = [iter(after[root])]
        while stack:
            parent = next(stack[-1], None)
            if parent is None:
                done = path.pop()
                color[done] = black
                order.append(done)
                stack.pop()
            elif color[parent] == grey:
                loop = path[path.index(parent) :]
                return order, [*loop, parent]
            elif color[parent] == white:
                color[parent] = grey
                path.append(parent)
                stack.append(iter(after[parent]))
    return order, []


async def cancel_workflow(
    connection: AsyncConnection | AsyncSession, workflow_id: int, *, app: Akadze | None = None
) -> int:
    """Cancel every unfinished step of a workflow in the caller's transaction: a queued step
    (waiting or ready) ends cancelled now; a running one is marked and ends cancelled unless
    its body returns normally (as ``request_cancel``). Finished steps stay as they are.

    Returns how many steps were cancelled or marked (0: no such workflow, or all finished).
    With ``app``, its on_transition hooks run for the steps cancelled here and its events
    subscribers hear of them once your transaction commits.
    """
    from akadze.control import _connection, _transition
    from akadze.events import Kind

    conn = await _connection(connection)
    changed = await Queries.cancel_workflow(conn, int(workflow_id))
    if app is not None:
        for job, from_state in changed:
            if job.state is not from_state:
                await _transition(app, conn, job, from_state, Kind.CANCELLED)
    return len(changed)
