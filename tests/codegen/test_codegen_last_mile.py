"""Issue 18, points 2-5, 7 and 8: the guard checks a discriminated union whose tag has no
default, the constraints msgspec cannot express (and the manifest, fingerprint and diff carry
them), refuses a float for a Decimal, takes the Python objects of string-like types; pydantic's
string-like network types map to str; hoisted aliases are named after what they type."""

from __future__ import annotations

import ipaddress
import sys
import types
from collections.abc import AsyncIterator, Iterator
from datetime import timedelta
from decimal import Decimal
from pathlib import PurePosixPath
from typing import Annotated, Any

import msgspec
import pydantic
import pytest

import akadze.client
from akadze import Akadze
from akadze.client import InvalidArgsError, RemoteTask
from akadze.codec import build_codec
from akadze.testing import drain
from akadze_codegen import signature as ir
from akadze_codegen.diff import diff
from akadze_codegen.mirror import Walker
from tests.codegen.apps.wire.received import RECEIVED
from tests.codegen.checkers import GOLDEN
from tests.support import fetch

SECRET_IBAN = "nl00-secret"


@pytest.fixture(scope="module")
def wire() -> Iterator[types.SimpleNamespace]:
    sys.path.insert(0, str(GOLDEN))
    try:
        from wire import _types, kinds, payments

        yield types.SimpleNamespace(payments=payments, kinds=kinds, types=_types)
    finally:
        sys.path.remove(str(GOLDEN))


def refused(task: RemoteTask[Any], arguments: dict[str, Any]) -> InvalidArgsError:
    with pytest.raises(InvalidArgsError) as caught:
        task._encode(arguments)
    assert caught.value.__cause__ is None and caught.value.__context__ is None
    return caught.value


def pay(wire: Any, **changes: Any) -> dict[str, Any]:
    arguments = {
        "payment": wire.payments.Wallet(kind="wallet", iban="NL91ABNA"),
        "amount": Decimal("12.50"),
        "within": timedelta(days=1),
    }
    return {**arguments, **changes}


class TestDiscriminatedUnionWithoutTagDefault:
    """Point 2: a variant whose tag has no default no longer turns the union into any object."""

    def test_the_mirror_carries_the_discriminator(self, wire: Any) -> None:
        source = (GOLDEN / "wire" / "payments.py").read_text()
        assert 'payment: _t.Annotated[Wallet | Card, _rt.Discriminator("kind")]' in source

    def test_a_valid_payment_of_either_kind_passes(self, wire: Any) -> None:
        wire.payments.payments_pay._encode(pay(wire))
        wire.payments.payments_pay._encode(pay(wire, payment=wire.payments.Card(last4="1234")))
        wire.payments.payments_pay._encode(pay(wire, payment={"kind": "card", "last4": "1234"}))

    @pytest.mark.parametrize(
        ("payment", "path"),
        [
            ({"kind": "wallet", "iban": SECRET_IBAN}, "$.payment.iban"),  # breaks the pattern
            ({"iban": "NL91ABNA"}, "$.payment"),  # no tag
            ({"kind": "card", "iban": "NL91ABNA"}, "$.payment"),  # the other variant's tag: no last4
            ({"kind": "cash"}, "$.payment.kind"),
        ],
    )
    def test_what_the_worker_would_fail_is_refused(self, wire: Any, payment: Any, path: str) -> None:
        error = refused(wire.payments.payments_pay, pay(wire, payment=payment))
        assert error.path == path and SECRET_IBAN not in str(error)

    def test_an_optional_discriminated_union_is_checked_too(self, wire: Any) -> None:
        wire.payments.payments_pay._encode(pay(wire, fallback=None))
        assert refused(wire.payments.payments_pay, pay(wire, fallback={"iban": "x"})).path == "$.fallback"


