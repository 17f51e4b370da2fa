"""What a task declares is judged at registration (issue 33): a return annotation whose values
are not plain JSON is a warning (each run would end in ResultNotJson after its body ran, the
spec's outcome table), and an argument type akadze cannot store is an error that says what it
supports and how to map the type."""

from __future__ import annotations

import enum
import logging
from datetime import datetime
from decimal import Decimal
from typing import Annotated, Any, Literal, NewType, TypedDict

import pydantic
import pytest

from akadze import Akadze
from akadze.codec.jsontypes import non_json
from akadze.errors import ConfigError

URL = "postgresql://u@127.0.0.1:1/db"


class Receipt(pydantic.BaseModel):
    total: int


class Color(enum.StrEnum):
    RED = "red"


class Totals(TypedDict):
    count: int
    at: datetime


class Plain(TypedDict):
    count: int
    names: list[str]


Cents = NewType("Cents", int)


@pytest.mark.parametrize(
    ("annotation", "found"),
    [
        (int, None),
        (str | None, None),
        (Any, None),
        (list[dict[str, float]], None),
        (tuple[int, ...], None),
        (Plain, None),
        (Literal["a", 1, None], None),
        (Annotated[int, "note"], None),
        (Cents, None),
        (dict, None),
        (Receipt, "Receipt"),
        (datetime, "datetime"),
        (Decimal, "Decimal"),
        (Color, "Color"),
        (int | datetime, "datetime"),
        (list[Receipt], "Receipt"),
        (set[int], "set[int]"),
        (dict[int, str], "int keys"),
        (Totals, "datetime"),
        (Literal[Color.RED], "Color"),
    ],
    ids=lambda value: getattr(value, "__name__", None) or repr(value),
)
def test_what_a_return_annotation_allows_that_is_not_json(annotation: Any, found: str | None) -> None:
    assert non_json(annotation) == found


def test_a_task_declared_to_return_a_model_warns_at_registration(caplog: pytest.LogCaptureFixture) -> None:
    app = Akadze(URL)
    with caplog.at_level(logging.WARNING, logger="akadze.app"):

        @app.task("shop.receipt")
        async def receipt(total: int) -> Receipt:
            return Receipt(total=total)

        @app.task("shop.when")
        def when() -> datetime:
            return datetime.now()

        @app.task("shop.count")
        async def count(n: int) -> dict[str, int]:
            return {"n": n}

    lines = [record.getMessage() for record in caplog.records if record.name == "akadze.app"]
    assert len(lines) == 2, lines
    assert lines[0].startswith(
        "task 'shop.receipt' is declared to return Receipt, which is not JSON: a result is stored "
        "only when it is dict (str keys), list, tuple, str, int, float, bool or None, so each run "
        "would end in ResultNotJson after its body ran, and be retried."
    )
    assert lines[1].startswith("task 'shop.when' is declared to return datetime, which is not JSON")


class Thing:
    """A type pydantic cannot build a schema for."""


def test_an_unsupported_argument_type_says_what_akadze_supports() -> None:
    app = Akadze(URL)

    async def paint(n: int, things: list[Thing]) -> None:
        return None

    with pytest.raises(ConfigError) as caught:
        app.register(paint, name="paint")
    message = str(caught.value)
    assert message.startswith("task 'paint': argument 'things' (list[")
    assert "holds Thing, which akadze cannot store as JSON. Arguments may be str, int" in message
    assert "pydantic models, dataclasses, TypedDicts" in message
    assert "build it in the task (docs/tasks.md, Arguments)" in message
    assert "arbitrary_types_allowed" not in message and "pydantic.dev" not in message
