"""Differential test of the client's guard against the worker's validation (issue 18.10).

For every task of the golden apps and of a set of random models, hypothesis builds argument
values the way a producer holds them (mirror Structs, enums, Decimals, datetimes, IP objects,
plain dicts...), valid and near-valid (a bound crossed by one, a string one too long, a wrong
enum value or tag, a field missing or of another type). For each:

- the guard's verdict: the generated client's ``_encode`` (names, the msgspec guard);
- the worker's verdict: the worker's own codec validating the row the client stores (the
  JSON the client encodes, written with the guard off);

and they must agree. Accepted values must come back as equal typed values (the worker's
decoded arguments, compared with what the producer passed), and the worker's re-encoding of
them must decode to the same values again. One difference is by design and counted apart: a
binary float given for a Decimal, which the worker would take and the guard refuses
(docs/codegen.md).

Examples per target: ``AKADZE_DIFFERENTIAL_EXAMPLES`` (default 15, the CI run). The full run of
docs/codegen.md::

    AKADZE_DIFFERENTIAL_EXAMPLES=300 python -m pytest tests/codegen/test_codegen_differential.py -q -s

prints the counts at the end.
"""

from __future__ import annotations

import dataclasses
import datetime as dt
import decimal
import enum
import importlib
import ipaddress
import os
import pathlib
import random
import re
import sys
import types
import typing
import uuid
import warnings
from collections import Counter
from collections.abc import Iterator, Mapping
from typing import Annotated, Any, Literal, NotRequired, Required

import msgspec
import pydantic
import pytest
from hypothesis import HealthCheck, given, settings, strategies as st

from akadze import Akadze
from akadze.client import InvalidArgsError, RemoteTask, _encoder
from akadze.client.guard_values import Constraints, Discriminator
from akadze_codegen.discover import build_manifest, load_app
from akadze_codegen.emit import render
from akadze_codegen.write import write
from tests.codegen.checkers import GOLDEN

EXAMPLES = int(os.environ.get("AKADZE_DIFFERENTIAL_EXAMPLES", "15"))
COUNTS: Counter[str] = Counter()

GOLDEN_APPS = {
    "wire": "tests.codegen.apps.wire.worker:app",
    "registration": "tests.codegen.apps.registration.worker:app",
}


# -- the targets: (client task, worker task) pairs ---------------------------------------------


def _client_tasks(package: str) -> dict[str, RemoteTask[Any]]:
    root = importlib.import_module(package)
    modules = [root] + [importlib.import_module(f"{package}.{name}") for name in _submodules(root)]
    found: dict[str, RemoteTask[Any]] = {}
    for module in modules:
        for value in vars(module).values():
            if isinstance(value, RemoteTask):
                found[value.name] = value
    return found


def _submodules(root: types.ModuleType) -> list[str]:
    import pkgutil

    return [m.name for m in pkgutil.iter_modules(root.__path__) if not m.name.startswith("_")]


@pytest.fixture(scope="module", autouse=True)
def _golden_on_path() -> Iterator[None]:
    sys.path.insert(0, str(GOLDEN))
    yield
    sys.path.remove(str(GOLDEN))
    if EXAMPLES:
        print("\ndifferential counts:", dict(sorted(COUNTS.items())))


def _golden_targets() -> list[tuple[str, str]]:
    targets = []
    for package, app_path in GOLDEN_APPS.items():
        app = load_app(app_path)
        targets += [(package, name) for name in sorted(app.tasks)]
    return targets


# -- random models (a seeded generator: the same models on every run) ---------------------------

_FIELD_KINDS: list[Any] = [
    int,
    float,
    str,
    bool,
    decimal.Decimal,
    dt.datetime,
    dt.date,
    dt.timedelta,
    uuid.UUID,
    bytes,
    Annotated[int, pydantic.Field(ge=0, le=100)],
    Annotated[int, pydantic.Field(gt=-5, multiple_of=5)],
    Annotated[float, pydantic.Field(gt=0, lt=1)],
    Annotated[str, pydantic.Field(min_length=2, max_length=5)],
    Annotated[str, pydantic.Field(pattern=r"^[a-z]+[0-9]?$")],
    Annotated[decimal.Decimal, pydantic.Field(gt=0, max_digits=6, decimal_places=2)],
    Annotated[decimal.Decimal, pydantic.Field(ge=-10, le=10, decimal_places=1)],
    Annotated[dt.timedelta, pydantic.Field(gt=dt.timedelta(0), le=dt.timedelta(days=1))],
    pydantic.AwareDatetime,
    ipaddress.IPv4Address,
    ipaddress.IPv4Address | ipaddress.IPv6Address,
    ipaddress.IPv4Network,
    pathlib.PurePosixPath,
    Literal["a", "b", 3],
    list[int],
    set[str],
    tuple[int, str],
    dict[str, float],
    dict[int, str],
    int | None,
    str | int,
    Annotated[list[int], pydantic.Field(min_length=1, max_length=3)],
]


