"""The producer-side guard (hard case 27): a generated client checks its arguments with msgspec
against the task's argument TypedDict before it writes a row, so an untyped caller gets the
type or constraint that is wrong, and where, and never the value."""

from __future__ import annotations

import importlib
import logging
import pkgutil
import sys
import types
import uuid
from collections.abc import AsyncIterator, Iterator
from decimal import Decimal
from typing import Annotated, Any, NotRequired, TypedDict

import msgspec
import pytest

import akadze.client
import akadze.client.guard
from akadze.client import InvalidArgsError, RemoteTask
from akadze.errors import ConfigError
from tests.codegen.checkers import GOLDEN, PRODUCER
from tests.support import fetch

SECRET = "hunter2-do-not-log"


@pytest.fixture(scope="module")
def wire() -> Iterator[types.SimpleNamespace]:
    """The golden ``wire`` package's client modules."""
    sys.path.insert(0, str(GOLDEN))
    try:
        from wire import billing, kinds, shipping

        yield types.SimpleNamespace(billing=billing, kinds=kinds, shipping=shipping)
    finally:
        sys.path.remove(str(GOLDEN))


@pytest.fixture(autouse=True)
def guard_on() -> Iterator[None]:
    """Every test starts with the guard on (the default) and leaves it on."""
    akadze.client.configure(validate=True)
    yield
    akadze.client.configure(validate=True)


class Item(msgspec.Struct, kw_only=True):
    """As codegen mirrors a model with constrained fields."""

    sku: Annotated[str, msgspec.Meta(max_length=4)]
    quantity: Annotated[int, msgspec.Meta(gt=0)] | msgspec.UnsetType = msgspec.UNSET


# the functional form: under ``from __future__ import annotations`` a class-syntax TypedDict
# would not see NotRequired
OrderArgs = TypedDict(  # noqa: UP013
    "OrderArgs", {"items": list[Item], "note": NotRequired[Annotated[str, msgspec.Meta(max_length=10)]]}
)


def address(wire: Any, **changes: Any) -> Any:
    fields = {"street": "Main 1", "zip_code": "1011", "house_number": 5, "city": "Amsterdam"}
    return wire.shipping.ShippingAddress(**{**fields, **changes})


def parcel(wire: Any, **changes: Any) -> dict[str, Any]:
    shipping = wire.shipping
    arguments = {
        "to": address(wire),
        "options": shipping.Options(must=None, maybe=2, tags=["fragile"]),
        "pet": shipping.Dog(good=False),
        "cost": shipping.Money(cents=250),
        "required_none": None,
        "optional_none": 3,
    }
    return {**arguments, **changes}


def numbers(wire: Any, **changes: Any) -> dict[str, Any]:
    kinds = wire.kinds
    arguments = {
        "price": kinds.Price(amount=Decimal("1.50"), id=uuid.UUID(int=9)),
        "plain": Decimal("2"),
        "uid": uuid.UUID(int=8),
        "positive": 1,
        "small": 2,
        "code": "XYZ",
    }
    return {**arguments, **changes}


def refused(task: RemoteTask[Any], arguments: dict[str, Any]) -> InvalidArgsError:
    with pytest.raises(InvalidArgsError) as caught:
        task._encode(arguments)
    error = caught.value
    # never chained to msgspec's own error, which may quote the value
    assert error.__cause__ is None and error.__context__ is None
    return error


def remote_tasks(package: str) -> list[RemoteTask[Any]]:
    root = importlib.import_module(package)
    modules = [root] + [
        importlib.import_module(f"{package}.{m.name}") for m in pkgutil.iter_modules(root.__path__)
    ]
    return [value for module in modules for value in vars(module).values() if isinstance(value, RemoteTask)]


class TestBuild:
    @pytest.mark.parametrize(
        ("where", "package"),
        [(GOLDEN, "wire"), (GOLDEN, "registration"), (GOLDEN, "long_names"), (PRODUCER, "clients")],
    )
    def test_every_generated_task_gets_a_guard(
        self, where: Any, package: str, monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
    ) -> None:
        monkeypatch.syspath_prepend(str(where))
        tasks = remote_tasks(package)
        assert tasks
        with caplog.at_level(logging.WARNING, logger="akadze.client"):
            for task in tasks:
                assert task._guard._build() is not False, task.name
        assert caplog.records == []

    def test_types_msgspec_refuses_are_checked_through_an_equivalent(self, wire: Any) -> None:
        """A discriminated union of Structs becomes a msgspec tagged union, a Literal of an enum
        member a literal of its value: still checked, not skipped."""
        kinds, shipping = wire.kinds, wire.shipping
        with pytest.raises(TypeError):
            msgspec.json.Decoder(shipping.ShipParcelArgs)  # Cat | Dog, told apart by `kind`
        with pytest.raises(TypeError):
            msgspec.json.Decoder(kinds.KindsEnumsArgs)  # Literal[Color.RED]
        assert refused(shipping.ship_parcel, parcel(wire, pet={"kind": "fish"})).path == "$.pet.kind"
        assert refused(shipping.ship_parcel, parcel(wire, pet={"kind": "cat", "lives": "9"})).path == (
            "$.pet.lives"
        )
        enums = {
            "color": kinds.Color.GREEN,
            "level": kinds.Level.LOW,
            "mode": kinds.Mode.DASHED,
            "perm": kinds.Perm.WRITE,
            "red": kinds.Color.RED,
            "any_of": 1,
        }
        kinds.kinds_enums._encode(enums)
        assert refused(kinds.kinds_enums, {**enums, "red": kinds.Color.GREEN}).path == "$.red"

    def test_a_guard_that_cannot_be_built_leaves_the_checks_to_the_worker(
        self, wire: Any, monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
    ) -> None:
        def broken(tp: Any, busy: set[Any]) -> Any:
            raise TypeError("no")

        monkeypatch.setattr(akadze.client.guard, "_loosen", broken)
        task: RemoteTask[Any] = RemoteTask(
            "kinds.numbers",
            queue="default",
            priority=0,
            max_attempts=3,
            args_fp="x",
            args_type=wire.kinds.KindsNumbersArgs,
        )
        with caplog.at_level(logging.WARNING, logger="akadze.client"):
            task._encode(numbers(wire, positive=0))
            task._encode(numbers(wire, positive=0))
        (record,) = caplog.records
        assert (
            "'kinds.numbers'" in record.getMessage() and "checked by the worker only" in record.getMessage()
        )