class TestConstraintsMsgspecCannotExpress:
    """Point 3: Decimal and timedelta constraints in the manifest, the fingerprint, diff, the
    mirror's annotation and the guard."""

    def test_the_manifest_carries_them(self) -> None:
        manifest = ir.decode_manifest((GOLDEN / "wire" / "_manifest.json").read_bytes())
        (task,) = [t for t in manifest.tasks if t.name == "payments.pay"]
        params = {p.name: p.type for p in task.params}
        assert params["amount"] == ir.Annotated(
            ir.Prim("decimal"), ir.Constraints(gt="0", max_digits=8, decimal_places=2)
        )
        assert params["within"] == ir.Annotated(ir.Prim("timedelta"), ir.Constraints(gt="0", le="2592000"))

    def test_the_mirror_says_them(self) -> None:
        source = (GOLDEN / "wire" / "payments.py").read_text()
        assert "_rt.Constraints(gt=_decimal.Decimal(0), max_digits=8, decimal_places=2)" in source
        assert "_rt.Constraints(gt=_dt.timedelta(seconds=0), le=_dt.timedelta(days=30))" in source

    @pytest.mark.parametrize(
        ("changes", "problem"),
        [
            ({"amount": Decimal("-1")}, "Expected `decimal` > 0"),
            ({"amount": Decimal("0")}, "Expected `decimal` > 0"),
            ({"amount": Decimal("1.234")}, "Expected `decimal` with at most 2 decimal places"),
            ({"amount": Decimal("123456.789")}, "Expected `decimal` with at most 8 digits"),
            ({"amount": Decimal("1234567")}, "Expected `decimal` with at most 6 digits before the point"),
            ({"within": timedelta(0)}, "Expected `duration` > "),
            ({"within": timedelta(days=31)}, "Expected `duration` <= "),
        ],
    )
    def test_the_guard_checks_them(self, wire: Any, changes: dict[str, Any], problem: str) -> None:
        error = refused(wire.payments.payments_pay, pay(wire, **changes))
        assert error.problem.startswith(problem), error.problem

    def test_values_within_them_pass(self, wire: Any) -> None:
        for amount in (Decimal("0.01"), Decimal("999999.99"), Decimal("1.50"), Decimal("100"), 5):
            wire.payments.payments_pay._encode(pay(wire, amount=amount))
        wire.payments.payments_pay._encode(pay(wire, within=timedelta(days=30)))

    def test_a_nested_decimal_constraint_is_checked(self, wire: Any) -> None:
        price = wire.kinds.Price(amount=Decimal("1.234"), id=__import__("uuid").UUID(int=1))
        arguments = {
            "price": price,
            "plain": Decimal("2"),
            "uid": __import__("uuid").UUID(int=8),
            "positive": 1,
            "small": 2,
            "code": "XYZ",
        }
        assert refused(wire.kinds.kinds_numbers, arguments).path == "$.price.amount"

    def test_the_fingerprint_changes_when_they_tighten(self) -> None:
        def fp(annotation: Any) -> str:
            def task(x: Any) -> None: ...

            task.__annotations__ = {"x": annotation, "return": None}
            return build_codec("t", task).fingerprint

        within = Annotated[timedelta, pydantic.Field(gt=timedelta(0))]
        assert fp(within) != fp(Annotated[timedelta, pydantic.Field(gt=timedelta(seconds=1))])
        assert fp(within) != fp(timedelta)
        digits = Annotated[Decimal, pydantic.Field(max_digits=5)]
        assert fp(digits) != fp(Annotated[Decimal, pydantic.Field(max_digits=4)])
        assert fp(digits) != fp(Annotated[Decimal, pydantic.Field(max_digits=5, decimal_places=1)])
        # nothing else moves: the fingerprint of a task without such constraints is pydantic's
        assert fp(timedelta) == fp(Annotated[timedelta, "doc"])

    @pytest.mark.parametrize(
        ("old", "new", "verdict"),
        [
            (ir.Constraints(gt="0"), ir.Constraints(gt="1"), "BREAKING"),
            (ir.Constraints(gt="1"), ir.Constraints(gt="0.5"), "safe"),
            (ir.Constraints(max_digits=8), ir.Constraints(max_digits=6), "BREAKING"),
            (ir.Constraints(decimal_places=2), ir.Constraints(decimal_places=3), "safe"),
            (None, ir.Constraints(decimal_places=2), "BREAKING"),
        ],
    )
    def test_diff_calls_a_tightened_decimal_constraint_breaking(
        self, old: ir.Constraints | None, new: ir.Constraints | None, verdict: str
    ) -> None:
        def manifest(constraints: ir.Constraints | None) -> ir.Manifest:
            node: ir.TypeNode = ir.Prim("decimal")
            if constraints is not None:
                node = ir.Annotated(node, constraints)
            param = ir.Param(name="amount", type=node, required=True)
            task = ir.TaskSignature("pay", "pay", None, "q", 0, 3, "fp", [param])
            return ir.Manifest(format=ir.FORMAT, app="a:b", modules=[], tasks=[task], types=[])

        (change,) = diff(manifest(old), manifest(new))
        assert change.render().startswith(verdict), change.render()

    def test_diff_sees_a_tightened_duration(self) -> None:
        def manifest(gt: str) -> ir.Manifest:
            node = ir.Annotated(ir.Prim("timedelta"), ir.Constraints(gt=gt))
            param = ir.Param(name="within", type=node, required=True)
            task = ir.TaskSignature("pay", "pay", None, "q", 0, 3, gt, [param])
            return ir.Manifest(format=ir.FORMAT, app="a:b", modules=[], tasks=[task], types=[])

        (change,) = diff(manifest("0"), manifest("60"))
        assert change.verdict == "breaking" and "constraint tightened: gt '0' -> '60'" in change.what