class Suit(enum.StrEnum):
    HEARTS = "h"
    SPADES = "s"


class Rank(enum.IntEnum):
    LOW = 1
    HIGH = 13


def _random_models(seed: int) -> tuple[Akadze, list[str]]:
    """An app with a few tasks over random pydantic models (nested, optional, aliased,
    discriminated, extra="forbid"), the same for the same seed."""
    rng = random.Random(seed)
    module = types.ModuleType(f"tests_codegen_random_{seed}")
    sys.modules[module.__name__] = module

    def model(name: str, depth: int) -> type[pydantic.BaseModel]:
        fields: dict[str, Any] = {}
        for i in range(rng.randint(1, 5)):
            kind = (
                rng.choice([*_FIELD_KINDS, Suit, Rank, "nested", "union"])
                if depth < 2
                else rng.choice(_FIELD_KINDS)
            )
            if kind == "nested":
                kind = model(f"{name}N{i}", depth + 1)
            elif kind == "union":
                kind = _tagged_pair(f"{name}U{i}", rng, module)
            alias = f"f{i}Wire" if rng.random() < 0.2 else None
            if rng.random() < 0.3:
                fields[f"f{i}"] = (kind | None, pydantic.Field(default=None, alias=alias))
            else:
                fields[f"f{i}"] = (kind, pydantic.Field(alias=alias))
        extra = rng.choice(["ignore", "forbid"])
        created = pydantic.create_model(  # type: ignore[call-overload]
            name,
            __config__=pydantic.ConfigDict(extra=extra, val_json_bytes="base64", ser_json_bytes="base64"),
            __module__=module.__name__,
            **fields,
        )
        setattr(module, name, created)
        return created  # type: ignore[no-any-return]

    app = Akadze(database_url="postgresql://localhost/never-connected")
    names = []
    for t in range(4):
        top = model(f"R{seed}T{t}", 0)
        params = [inspect_param("arg", top)]
        if rng.random() < 0.5:
            params.append(inspect_param("extra", rng.choice(_FIELD_KINDS)))
        name = f"random.s{seed}.t{t}"
        app.register(_task_function(params), name=name)
        names.append(name)
    return app, names


def _tagged_pair(name: str, rng: random.Random, module: types.ModuleType) -> Any:
    """A discriminated union of two models; the tag has a default in one, none in the other."""
    a = pydantic.create_model(  # type: ignore[call-overload]
        f"{name}A",
        __module__=module.__name__,
        kind=(Literal["a"], "a"),
        size=(Annotated[int, pydantic.Field(ge=1)], ...),
    )
    b = pydantic.create_model(  # type: ignore[call-overload]
        f"{name}B", __module__=module.__name__, kind=(Literal["b"], ...), label=(str, ...)
    )
    setattr(module, f"{name}A", a)
    setattr(module, f"{name}B", b)
    return Annotated[a | b, pydantic.Field(discriminator="kind")]


def inspect_param(name: str, annotation: Any) -> Any:
    import inspect

    return inspect.Parameter(name, inspect.Parameter.KEYWORD_ONLY, annotation=annotation)


def _task_function(params: list[Any]) -> Any:
    import inspect

    def task(**kwargs: Any) -> None:
        return None

    task.__signature__ = inspect.Signature(params)  # type: ignore[attr-defined]
    task.__annotations__ = {p.name: p.annotation for p in params}
    return task


RANDOM_SEEDS = list(range(6))
_RANDOM: dict[int, tuple[Akadze, dict[str, RemoteTask[Any]]]] = {}


