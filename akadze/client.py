"""The runtime of generated producer clients (``akadze codegen``): RemoteTask, configure().

A producer service enqueues jobs for a worker whose code it does not import. Each generated
task class subclasses :class:`RemoteTask` and adds an ``enqueue(**kwargs: Unpack[Args])``
typed with the task's arguments. Jobs go through :func:`akadze.task.insert_jobs`, the same
insert the worker-side ``task.enqueue`` uses, so the row is the same: task name, queue,
priority, max_attempts, the JSON of the arguments and the argument-schema fingerprint.

Arguments are encoded with msgspec: mirrored types (msgspec Structs, enums, NewTypes) and
datetime, UUID, Decimal (as a string), bytes (base64), sets and tuples become the JSON that
the worker's pydantic validation reads back into the declared types. A field a mirror leaves
``UNSET`` is not sent: the worker's current default applies.

Before a row is written, the guard decodes that JSON with msgspec against the task's argument
TypedDict (types, enum values, ``msgspec.Meta`` constraints, nested Structs), so an untyped
caller gets :class:`InvalidArgsError` instead of a job the worker would fail. It checks the
bytes the worker will read, so a Struct built with a wrong field type is caught too (msgspec
Structs do not check their fields when built). ``configure(validate=False)`` turns it off.
"""

from __future__ import annotations

import copy
import enum
import logging
import os
import types
import typing
from collections.abc import Collection, Mapping, Sequence
from datetime import datetime, timedelta
from typing import Annotated, Any, Generic, Literal, NotRequired, Required, Self, TypeVar, Union

import msgspec
import typing_extensions
from sqlalchemy.ext.asyncio import AsyncEngine

from akadze.app import create_engine
from akadze.codec import DEFAULT_MAX_ARGS_BYTES
from akadze.db.queries import NewJobs
from akadze.errors import AkadzeError, ArgsTooLargeError, ConfigError
from akadze.job import Job
from akadze.task import Placement, Session, insert_jobs

__all__ = ["InvalidArgsError", "Job", "RemoteTask", "configure", "dispose", "is_codegen"]

logger = logging.getLogger("akadze.client")

#: the argument TypedDict of one task
A = TypeVar("A", bound=Mapping[str, Any])

#: environment variable read when neither session= nor configure() gives a database
DATABASE_URL_ENV = "AKADZE_DATABASE_URL"


def is_codegen() -> bool:
    """True while ``akadze codegen`` imports the worker app (``AKADZE_CODEGEN=1``).

    Worker modules keep import-time side effects (connections, required secrets) out of codegen
    with it, and may register under it the tasks that only some deployments register, so that
    one client package covers them all (docs/codegen.md). Never register a task *differently*
    under it (other arguments, another queue): the clients would not match the worker.
    """
    return os.environ.get("AKADZE_CODEGEN") == "1"


class _Database:
    """The producer-wide default database: configure() or AKADZE_DATABASE_URL."""

    def __init__(self) -> None:
        self.engine: AsyncEngine | None = None
        self.owned = False
        self.max_args_bytes = DEFAULT_MAX_ARGS_BYTES
        #: run the msgspec guard before inserting (configure(validate=...))
        self.validate = True

    def resolve(self) -> AsyncEngine | None:
        if self.engine is None:
            url = os.environ.get(DATABASE_URL_ENV)
            if url:
                self.engine = create_engine(url)
                self.owned = True
        return self.engine


_database = _Database()


def configure(
    *,
    engine: AsyncEngine | None = None,
    database_url: str | None = None,
    max_args_bytes: int | None = None,
    validate: bool | None = None,
) -> None:
    """Set the database used by generated clients when ``using(session=...)`` is not given.

    Pass your service's ``AsyncEngine`` (never disposed here) or a ``database_url`` (an engine
    is created and owned; close it with :func:`dispose`). Without either, the clients read
    ``AKADZE_DATABASE_URL`` on first use. ``max_args_bytes`` must match the worker app's limit
    if it changed it. ``validate=False`` turns off the argument guard (types and constraints
    checked with msgspec before the insert) for every client of the process; argument names
    are still checked. An argument left unchanged keeps its current setting.
    """
    if engine is not None and database_url is not None:
        raise ConfigError("pass engine or database_url, not both")
    if engine is not None:
        if not isinstance(engine, AsyncEngine):
            raise ConfigError(f"engine must be a SQLAlchemy AsyncEngine, got {type(engine).__qualname__}")
        _database.engine, _database.owned = engine, False
    elif database_url is not None:
        _database.engine, _database.owned = create_engine(database_url), True
    if max_args_bytes is not None:
        if isinstance(max_args_bytes, bool) or not isinstance(max_args_bytes, int):
            raise ConfigError(f"max_args_bytes must be an integer, got {max_args_bytes!r}")
        _database.max_args_bytes = max_args_bytes
    if validate is not None:
        if not isinstance(validate, bool):
            raise ConfigError(f"validate must be True or False, got {validate!r}")
        _database.validate = validate


