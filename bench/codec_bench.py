"""Micro-benchmark: a model-heavy task signature through akadze's argument codec vs pydantic.

    python -m bench.codec_bench          # a small table
    python -m bench.codec_bench --json   # what `python -m bench` reads

The signature: a nested pydantic model (with a UUID, a Decimal, a datetime and a nested model),
a dataclass, a datetime, a UUID, a Decimal and a list of 20 models.

- akadze: ``build_codec(name, fn)`` from ``akadze/codec/__init__.py``; encode = ``codec.encode(kwargs)``
  (validate the call's arguments with pydantic, then msgspec to JSON text), decode =
  ``codec.decode(text)`` (pydantic validates the JSON back into the declared types).
- pydantic alone: one ``BaseModel`` with the same fields; encode =
  ``Args.model_validate(kwargs).model_dump_json()`` (the same validate-then-serialise work),
  decode = ``Args.model_validate_json(text)``.

Both decode to the declared types (checked before timing). Figures are µs per call, the best of
25 rounds of about 20 ms each, the six operations interleaved in every round (on a shared, noisy
machine the minimum is the least disturbed figure); CPU-bound, single thread.
"""

from __future__ import annotations

import argparse
import dataclasses
import datetime as dt
import json
import sys
import time
from collections.abc import Callable
from decimal import Decimal
from typing import Any
from uuid import UUID

import pydantic


class Address(pydantic.BaseModel):
    street: str
    city: str
    postcode: str
    country: str = "NL"


class Customer(pydantic.BaseModel):
    id: UUID
    name: str
    email: str
    created: dt.datetime
    credit: Decimal
    address: Address
    tags: list[str] = []


class Line(pydantic.BaseModel):
    sku: str
    quantity: int
    unit_price: Decimal
    discount: Decimal | None = None


@dataclasses.dataclass
class Window:
    start: dt.datetime
    end: dt.datetime
    label: str


async def place_order(
    customer: Customer,
    lines: list[Line],
    window: Window,
    due: dt.datetime,
    order_id: UUID,
    total: Decimal,
    note: str | None = None,
) -> None:
    """The task whose arguments are encoded (never run here)."""


class PlaceOrderArgs(pydantic.BaseModel):
    customer: Customer
    lines: list[Line]
    window: Window
    due: dt.datetime
    order_id: UUID
    total: Decimal
    note: str | None = None


def sample_kwargs() -> dict[str, Any]:
    tz = dt.UTC
    lines = [
        Line(
            sku=f"SKU-{n:05d}",
            quantity=n % 7 + 1,
            unit_price=Decimal(f"{n}.{n % 100:02d}"),
            discount=Decimal("0.10") if n % 3 == 0 else None,
        )
        for n in range(20)
    ]
    return {
        "customer": Customer(
            id=UUID("12345678-1234-5678-1234-567812345678"),
            name="Ada Lovelace",
            email="ada@example.org",
            created=dt.datetime(2024, 5, 17, 9, 30, 12, 123456, tzinfo=tz),
            credit=Decimal("1234.56"),
            address=Address(street="Keizersgracht 1", city="Amsterdam", postcode="1015 CJ"),
            tags=["vip", "beta", "newsletter"],
        ),
        "lines": lines,
        "window": Window(
            start=dt.datetime(2024, 6, 1, 8, 0, tzinfo=tz),
            end=dt.datetime(2024, 6, 1, 12, 0, tzinfo=tz),
            label="morning",
        ),
        "due": dt.datetime(2024, 6, 2, 17, 0, tzinfo=tz),
        "order_id": UUID("87654321-4321-8765-4321-876543218765"),
        "total": Decimal("9876.54"),
        "note": "leave at the door",
    }


def _loops_for(fn: Callable[[], Any], target_s: float) -> int:
    """How many calls take about ``target_s``."""
    n = 1
    while True:
        t0 = time.perf_counter()
        for _ in range(n):
            fn()
        took = time.perf_counter() - t0
        if took >= target_s / 4 or n >= 1 << 20:
            return max(1, int(n * target_s / max(took, 1e-9)))
        n *= 2