def _random_target(seed: int, tmp_root: pathlib.Path) -> tuple[Akadze, dict[str, RemoteTask[Any]]]:
    if seed not in _RANDOM:
        app, _ = _random_models(seed)
        package = f"random_clients_{seed}"
        write(tmp_root / package, render(build_manifest(app, f"tests:random{seed}")))
        sys.path.insert(0, str(tmp_root))
        try:
            _RANDOM[seed] = (app, _client_tasks(package))
        finally:
            sys.path.remove(str(tmp_root))
    return _RANDOM[seed]


# -- values as a producer holds them, from the mirror's annotations -------------------------------

_TEXT = st.text(st.characters(blacklist_categories=("Cs",), blacklist_characters="\x00"), max_size=8)
_JSON = st.recursive(
    st.none() | st.booleans() | st.integers(-10, 10) | _TEXT,
    lambda inner: st.lists(inner, max_size=3) | st.dictionaries(_TEXT, inner, max_size=3),
    max_leaves=5,
)
#: how deep values nest (a recursive type ends in None, [] or a field left out below it)
_DEEP = 4
#: a value of another type, for a near-valid mutation
_WRONG = st.sampled_from([None, True, 7, 2.5, "x", [], {}])


def _unwrap(tp: Any) -> tuple[Any, list[Any]]:
    metadata: list[Any] = []
    while typing.get_origin(tp) in (Annotated, Required, NotRequired):
        if typing.get_origin(tp) is Annotated:
            metadata += list(tp.__metadata__)
        tp = typing.get_args(tp)[0]
    return tp, metadata


def values(tp: Any, depth: int = 0) -> st.SearchStrategy[Any]:
    """Valid values of the mirror type ``tp``, mostly, and near-valid ones."""
    good = _values(tp, depth)
    if depth >= 3:
        return good
    # one value in eight of another type (whatever its own near-valid variants)
    return st.integers(0, 7).flatmap(lambda roll: _WRONG if roll == 0 else good)


def _bounded_numbers(meta: msgspec.Meta | None, integer: bool) -> st.SearchStrategy[Any]:
    base: st.SearchStrategy[Any] = (
        st.integers(-1000, 1000) if integer else st.floats(-1e6, 1e6, allow_nan=False, allow_infinity=False)
    )
    edges = [
        getattr(meta, k)
        for k in ("gt", "ge", "lt", "le")
        if meta is not None and getattr(meta, k) is not None
    ]
    if not edges:
        return base
    near = st.sampled_from(edges).flatmap(
        lambda e: st.integers(int(e) - 3, int(e) + 3) if integer else st.floats(e - 1, e + 1, allow_nan=False)
    )
    return st.one_of(base, near, near)


def _decimals(c: Constraints | None) -> st.SearchStrategy[Any]:
    base = st.decimals(-(10**6), 10**6, allow_nan=False, allow_infinity=False)
    around = st.integers(-2000, 2000).flatmap(
        lambda n: st.sampled_from(
            [
                decimal.Decimal(n) / 100,
                decimal.Decimal(n) / 1000,
                decimal.Decimal(n),
                decimal.Decimal(n) * 1000,
            ]
        )
    )
    strategy = st.one_of(around, around, base.filter(lambda d: d.is_finite()))
    # a string or an int is how a producer may also give a Decimal (exact)
    return st.one_of(
        strategy,
        strategy.map(str),
        st.integers(-100, 10**7),
        st.floats(-100, 100, allow_nan=False).map(_by_design),
    )


#: ids of the floats drawn for a Decimal in the example being checked (cleared after each)
_FLOATS_FOR_DECIMALS: set[int] = set()


def _by_design(value: float) -> float:
    """A float given for a Decimal: refused by the guard by design (counted apart)."""
    _FLOATS_FOR_DECIMALS.add(id(value))
    return value


def _durations() -> st.SearchStrategy[dt.timedelta]:
    return st.one_of(
        st.timedeltas(dt.timedelta(days=-2), dt.timedelta(days=3)),
        st.sampled_from([dt.timedelta(0), dt.timedelta(days=1), dt.timedelta(days=1, microseconds=1)]),
    )


