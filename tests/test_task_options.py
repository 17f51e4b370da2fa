"""One definition of a task's options behind app.task, app.register and app.periodic."""

from __future__ import annotations

import dataclasses
from datetime import timedelta

import pytest

from akadze import Akadze
from akadze.errors import ConfigError
from akadze.task import TaskOptionArgs, TaskOptions


def test_the_keyword_options_are_exactly_the_fields_of_task_options() -> None:
    assert set(TaskOptionArgs.__annotations__) == {field.name for field in dataclasses.fields(TaskOptions)}


def test_task_register_and_periodic_take_the_same_options() -> None:
    app = Akadze("postgresql://localhost/unused")
    every = {
        "queue": "q",
        "max_attempts": 5,
        "timeout": timedelta(seconds=3),
        "priority": 2,
        "backoff": lambda attempt: timedelta(seconds=attempt),
        "unknown_args": "ignore",
    }

    async def body() -> None: ...

    declared = app.task("a", **every)(body)  # type: ignore[arg-type]
    registered = app.register(body, name="b", **every)  # type: ignore[arg-type]
    periodic = app.periodic("c", every=timedelta(minutes=1), **every)(body)  # type: ignore[arg-type]
    assert declared.options == registered.options == periodic.options == TaskOptions(**every)  # type: ignore[arg-type]


@pytest.mark.parametrize("declare", ["task", "register", "periodic"])
def test_an_unknown_option_is_one_clear_error_naming_it(declare: str) -> None:
    app = Akadze("postgresql://localhost/unused")

    async def body() -> None: ...

    with pytest.raises(ConfigError, match=r"task 't': unknown option\(s\) 'queu'; the options are backoff, "):
        if declare == "task":
            app.task("t", queu="x")(body)  # type: ignore[call-arg]
        elif declare == "register":
            app.register(body, name="t", queu="x")  # type: ignore[call-arg]
        else:
            app.periodic("t", every=timedelta(minutes=1), queu="x")(body)  # type: ignore[call-arg]
    assert app.tasks == {}