class TestDecimalIsNeverAFloat:
    """Point 8: money must not pass through a binary float."""

    def test_a_float_for_a_decimal_is_refused(self, wire: Any) -> None:
        error = refused(wire.payments.payments_pay, pay(wire, amount=12.1))
        assert error.path == "$.amount" and "got `float`" in error.problem
        kinds = wire.kinds
        arguments = {
            "price": kinds.Price(amount=Decimal("1.50"), id=__import__("uuid").UUID(int=9)),
            "plain": 0.1,
            "uid": __import__("uuid").UUID(int=8),
            "positive": 1,
            "small": 2,
            "code": "XYZ",
        }
        assert refused(kinds.kinds_numbers, arguments).path == "$.plain"

    def test_a_string_or_an_int_is_exact_and_passes(self, wire: Any) -> None:
        wire.payments.payments_pay._encode(pay(wire, amount=12))
        wire.payments.payments_pay._encode(pay(wire, amount="12.10"))


class TestStringLikeTypes:
    """Point 4 (pydantic's string-like network types map to str) and point 7 (the Python
    objects whose JSON form is their str() are taken as they are)."""

    @pytest.mark.parametrize(
        "tp",
        [
            pydantic.EmailStr,
            pydantic.NameEmail,
            pydantic.HttpUrl,
            pydantic.AnyUrl,
            pydantic.PostgresDsn,
            pydantic.RedisDsn,
            pydantic.MongoDsn,
            pydantic.SecretStr,
        ],
    )
    def test_pydantic_string_types_map_to_str(self, tp: Any) -> None:
        walker = Walker({})
        assert walker.walk(tp, "t(x)") == ir.Prim("str") and walker.problems == []

    def test_ip_types_and_paths_are_taken_as_objects_or_strings(self) -> None:
        source = (GOLDEN / "wire" / "payments.py").read_text()
        assert "ip: str | _ipaddress.IPv4Address\n" in source
        assert "peer: str | _ipaddress.IPv4Address | _ipaddress.IPv6Address\n" in source
        assert "network: str | _ipaddress.IPv4Network | _ipaddress.IPv6Network\n" in source
        assert "log: str | _pathlib.PurePath\n" in source

    def test_the_guard_checks_the_string_the_worker_parses(self, wire: Any) -> None:
        audit = wire.payments.payments_audit
        good = {
            "ip": ipaddress.IPv4Address("10.0.0.1"),
            "peer": ipaddress.IPv6Address("::1"),
            "network": ipaddress.IPv4Network("10.0.0.0/8"),
            "log": PurePosixPath("/var/log/x"),
        }
        assert msgspec.json.decode(audit._encode(good)) == {
            "ip": "10.0.0.1",
            "peer": "::1",
            "network": "10.0.0.0/8",
            "log": "/var/log/x",
        }
        audit._encode({**good, "ip": "10.0.0.2", "peer": "10.0.0.3", "network": "::/0"})
        assert refused(audit, {**good, "ip": "999.0.0.1"}).path == "$.ip"
        assert refused(audit, {**good, "ip": ipaddress.IPv6Address("::1")}).path == "$.ip"
        assert refused(audit, {**good, "network": "10.0.0.1/8"}).path == "$.network"  # host bits
        assert refused(audit, {**good, "peer": 7}).path == "$.peer"