def _values(tp: Any, depth: int) -> st.SearchStrategy[Any]:
    base, metadata = _unwrap(tp)
    meta = next((m for m in metadata if isinstance(m, msgspec.Meta)), None)
    checks = next((m for m in metadata if isinstance(m, Constraints)), None)
    tagged = next((m for m in metadata if isinstance(m, Discriminator)), None)
    origin, args = typing.get_origin(base), typing.get_args(base)
    if base is typing.Any:
        return _JSON
    if base is type(None):
        return st.none()
    if base is msgspec.UnsetType:
        return st.just(msgspec.UNSET)
    if base is bool:
        return st.booleans()
    if base is int:
        return _bounded_numbers(meta, True)
    if base is float:
        return st.one_of(_bounded_numbers(meta, False), st.integers(-5, 5))
    if base is str:
        if meta is not None and meta.pattern is not None:
            return st.one_of(
                st.from_regex(meta.pattern, fullmatch=True).filter(lambda s: "\x00" not in s), _TEXT
            )
        if meta is not None and (meta.min_length is not None or meta.max_length is not None):
            low = max(0, (meta.min_length or 0) - 1)
            return st.text(
                st.characters(codec="ascii", blacklist_characters="\x00"),
                min_size=low,
                max_size=(meta.max_length or 6) + 1,
            )
        return _TEXT
    if base is bytes:
        return st.binary(max_size=8)
    if base is decimal.Decimal:
        return _decimals(checks)
    if base is dt.datetime:
        aware = st.datetimes(timezones=st.sampled_from([dt.UTC, dt.timezone(dt.timedelta(hours=2))]))
        return st.one_of(aware, st.datetimes())
    if base is dt.date:
        return st.dates()
    if base is dt.time:
        return st.times()
    if base is dt.timedelta:
        return _durations()
    if base is uuid.UUID:
        return st.uuids()
    if isinstance(base, typing.NewType):
        return _values(base.__supertype__, depth)
    if origin is Literal:
        plain = [a.value if isinstance(a, enum.Enum) else a for a in args]
        return st.one_of(st.sampled_from(list(args)), st.sampled_from(plain), st.sampled_from(["zz", 99]))
    if origin in (typing.Union, types.UnionType):
        if depth > _DEEP and type(None) in args:
            return st.none()  # recursion ends here
        if tagged is not None:
            return st.one_of(*(_values(a, depth + 1) for a in args), _tag_mixups(args, tagged.field, depth))
        return st.one_of(*(_union_member(a, args, depth) for a in args))
    if isinstance(base, type) and issubclass(base, enum.Enum):
        members = list(base)
        return st.one_of(
            st.sampled_from(members), st.sampled_from([m.value for m in members]), st.just("nope")
        )
    if isinstance(base, type) and issubclass(base, ipaddress._BaseAddress | ipaddress._BaseNetwork):
        return _ips(base)
    if isinstance(base, type) and issubclass(base, pathlib.PurePath):
        return st.builds(pathlib.PurePosixPath, st.from_regex(r"/[a-z]{1,5}(/[a-z]{1,5})?", fullmatch=True))
    if origin in (list, set, frozenset) or (
        origin is not None and getattr(origin, "__name__", "") == "Sequence"
    ):
        if depth > _DEEP:
            return st.just([])  # recursion ends here
        low = meta.min_length if meta is not None and meta.min_length is not None else 0
        high = (meta.max_length + 1) if meta is not None and meta.max_length is not None else 3
        item = values(args[0], depth + 1)
        made = st.lists(item, min_size=max(0, low - 1), max_size=high)
        if origin in (set, frozenset):
            return made.map(lambda xs: _as_set(xs, origin))
        return made
    if origin is tuple:
        if len(args) == 2 and args[1] is Ellipsis:
            return st.lists(values(args[0], depth + 1), max_size=3).map(tuple)
        return st.tuples(*(values(a, depth + 1) for a in args))
    if origin in (dict, Mapping) or origin is getattr(typing, "Mapping", None):
        return st.dictionaries(_keys(args[0]), values(args[1], depth + 1), max_size=3)
    if isinstance(origin or base, type) and issubclass(origin or base, msgspec.Struct):
        return _structs(base, depth)
    if isinstance(base, type) and issubclass(base, tuple) and hasattr(base, "_fields"):
        hints = typing.get_type_hints(base, include_extras=True)
        return st.builds(base, *(values(hints[n], depth + 1) for n in base._fields))
    if typing_is_typeddict(base):
        return _typeddicts(base, depth)
    raise NotImplementedError(f"no strategy for {tp!r}")


