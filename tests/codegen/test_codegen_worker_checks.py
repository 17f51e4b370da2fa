"""Where the guard and the worker used to part (issue 31 point 6), in the generated Python
clients: ``Json[T]`` mirrored as its text and checked to be JSON; validators and FutureDate-like
types, which no client can check, mapped to their base type and marked in the generated code."""

from __future__ import annotations

import importlib
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from akadze.client import InvalidArgsError
from akadze_codegen import render_files
from akadze_codegen.discover import build_manifest, load_app
from akadze_codegen.write import write

APP = "tests.codegen.apps.producers.worker:app"


@pytest.fixture(scope="module")
def orders(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Any]:
    out = tmp_path_factory.mktemp("point6") / "pyclients_point6"
    write(out, render_files(out, build_manifest(load_app(APP), APP)))
    sys.path.insert(0, str(out.parent))
    try:
        yield importlib.import_module("pyclients_point6.orders")
    finally:
        sys.path.remove(str(out.parent))


def test_the_manifest_records_what_only_the_worker_checks() -> None:
    manifest = build_manifest(load_app(APP), APP)
    stats = next(t for t in manifest.tasks if t.name == "orders.stats")
    params = {p.name: p for p in stats.params}
    assert params["ids"].type.__class__.__name__ == "Json"
    assert params["due"].checks == ["a date in the future when the job runs"]
    postcode = next(d for d in manifest.types if d.name == "Postcode")
    assert postcode.fields[0].checks == ["validator dutch"]  # type: ignore[union-attr]


def test_the_generated_code_marks_them_and_takes_json_text(orders: Any) -> None:
    source = Path(orders.__file__).read_text()
    types = (Path(orders.__file__).parent / "_types.py").read_text()
    assert "ids: _t.Annotated[str, _rt.JsonText()]" in source
    assert "# the worker also checks: a date in the future when the job runs (the client cannot)" in source
    assert "# the worker also checks: validator dutch (the client cannot)" in types


def test_the_guard_checks_json_text_holds_json(orders: Any) -> None:
    task = orders.orders_stats
    good = {
        "ids": "[1, 2]",
        "post": orders.Postcode(code="1011NL"),
        "due": __import__("datetime").date(2099, 1, 1),
    }
    task._encode(good)
    with pytest.raises(InvalidArgsError) as info:
        task._encode({**good, "ids": "[1, 2"})
    assert info.value.path == "$.ids" and "JSON" in str(info.value)
    with pytest.raises(InvalidArgsError):
        task._encode({**good, "ids": [1, 2]})  # the parsed value is what the worker cannot read