async def dispose() -> None:
    """Close the engine that configure(database_url=...) or AKADZE_DATABASE_URL created."""
    engine, owned = _database.engine, _database.owned
    _database.engine, _database.owned = None, False
    if engine is not None and owned:
        await engine.dispose()


def _enc_hook(obj: Any) -> Any:
    raise TypeError(
        f"cannot encode {type(obj).__module__}.{type(obj).__qualname__} as a task argument; "
        "pass the generated client's mirror type (or a plain value) instead"
    )


# the same options as the worker's encoder: Decimal as a string, bytes as base64
_encoder = msgspec.json.Encoder(enc_hook=_enc_hook, decimal_format="string")


class RemoteTask(Generic[A]):
    """A task of another service, enqueued by name with typed arguments.

    Generated subclasses add ``enqueue(**kwargs: Unpack[Args]) -> Job``; ``enqueue_many``
    takes a sequence of the same TypedDict. ``using(...)`` returns a copy with options.
    """

    def __init__(
        self,
        name: str,
        *,
        queue: str,
        priority: int,
        max_attempts: int,
        args_fp: str,
        args_type: object,
    ) -> None:
        self.name = name
        self.queue = queue
        self.priority = priority
        self.max_attempts = max_attempts
        #: fingerprint of the worker's argument schema this client was generated from
        self.args_fp = args_fp
        self._required: frozenset[str] = getattr(args_type, "__required_keys__", frozenset())
        optional: frozenset[str] | None = getattr(args_type, "__optional_keys__", None)
        self._known = None if optional is None else self._required | optional
        # shared by the copies using() makes, so the decoder is built once per task
        self._guard = _Guard(name, args_type)
        self._placement = Placement(engine=None)

    def __repr__(self) -> str:
        return f"<{type(self).__name__} {self.name!r} queue={self.queue!r}>"

    def using(
        self,
        *,
        session: Session | None = None,
        delay: timedelta | None = None,
        run_at: datetime | None = None,
        priority: int | None = None,
        queue: str | None = None,
        expires_at: datetime | None = None,
    ) -> Self:
        """Options for the jobs enqueued next; ``session`` joins the caller's transaction.

        ``session`` is a SQLAlchemy ``AsyncConnection`` or ``AsyncSession``: the job commits
        or rolls back with it. ``priority`` and ``queue`` override the task's defaults.
        """
        clone = copy.copy(self)
        clone._placement = self._placement.merged(
            session=session,
            delay=delay,
            run_at=run_at,
            priority=priority,
            queue=queue,
            expires_at=expires_at,
        )
        return clone

    async def enqueue_many(self, items: Sequence[A], /) -> list[Job]:
        """Insert many jobs of this task in one statement; one bad item rejects them all."""
        payloads = [self._encode(item) for item in items]
        if not payloads:
            return []
        return await self._insert(payloads)

    async def _enqueue(self, arguments: Mapping[str, Any], /) -> Job:
        jobs = await self._insert([self._encode(arguments)])
        return jobs[0]

    def _encode(self, arguments: Mapping[str, Any]) -> str:
        _check_keys(self.name, arguments, self._required, self._known)
        payload = _encoder.encode(arguments)
        if len(payload) > _database.max_args_bytes:
            raise ArgsTooLargeError(self.name, len(payload), _database.max_args_bytes)
        if b"\\u0000" in payload:
            raise ValueError(
                f"task {self.name!r}: an argument contains a NUL character, "
                "which PostgreSQL cannot store in JSON"
            )
        if _database.validate:
            self._guard.check(payload)
        return payload.decode()

    async def _insert(self, payloads: Sequence[str]) -> list[Job]:
        placement = self._placement
        if placement.session is None:
            engine = _database.resolve()
            if engine is None:
                raise ConfigError(
                    f"task {self.name!r}: no database; pass using(session=...), call "
                    f"akadze.client.configure(engine=...), or set {DATABASE_URL_ENV}"
                )
            placement = Placement(
                engine=engine,
                delay=placement.delay,
                run_at=placement.run_at,
                priority=placement.priority,
                queue=placement.queue,
                expires_at=placement.expires_at,
            )
        new: NewJobs = placement.new_jobs(
            self.name,
            queue=self.queue,
            priority=self.priority,
            max_attempts=self.max_attempts,
            args_fp=self.args_fp,
        )
        return await insert_jobs(placement, new, payloads)