def typing_is_typeddict(tp: Any) -> bool:
    import typing_extensions

    return typing_extensions.is_typeddict(tp)


def _as_set(items: list[Any], origin: Any) -> Any:
    try:
        return origin(items)
    except TypeError:  # unhashable items (a near-valid list inside): as a list
        return items


def _keys(tp: Any) -> st.SearchStrategy[Any]:
    base, _ = _unwrap(tp)
    if base is int:
        return st.integers(-50, 50)
    if base is uuid.UUID:
        return st.uuids()
    if isinstance(base, type) and issubclass(base, enum.Enum):
        return st.sampled_from(list(base))
    return _TEXT


def _ips(base: type) -> st.SearchStrategy[Any]:
    if issubclass(base, ipaddress._BaseNetwork):
        version = 4 if base is ipaddress.IPv4Network else 6
        nets = st.ip_addresses(v=version).map(lambda a: ipaddress.ip_network(f"{a}/{a.max_prefixlen}"))
        return st.one_of(nets, nets.map(str), st.just("10.0.0.1/8"))
    version = 4 if base is ipaddress.IPv4Address else 6
    addresses = st.ip_addresses(v=version)
    return st.one_of(addresses, addresses.map(str), st.just("999.0.0.1"), st.just("::1"))


def _union_member(member: Any, members: tuple[Any, ...], depth: int) -> st.SearchStrategy[Any]:
    # ``str | IPv4Address``: the address (or its string) rather than any text
    if member is str and any(
        isinstance(m, type) and issubclass(m, ipaddress._BaseAddress | ipaddress._BaseNetwork)
        for m in members
    ):
        return st.nothing()
    return _values(member, depth + 1)


def _structs(tp: Any, depth: int) -> st.SearchStrategy[Any]:
    cls = typing.get_origin(tp) or tp
    fields = msgspec.structs.fields(tp)
    kwargs: dict[str, st.SearchStrategy[Any]] = {}
    for info in fields:
        if not info.required and depth > _DEEP:
            kwargs[info.name] = st.just(msgspec.UNSET)  # recursion ends here
            continue
        strategy = values(info.type, depth + 1) if depth < 3 else _values(info.type, depth + 1)
        if not info.required:
            strategy = (
                st.one_of(st.just(msgspec.UNSET), strategy) if info.default is msgspec.UNSET else strategy
            )
        kwargs[info.name] = strategy
    built = st.fixed_dictionaries(kwargs).map(lambda kw: cls(**kw))
    as_dict = st.fixed_dictionaries({info.encode_name: kwargs[info.name] for info in fields}).map(
        lambda d: {k: v for k, v in d.items() if v is not msgspec.UNSET}
    )
    # near-valid: a required field left out, an unknown field added
    missing = as_dict.flatmap(
        lambda d: st.sampled_from(sorted(d) or [""]).map(lambda k: {x: y for x, y in d.items() if x != k})
    )
    unknown = as_dict.map(lambda d: {**d, "unknownField": 1})
    return st.one_of(built, built, built, as_dict, missing, unknown)


def _tag_mixups(members: tuple[Any, ...], field: str, depth: int) -> st.SearchStrategy[Any]:
    """Near-valid members of a discriminated union: a variant's fields under another tag, or
    none."""
    dicts = []
    for member in members:
        if isinstance(typing.get_origin(member) or member, type) and issubclass(
            typing.get_origin(member) or member, msgspec.Struct
        ):
            dicts.append(_structs(member, depth + 1).filter(lambda v: isinstance(v, dict)))
    if not dicts:
        return st.nothing()
    tags = st.sampled_from(["a", "b", "cat", "dog", "wallet", "card", "other", None])
    return st.tuples(st.one_of(*dicts), tags).map(
        lambda pair: (
            {**pair[0], field: pair[1]}
            if pair[1] is not None
            else {k: v for k, v in pair[0].items() if k != field}
        )
    )


def _typeddicts(cls: Any, depth: int) -> st.SearchStrategy[Any]:
    hints = typing.get_type_hints(cls, include_extras=True)
    required = getattr(cls, "__required_keys__", frozenset())
    fixed = {k: values(v, depth + 1) for k, v in hints.items() if k in required}
    optional = {k: values(v, depth + 1) for k, v in hints.items() if k not in required}
    return st.fixed_dictionaries(fixed, optional=optional)