def _bench(ops: dict[str, Callable[[], Any]], rounds: int, round_s: float) -> dict[str, float]:
    """Best (minimum) µs per call of each op over ``rounds`` rounds, the ops interleaved in every
    round so that machine noise hits all of them alike; the minimum is the figure least
    disturbed by other processes on a shared machine."""
    loops = {name: _loops_for(fn, round_s) for name, fn in ops.items()}
    best = {name: float("inf") for name in ops}
    for _ in range(rounds):
        for name, fn in ops.items():
            n = loops[name]
            t0 = time.perf_counter()
            for _ in range(n):
                fn()
            best[name] = min(best[name], (time.perf_counter() - t0) / n * 1e6)
    return best


def run(rounds: int = 25, round_s: float = 0.02) -> dict[str, Any]:
    try:
        from akadze.codec import build_codec
    except ImportError as exc:
        return {"skipped": f"akadze.codec.build_codec is not importable ({exc})"}

    kwargs = sample_kwargs()
    codec = build_codec("bench.place_order", place_order)

    # correctness first: both come back as the declared types and equal to the input
    back = codec.decode(codec.encode(kwargs))
    assert back == kwargs, "akadze codec round trip changed the arguments"
    assert isinstance(back["window"], Window) and isinstance(back["lines"][0], Line)
    model_back = PlaceOrderArgs.model_validate_json(PlaceOrderArgs.model_validate(kwargs).model_dump_json())
    assert dict(model_back) == kwargs, "pydantic round trip changed the arguments"

    def p_encode() -> str:
        return PlaceOrderArgs.model_validate(kwargs).model_dump_json()

    def a_encode() -> str:
        return codec.encode(kwargs)

    p_text, a_text = p_encode(), a_encode()
    ops: dict[str, Callable[[], Any]] = {
        "pydantic alone/encode": p_encode,
        "pydantic alone/decode": lambda: PlaceOrderArgs.model_validate_json(p_text),
        "pydantic alone/roundtrip": lambda: PlaceOrderArgs.model_validate_json(p_encode()),
        "akadze codec/encode": a_encode,
        "akadze codec/decode": lambda: codec.decode(a_text),
        "akadze codec/roundtrip": lambda: codec.decode(a_encode()),
    }
    best = _bench(ops, rounds, round_s)
    results = {
        name: {
            "encode_us": best[f"{name}/encode"],
            "decode_us": best[f"{name}/decode"],
            "roundtrip_us": best[f"{name}/roundtrip"],
            "bytes": len(text.encode()),
        }
        for name, text in (("pydantic alone", p_text), ("akadze codec", a_text))
    }
    import msgspec

    return {
        "description": (
            "A task signature with a nested pydantic model (UUID, Decimal, datetime, nested "
            "model), a dataclass, a datetime, a UUID, a Decimal and a list of 20 models "
            "(`bench/codec_bench.py`). akadze: `build_codec(...).encode(kwargs)` (pydantic "
            "validation of the call, then msgspec) and `.decode(text)` (pydantic validation "
            "from JSON). pydantic alone: `Args.model_validate(kwargs).model_dump_json()` and "
            "`Args.model_validate_json(text)`. µs per call, the best of 25 interleaved rounds; "
            f"pydantic {pydantic.VERSION}, msgspec {msgspec.__version__}, "
            f"Python {sys.version.split()[0]}."
        ),
        "results": results,
    }


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(prog="python -m bench.codec_bench")
    ap.add_argument("--json", action="store_true")
    args = ap.parse_args(argv)
    out = run()
    if args.json:
        print(json.dumps(out))
        return 0
    if out.get("skipped"):
        print("skipped:", out["skipped"])
        return 0
    print(f"{'codec':<16} {'encode µs':>10} {'decode µs':>10} {'round trip µs':>14} {'bytes':>6}")
    for name, r in out["results"].items():
        print(
            f"{name:<16} {r['encode_us']:>10.1f} {r['decode_us']:>10.1f} "
            f"{r['roundtrip_us']:>14.1f} {r['bytes']:>6}"
        )
    return 0


if __name__ == "__main__":
    sys.exit(main())