def _check_keys(
    task: str,
    arguments: Mapping[str, Any],
    required: Collection[str],
    known: Collection[str] | None,
) -> None:
    """A cheap guard for untyped callers; types are mypy's job and the worker's validation."""
    if not isinstance(arguments, Mapping):
        raise TypeError(f"task {task!r}: arguments must be a mapping, got {type(arguments).__name__}")
    unknown = [] if known is None else sorted(key for key in arguments if key not in known)
    if unknown:
        raise TypeError(f"task {task!r}: unexpected argument(s) {', '.join(map(repr, unknown))}")
    missing = sorted(key for key in required if key not in arguments)
    if missing:
        raise TypeError(f"task {task!r}: missing required argument(s) {', '.join(map(repr, missing))}")


class InvalidArgsError(AkadzeError, ValueError):
    """Arguments a generated client refused before writing a row (the msgspec guard).

    The message names the task, the problem and where (``$.to.zipCode``), never the value:
    arguments may hold secrets.
    """

    def __init__(self, task_name: str, problem: str, path: str | None, *, in_key: bool = False) -> None:
        self.task_name = task_name
        #: what is wrong, as msgspec says it, without the value ("Expected `int`, got `str`")
        self.problem = problem
        #: where, as a JSON path ("$.user_id"), or None for the arguments as a whole
        self.path = path
        #: the problem is in a key of the dict at ``path``, not in a value
        self.in_key = in_key
        where = "" if not path else f" - at `key` in `{path}`" if in_key else f" - at `{path}`"
        super().__init__(f"task {task_name!r}: {problem}{where}")


class _Guard:
    """The msgspec decoder of one task's argument TypedDict, built on first use.

    Decoding the JSON about to be stored checks what the worker will read: types (strictly: a
    string is not a number, a bool not an int), enum and literal values, requiredness of Struct
    fields, ``msgspec.Meta`` constraints. Where msgspec cannot decode a mirrored type as it is,
    the guard checks an equivalent or looser one (:func:`_loosen`): a ``Literal`` of enum
    members becomes a literal of their values, a union of Structs told apart by a literal
    field (a pydantic discriminated union) a msgspec tagged union, and what is left a looser
    type, down to ``Any``. The worker's validation has the last word.
    """

    __slots__ = ("_args_type", "_decoder", "_task")

    def __init__(self, task: str, args_type: object) -> None:
        self._task = task
        self._args_type = args_type
        #: None until built; False when there is nothing to check with
        self._decoder: msgspec.json.Decoder[Any] | Literal[False] | None = None

    def check(self, payload: bytes) -> None:
        decoder = self._decoder
        if decoder is None:
            decoder = self._decoder = self._build()
        if decoder is False:
            return
        problem = None
        try:
            decoder.decode(payload)
        except msgspec.ValidationError as exc:
            # kept apart from the raise below, so the error (which may quote the value) is not
            # chained to the one callers see
            problem = str(exc)
        if problem is not None:
            what, path, in_key = _redacted(problem)
            raise InvalidArgsError(self._task, what, path, in_key=in_key)

    def _build(self) -> msgspec.json.Decoder[Any] | Literal[False]:
        if not typing_extensions.is_typeddict(self._args_type):
            return False  # a hand-made RemoteTask without a TypedDict: names only, if any
        try:
            return msgspec.json.Decoder(_loosen(self._args_type, set()))
        except Exception as exc:  # the guard must not stop an enqueue the worker would take
            logger.warning(
                "task %r: the argument guard cannot be built (%s: %s); its arguments are "
                "checked by the worker only",
                self._task,
                type(exc).__name__,
                exc,
            )
            return False