def arguments(task: RemoteTask[Any]) -> st.SearchStrategy[dict[str, Any]]:
    args_type = task._guard._args_type
    return _typeddicts(args_type, 0)


# -- the comparison -------------------------------------------------------------------------------


def _guard_verdict(task: RemoteTask[Any], arguments: dict[str, Any]) -> str | None:
    """None if the client would write the row, else why not."""
    try:
        task._encode(arguments)
    except (InvalidArgsError, TypeError) as exc:
        return f"{type(exc).__name__}: {exc}"
    return None


def _worker_verdict(
    app: Akadze, name: str, payload: bytes, *, strict: bool = False
) -> tuple[str | None, Any]:
    codec = app.tasks[name].codec
    try:
        with warnings.catch_warnings():
            # pydantic's IPv4Address(True) warns (bool.__int__) before it takes a JSON true
            warnings.simplefilter("ignore", DeprecationWarning)
            return None, codec.adapter.validate_json(payload, strict=strict)
    except pydantic.ValidationError as exc:
        return str(exc).splitlines()[1:3].__str__(), None


def _has_by_design(value: Any) -> bool:
    if type(value) is float and id(value) in _FLOATS_FOR_DECIMALS:
        return True
    if isinstance(value, dict):
        return any(_has_by_design(v) for v in value.values())
    if isinstance(value, list | tuple | set | frozenset):
        return any(_has_by_design(v) for v in value)
    if isinstance(value, msgspec.Struct):
        return any(_has_by_design(getattr(value, f)) for f in value.__struct_fields__)
    return False


def same(client: Any, worker: Any) -> bool:
    """Whether the worker's typed value is what the producer passed."""
    if client is msgspec.UNSET:
        return True
    if isinstance(worker, pydantic.RootModel):
        return same(client, worker.root)
    if isinstance(worker, pydantic.BaseModel) or (
        dataclasses.is_dataclass(worker) and not isinstance(worker, type)
    ):
        wire = _wire_view(worker)
        if isinstance(client, msgspec.Struct):
            given = {
                info.encode_name: getattr(client, info.name)
                for info in msgspec.structs.fields(client)
                if getattr(client, info.name) is not msgspec.UNSET
            }
        elif isinstance(client, dict):
            given = client
        else:
            return False
        return all(key in wire and same(value, wire[key]) for key, value in given.items() if key in wire)
    if isinstance(worker, enum.Enum):
        return (client.value if isinstance(client, enum.Enum) else client) == worker.value
    if isinstance(worker, pathlib.PurePath):
        return type(worker)(str(client)) == worker
    if isinstance(worker, ipaddress._BaseAddress | ipaddress._BaseNetwork):
        return str(client) == str(worker)
    if isinstance(worker, dict):
        if not isinstance(client, dict) or len(client) != len(worker):
            return False
        keyed = {_key(k): v for k, v in worker.items()}
        return all(_key(k) in keyed and same(v, keyed[_key(k)]) for k, v in client.items())
    if isinstance(worker, list | tuple):
        return (
            isinstance(client, list | tuple)
            and len(client) == len(worker)
            and all(same(a, b) for a, b in zip(client, worker, strict=True))
        )
    if isinstance(worker, set | frozenset):
        return isinstance(client, set | frozenset | list) and len(set(map(_key, client))) == len(worker)
    if isinstance(worker, decimal.Decimal):
        return decimal.Decimal(str(client)) == worker
    if isinstance(worker, float) and type(client) in (int, float):
        return float(client) == worker
    if isinstance(worker, dt.datetime) and isinstance(client, dt.datetime):
        return client == worker and (client.tzinfo is None) == (worker.tzinfo is None)
    return (bool(client == worker) and type(client) is type(worker)) or (
        isinstance(client, enum.Enum) and client.value == worker
    )


def _key(key: Any) -> Any:
    return key.value if isinstance(key, enum.Enum) else str(key)


def _wire_view(obj: Any) -> dict[str, Any]:
    """A model's or dataclass's values by the keys validation reads."""
    from akadze.codec.wirekeys import _field_key

    fields = (
        type(obj).model_fields
        if isinstance(obj, pydantic.BaseModel)
        else (
            getattr(type(obj), "__pydantic_fields__", None) or {f.name: None for f in dataclasses.fields(obj)}
        )
    )
    return {_field_key(name, info): getattr(obj, name) for name, info in fields.items() if hasattr(obj, name)}


