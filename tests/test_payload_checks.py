"""One check of encoded arguments for the worker's task.enqueue and generated clients: the same
arguments are refused by both, with the same error."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pytest

from akadze import Akadze, client as client_module
from akadze.client import RemoteTask, configure
from akadze.codec.stored import MAX_JSON_DEPTH
from akadze.errors import ArgsTooDeepError, ArgsTooLargeError


@pytest.fixture
def limit() -> Iterator[int]:
    saved = client_module._database.max_args_bytes
    configure(max_args_bytes=1000)
    yield 1000
    configure(max_args_bytes=saved)


def nested(depth: int) -> Any:
    value: Any = 1
    for _ in range(depth):
        value = [value]
    return value


@pytest.mark.parametrize(
    ("value", "error", "match"),
    [
        ("x" * 2000, ArgsTooLargeError, "over the limit of 1000"),
        ("a\x00b", ValueError, "NUL character"),
        (nested(MAX_JSON_DEPTH + 5), ArgsTooDeepError, "nest"),
    ],
    ids=["too-large", "nul", "too-deep"],
)
async def test_a_task_and_a_generated_client_refuse_the_same_arguments(
    limit: int, value: Any, error: type[Exception], match: str
) -> None:
    app = Akadze("postgresql://localhost/unused", max_args_bytes=limit)

    @app.task("t")
    async def t(value: Any) -> None: ...

    remote: RemoteTask[Any] = RemoteTask(
        "t", queue="default", priority=0, max_attempts=3, args_fp=t.args_fp, args_type=None
    )
    with pytest.raises(error, match=match):
        await t.enqueue(value=value)
    with pytest.raises(error, match=match):
        await remote._enqueue({"value": value})
    await app.dispose()