def _redacted(message: str) -> tuple[str, str | None, bool]:
    """(problem, path, in a key) from a msgspec validation message, without the value it
    may quote."""
    problem, at, path = message.rpartition(" - at `")
    if not at:
        problem, path = message, ""
    for prefix in ("Invalid enum value", "Invalid value"):
        if problem.startswith(prefix):
            problem = prefix  # "Invalid enum value 'purple'": the value goes
    path = path.removesuffix("`")
    in_key = path.startswith("key` in `")  # "... - at `key` in `$.by_int`"
    return problem, path.removeprefix("key` in `") or None, in_key


#: stand-ins the guard uses for a type msgspec cannot decode: any JSON object, any array
_OBJECT: Any = dict[str, Any]
_ARRAY: Any = list[Any]
#: generic origins rebuilt with loosened arguments
_CONTAINERS = frozenset(
    {
        list,
        set,
        frozenset,
        tuple,
        dict,
        Sequence,
        Mapping,
        Collection,
        typing.get_origin(typing.MutableSequence[int]),
        typing.get_origin(typing.MutableMapping[str, int]),
        typing.get_origin(typing.AbstractSet[int]),
        typing.get_origin(typing.MutableSet[int]),
    }
)


def _decodable(tp: Any) -> bool:
    try:
        msgspec.json.Decoder(tp)
    except Exception:  # TypeError for an unsupported type; NameError for an unresolved one
        return False
    return True


def _loosen(tp: Any, busy: set[Any]) -> Any:
    """``tp`` if msgspec decodes it, else a type msgspec decodes that accepts what ``tp``
    accepts on the wire: a literal of enum members becomes a literal of their values; a union
    of Structs told apart by a literal field becomes a tagged union (the one narrowing: an
    object given for it must carry that field, as a mirror Struct always does); another union
    msgspec cannot tell apart merges its objects into one ``dict[str, Any]`` and its arrays
    into one ``list[Any]``; a class holding such a part is rebuilt around it; what is left
    becomes ``Any``. ``busy`` holds the classes being rebuilt (recursion)."""
    if _decodable(tp):
        return tp
    origin = typing.get_origin(tp)
    args = typing.get_args(tp)
    if origin is Annotated:
        inner = _loosen(args[0], busy)
        annotated = Annotated[(inner, *tp.__metadata__)]  # type: ignore[valid-type]
        return annotated if _decodable(annotated) else inner
    if origin is Literal:
        values = tuple(value.value if isinstance(value, enum.Enum) else value for value in args)
        literal = Literal[values]  # type: ignore[valid-type]
        return literal if _decodable(literal) else Any
    if origin is Union or origin is types.UnionType:
        members = [_loosen(arg, busy) for arg in args]
        for candidate in (members, _tagged(members, busy), _merged(members)):
            union = Union[tuple(candidate)]  # type: ignore[valid-type]  # noqa: UP007
            if _decodable(union):
                return union
        return Any
    if isinstance(tp, typing.NewType):
        return _loosen(tp.__supertype__, busy)
    if origin in _CONTAINERS and args:
        rebuilt = origin[tuple(arg if arg is Ellipsis else _loosen(arg, busy) for arg in args)]
        return rebuilt if _decodable(rebuilt) else _stand_in(tp)
    cls = origin or tp
    if not isinstance(cls, type):
        return Any
    if tp in busy:
        return _stand_in(tp)  # a recursive reference: checked one level less deep
    busy.add(tp)
    try:
        if issubclass(cls, msgspec.Struct):
            rebuilt = _loosened_struct(tp, cls, busy)
        elif typing_extensions.is_typeddict(cls):
            rebuilt = _loosened_typeddict(cls, busy)
        elif issubclass(cls, tuple) and hasattr(cls, "_fields"):  # a NamedTuple
            hints = typing.get_type_hints(cls)
            items = tuple(_loosen(hints[name], busy) for name in cls._fields)
            rebuilt = types.GenericAlias(tuple, items) if items else _ARRAY
        else:
            rebuilt = Any
    except Exception:  # unresolved annotations and the like: the shape alone
        rebuilt = _stand_in(tp)
    finally:
        busy.discard(tp)
    return rebuilt if _decodable(rebuilt) else _stand_in(tp)