def _check(app: Akadze, task: RemoteTask[Any], arguments: dict[str, Any]) -> None:
    try:
        _compare(app, task, arguments)
    finally:
        _FLOATS_FOR_DECIMALS.clear()


def _compare(app: Akadze, task: RemoteTask[Any], arguments: dict[str, Any]) -> None:
    by_design = _has_by_design(arguments)
    guard = _guard_verdict(task, arguments)
    try:
        payload = _encoder.encode(arguments)
    except (TypeError, UnicodeEncodeError):
        COUNTS["not encodable (both refuse)"] += 1
        assert guard is not None
        return
    worker, decoded = _worker_verdict(app, task.name, payload)
    if by_design or (worker is None and guard is not None and "got `float`: a float cannot" in guard):
        COUNTS["float for a Decimal (refused by design)"] += 1
        assert guard is not None, "the guard took a float for a Decimal"
        return
    # a value of another JSON type that pydantic converts ("5" or true for an int, 1 for a
    # bool, an int for an IP address): the guard checks JSON types strictly, by design
    mismatch = re.search(r"Expected `([^`]+)`, got `([^`]+)`", guard or "")
    if worker is None and mismatch is not None:
        COUNTS[f"converted by the worker, refused by the strict guard: {mismatch[2]} for {mismatch[1]}"] += 1
        return
    if worker is None and _worker_verdict(app, task.name, payload, strict=True)[0] is not None:
        COUNTS["converted by the worker, refused by the strict guard: lax only"] += 1
        assert guard is not None, (
            f"{task.name}: the guard took a value only lax validation takes: {payload!r}"
        )
        return
    assert (guard is None) == (worker is None), (
        f"{task.name}: guard {'accepts' if guard is None else 'refuses'} ({guard}), worker "
        f"{'accepts' if worker is None else 'refuses'} ({worker}); row {payload[:400]!r}"
    )
    if guard is not None:
        COUNTS["refused by both"] += 1
        return
    COUNTS["accepted by both"] += 1
    for name, value in arguments.items():
        assert same(value, decoded[name]), f"{task.name}({name}): {value!r} arrived as {decoded[name]!r}"
    if task.name in _NO_WORKER_ROUND_TRIP:
        return
    codec = app.tasks[task.name].codec
    again = codec.decode(codec.encode_validated(decoded))
    assert again == decoded, f"{task.name}: the worker's own round trip changed {decoded!r} to {again!r}"


#: tasks whose decoded arguments the worker cannot write again: a dataclass with an InitVar
#: (``kinds.models``' Settings.seed) keeps no value for it (docs/codegen.md, the job a client
#: inserts)
_NO_WORKER_ROUND_TRIP = frozenset({"kinds.models"})


_SETTINGS = settings(
    max_examples=EXAMPLES,
    deadline=None,
    database=None,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.filter_too_much, HealthCheck.data_too_large],
)

_GOLDEN_APPS: dict[str, Akadze] = {}


@pytest.mark.timeout(1800)
@pytest.mark.parametrize(("package", "name"), _golden_targets())
@_SETTINGS
@given(data=st.data())
def test_the_guard_agrees_with_the_worker_on_the_golden_apps(
    package: str, name: str, data: st.DataObject
) -> None:
    app = _GOLDEN_APPS.setdefault(package, load_app(GOLDEN_APPS[package]))
    task = _client_tasks(package)[name]
    _check(app, task, data.draw(arguments(task)))
    COUNTS["golden apps"] += 1


@pytest.mark.timeout(1800)
@pytest.mark.parametrize("seed", RANDOM_SEEDS)
@_SETTINGS
@given(data=st.data())
def test_the_guard_agrees_with_the_worker_on_random_models(
    seed: int, data: st.DataObject, tmp_path_factory: pytest.TempPathFactory
) -> None:
    app, tasks = _random_target(seed, tmp_path_factory.getbasetemp())
    name = data.draw(st.sampled_from(sorted(tasks)))
    _check(app, tasks[name], data.draw(arguments(tasks[name])))
    COUNTS["random models"] += 1