class TestRefusals:
    def test_a_wrong_type_from_an_untyped_caller(self, wire: Any) -> None:
        error = refused(wire.kinds.kinds_numbers, numbers(wire, positive="3"))
        assert str(error) == "task 'kinds.numbers': Expected `int`, got `str` - at `$.positive`"
        assert isinstance(error, ValueError)
        assert (error.task_name, error.problem, error.path) == (
            "kinds.numbers",
            "Expected `int`, got `str`",
            "$.positive",
        )

    def test_the_guard_is_strict(self, wire: Any) -> None:
        """As msgspec's strict mode: a numeric string is no int, and nor is a bool."""
        refused(wire.kinds.kinds_numbers, numbers(wire, small="2"))
        refused(wire.kinds.kinds_numbers, numbers(wire, small=True))

    @pytest.mark.parametrize(
        ("changes", "message"),
        [
            ({"positive": 0}, "Expected `int` >= 1 - at `$.positive`"),  # gt=0
            ({"small": 11}, "Expected `int` <= 10 - at `$.small`"),  # le=10
            ({"small": 0}, "Expected `int` >= 1 - at `$.small`"),  # ge=1
            ({"code": "xyz"}, "Expected `str` matching regex '^[A-Z]{3}$' - at `$.code`"),
        ],
    )
    def test_a_constraint_violation(self, wire: Any, changes: dict[str, Any], message: str) -> None:
        error = refused(wire.kinds.kinds_numbers, numbers(wire, **changes))
        assert str(error) == f"task 'kinds.numbers': {message}"

    def test_a_nested_struct_field_of_the_wrong_type(self, wire: Any) -> None:
        """msgspec Structs do not check their fields when built; the guard reads the JSON, so it
        catches them, by wire name."""
        bad = address(wire, zip_code=1011)
        error = refused(wire.shipping.ship_parcel, parcel(wire, to=bad))
        assert str(error) == "task 'ship.parcel': Expected `str`, got `int` - at `$.to.zipCode`"
        deeper = wire.shipping.Options(must="five")
        assert refused(wire.shipping.ship_parcel, parcel(wire, options=deeper)).path == "$.options.must"

    def test_a_constraint_inside_a_nested_struct(self) -> None:
        task: RemoteTask[OrderArgs] = RemoteTask(
            "orders.place", queue="default", priority=0, max_attempts=3, args_fp="x", args_type=OrderArgs
        )
        task._encode({"items": [Item(sku="ab"), Item(sku="cd", quantity=2)]})
        assert refused(task, {"items": [Item(sku="ab"), Item(sku="abcde")]}).path == "$.items[1].sku"
        assert refused(task, {"items": [Item(sku="ab", quantity=0)]}).path == "$.items[0].quantity"
        error = refused(task, {"items": [], "note": "x" * 11})
        assert str(error) == "task 'orders.place': Expected `str` of length <= 10 - at `$.note`"

    def test_a_bad_dict_key(self, wire: Any) -> None:
        kinds = wire.kinds
        containers = {
            "by_int": {1: kinds.Point(1, 2)},
            "by_uuid": {uuid.UUID(int=3): "x"},
            "by_enum": {kinds.Level.LOW: 1},
            "unique": {1, 2},
            "frozen": frozenset({"a"}),
            "pair": (1, "a"),
            "many": (1, 2, 3),
            "point": kinds.Point(x=5, y=6),
        }
        kinds.kinds_containers._encode(containers)
        error = refused(kinds.kinds_containers, {**containers, "by_enum": {7: 1}})
        assert str(error) == "task 'kinds.containers': Invalid enum value - at `key` in `$.by_enum`"
        assert (error.path, error.in_key) == ("$.by_enum", True)

    def test_argument_names_are_still_checked_first(self, wire: Any) -> None:
        with pytest.raises(TypeError, match="unexpected argument"):
            wire.kinds.kinds_numbers._encode(numbers(wire, positve=1))
        arguments = numbers(wire)
        del arguments["code"]
        with pytest.raises(TypeError, match="missing required argument"):
            wire.kinds.kinds_numbers._encode(arguments)