def _loosened_struct(
    tp: Any, cls: type[msgspec.Struct], busy: set[Any], tag: tuple[str, str | int] | None = None
) -> Any:
    """A copy of the Struct ``tp`` with its fields loosened; with ``tag`` (wire name, value),
    that literal field becomes the copy's msgspec tag."""
    config = cls.__struct_config__
    fields: list[tuple[str, Any, Any]] = []
    for info in msgspec.structs.fields(tp):  # a generic Struct's with its parameters applied
        if tag is not None and info.encode_name == tag[0]:
            continue
        default = msgspec.NODEFAULT if info.required else None  # never used: only checks
        fields.append(
            (info.name, _loosen(info.type, busy), msgspec.field(default=default, name=info.encode_name))
        )
    return msgspec.defstruct(
        cls.__name__,
        fields,
        kw_only=True,
        tag=config.tag if tag is None else tag[1],
        tag_field=config.tag_field if tag is None else tag[0],
        array_like=config.array_like,
        forbid_unknown_fields=config.forbid_unknown_fields,
    )


def _literal_fields(tp: Any) -> dict[str, str | int]:
    """The fields of Struct ``tp`` typed with one literal value that is also their default
    (how a mirror spells a discriminated union's tag), by wire name."""
    found: dict[str, str | int] = {}
    for info in msgspec.structs.fields(tp):
        values = typing.get_args(info.type) if typing.get_origin(info.type) is Literal else ()
        if len(values) == 1 and type(values[0]) in (str, int) and info.default == values[0]:
            found[info.encode_name] = values[0]
    return found


def _tagged(members: list[Any], busy: set[Any]) -> list[Any]:
    """A union's untagged Structs made tagged Structs, when one literal field (a pydantic
    discriminator's mirror) tells them apart: msgspec then decodes the union exactly."""
    structs = [m for m in members if _is_object(m) and issubclass(typing.get_origin(m) or m, msgspec.Struct)]
    if len(structs) < 2 or any((typing.get_origin(m) or m).__struct_config__.tag_field for m in structs):
        return members
    try:
        literals = [_literal_fields(m) for m in structs]
    except Exception:
        return members
    for name in sorted(set.intersection(*(set(found) for found in literals))):
        values = [found[name] for found in literals]
        if len(set(values)) == len(values) and len({type(v) for v in values}) == 1:
            tags = dict(zip(map(id, structs), values, strict=True))
            return [
                _loosened_struct(m, typing.get_origin(m) or m, busy, (name, tags[id(m)]))
                if id(m) in tags
                else m
                for m in members
            ]
    return members


def _loosened_typeddict(cls: type, busy: set[Any]) -> Any:
    required: frozenset[str] = getattr(cls, "__required_keys__", frozenset())
    fields: dict[str, Any] = {}
    for name, hint in typing.get_type_hints(cls, include_extras=True).items():
        if typing.get_origin(hint) in (Required, NotRequired):
            hint = typing.get_args(hint)[0]
        wrap = Required if name in required else NotRequired
        fields[name] = wrap[_loosen(hint, busy)]
    return typing.TypedDict(cls.__name__, fields)  # type: ignore[operator]


def _is_object(tp: Any) -> bool:
    cls = typing.get_origin(tp) or tp
    if not isinstance(cls, type):
        return False
    if issubclass(cls, msgspec.Struct):
        return not cls.__struct_config__.array_like
    return typing_extensions.is_typeddict(cls) or issubclass(cls, dict) or cls is Mapping


def _is_array(tp: Any) -> bool:
    cls = typing.get_origin(tp) or tp
    if not isinstance(cls, type):
        return False
    if issubclass(cls, msgspec.Struct):
        return cls.__struct_config__.array_like
    return issubclass(cls, list | tuple | set | frozenset) or cls is Sequence


def _stand_in(tp: Any) -> Any:
    return _OBJECT if _is_object(tp) else _ARRAY if _is_array(tp) else Any


def _merged(members: list[Any]) -> list[Any]:
    """A union's members with every object type made one ``dict[str, Any]`` and every array
    type one ``list[Any]``: msgspec decodes a union with at most one of each."""
    out: list[Any] = []
    for member in members:
        kept = _OBJECT if _is_object(member) else _ARRAY if _is_array(member) else member
        if kept not in out:
            out.append(kept)
    return out