@pytest.fixture
async def worker(make_app: Any, database_url: str) -> AsyncIterator[Akadze]:
    app: Akadze = make_app()
    app.include("tests.codegen.apps.wire.payments")
    akadze.client.configure(database_url=database_url)
    RECEIVED.clear()
    yield app
    await akadze.client.dispose()
    RECEIVED.clear()


async def test_the_worker_runs_what_the_guard_passes(wire: Any, worker: Akadze, database_url: str) -> None:
    await wire.payments.payments_pay.enqueue(
        payment=wire.payments.Wallet(kind="wallet", iban="NL91ABNA"),
        amount=Decimal("12.50"),
        within=timedelta(hours=2),
    )
    await wire.payments.payments_audit.enqueue(
        ip=ipaddress.IPv4Address("10.0.0.1"),
        peer="::1",
        network=ipaddress.IPv6Network("2001:db8::/32"),
        log=PurePosixPath("/var/log/x"),
    )
    await drain(worker)
    rows = await fetch(database_url, "SELECT state FROM akadze_jobs")
    assert [r["state"] for r in rows] == ["succeeded", "succeeded"]
    received = dict(RECEIVED)
    assert received["payments.pay"]["amount"] == Decimal("12.50")
    assert received["payments.audit"]["ip"] == ipaddress.IPv4Address("10.0.0.1")
    assert received["payments.audit"]["peer"] == ipaddress.IPv6Address("::1")
    assert str(received["payments.audit"]["log"]) == "/var/log/x"


def test_the_worker_side_enqueue_writes_ip_types_and_paths_as_the_client_does() -> None:
    """The worker's own encoder wrote no IPv4Address or Path (found by the differential test)."""
    from akadze.codec import build_codec

    def audit(ip: ipaddress.IPv4Address, network: ipaddress.IPv6Network, log: PurePosixPath) -> None: ...

    codec = build_codec("payments.audit", audit)
    values = {
        "ip": ipaddress.IPv4Address("10.0.0.1"),
        "network": ipaddress.IPv6Network("2001:db8::/32"),
        "log": PurePosixPath("/var/log/x"),
    }
    row = codec.encode(values)
    assert msgspec.json.decode(row) == {"ip": "10.0.0.1", "network": "2001:db8::/32", "log": "/var/log/x"}
    assert codec.decode(row) == values


def test_aliases_are_named_after_what_they_type() -> None:
    """Point 5: hovers and errors show ``PaymentsPayAmount``, not ``_Alias1``."""
    payments = (GOLDEN / "wire" / "payments.py").read_text()
    types_ = (GOLDEN / "wire" / "_types.py").read_text()
    assert "PaymentsPayAmount: _t.TypeAlias = _t.Annotated[" in payments
    assert "    amount: PaymentsPayAmount\n" in payments
    assert "PriceAmount: _t.TypeAlias = _t.Annotated[" in types_
    assert "_Alias" not in payments + types_