class TestNoValueInTheMessage:
    @pytest.mark.parametrize(
        "changes",
        [
            {"code": SECRET},  # a pattern
            {"positive": SECRET},  # a type
            {"uid": SECRET},  # a UUID that does not parse
        ],
    )
    def test_numbers(self, wire: Any, changes: dict[str, Any]) -> None:
        error = refused(wire.kinds.kinds_numbers, numbers(wire, **changes))
        assert SECRET not in str(error) and SECRET not in repr(error.args)

    def test_enum_literal_and_tag_values(self, wire: Any) -> None:
        kinds = wire.kinds
        enums = {
            "color": SECRET,
            "level": kinds.Level.LOW,
            "mode": kinds.Mode.DASHED,
            "perm": kinds.Perm.WRITE,
            "red": kinds.Color.RED,
            "any_of": None,
        }
        for arguments in (
            enums,
            {**enums, "color": kinds.Color.RED, "red": SECRET},
            {**enums, "color": kinds.Color.RED, "any_of": SECRET},
        ):
            error = refused(kinds.kinds_enums, arguments)
            assert SECRET not in str(error), str(error)
            assert str(error).startswith("task 'kinds.enums': Invalid enum value - at `$.")
        error = refused(wire.shipping.ship_parcel, parcel(wire, pet={"kind": SECRET}))
        assert str(error) == "task 'ship.parcel': Invalid value - at `$.pet.kind`"


class TestOptOut:
    def test_configure_validate_false_skips_the_guard_but_not_the_names(self, wire: Any) -> None:
        akadze.client.configure(validate=False)
        wire.kinds.kinds_numbers._encode(numbers(wire, positive=0))
        with pytest.raises(TypeError, match="unexpected argument"):
            wire.kinds.kinds_numbers._encode(numbers(wire, positve=1))
        akadze.client.configure(database_url=None)  # other calls leave the setting alone
        wire.kinds.kinds_numbers._encode(numbers(wire, positive=0))
        akadze.client.configure(validate=True)
        refused(wire.kinds.kinds_numbers, numbers(wire, positive=0))

    def test_validate_must_be_a_bool(self) -> None:
        with pytest.raises(ConfigError, match="validate must be True or False"):
            akadze.client.configure(validate="no")  # type: ignore[arg-type]


@pytest.fixture
async def database(database_url: str) -> AsyncIterator[str]:
    akadze.client.configure(database_url=database_url)
    yield database_url
    await akadze.client.dispose()


async def test_a_refused_call_writes_no_row(wire: Any, database: str) -> None:
    kinds = wire.kinds
    with pytest.raises(InvalidArgsError):
        await kinds.kinds_numbers.enqueue(**numbers(wire, positive=0))
    with pytest.raises(InvalidArgsError):
        await kinds.kinds_numbers.enqueue_many([numbers(wire), numbers(wire, code="no")])
    assert await fetch(database, "SELECT id FROM akadze_jobs") == []


async def test_a_valid_call_writes_the_row_it_wrote_without_the_guard(wire: Any, database: str) -> None:
    """The guard only reads: the same call with validate=False writes the same row."""
    calls = [
        (wire.shipping.ship_parcel, parcel(wire)),
        (wire.shipping.ship_parcel, parcel(wire, pet=wire.shipping.Cat(lives=3), optional_none=None)),
        (wire.kinds.kinds_numbers, numbers(wire)),
        (
            wire.billing.billing_invoice,
            {
                "bill_to": wire.billing.BillingAddress(iban="NL00", holder="Ada"),
                "amount": wire.billing.Money(cents=1, currency="USD"),
            },
        ),
    ]
    guarded = [await task.enqueue(**arguments) for task, arguments in calls]
    akadze.client.configure(validate=False)
    unguarded = [await task.enqueue(**arguments) for task, arguments in calls]
    columns = "task, queue, priority, max_attempts, args::text AS args, args_fp, state"
    for mine, theirs in zip(guarded, unguarded, strict=True):
        query = f"SELECT {columns} FROM akadze_jobs WHERE id = $1"
        assert dict((await fetch(database, query, mine.id))[0]) == dict(
            (await fetch(database, query, theirs.id))[0]
        )


async def test_with_the_guard_off_the_worker_still_refuses(wire: Any, database: str, make_app: Any) -> None:
    from akadze.testing import drain

    app = make_app()
    app.include("tests.codegen.apps.wire.kinds")
    akadze.client.configure(validate=False)
    job = await wire.kinds.kinds_numbers.enqueue(**numbers(wire, positive=0))
    await drain(app)
    (row,) = await fetch(database, "SELECT attempt, errors FROM akadze_jobs WHERE id = $1", job.id)
    assert row["attempt"] == 1 and "positive: Input should be greater than 0" in row["errors"]
