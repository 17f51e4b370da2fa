"""Names in the generated package: task attributes, task classes, and their collisions."""

from __future__ import annotations

import keyword
from collections.abc import Iterable

from akadze_codegen.problems import CodegenProblem
from akadze_codegen.signature import TaskSignature


def attr_name(task_name: str) -> str:
    """The producer attribute of a task: every character but [A-Za-z0-9_] becomes ``_``.

    A keyword gets a trailing ``_`` (``import`` -> ``import_``); a leading digit gets a
    ``task_`` prefix.
    """
    attr = "".join(c if (c.isascii() and c.isalnum()) or c == "_" else "_" for c in task_name)
    if attr[:1].isdigit():
        attr = f"task_{attr}"
    if keyword.iskeyword(attr) or keyword.issoftkeyword(attr):
        attr = f"{attr}_"
    return attr


def class_name(attr: str) -> str:
    """``mail_send`` -> ``MailSend``: the task's class; its arguments are ``MailSendArgs``."""
    name = "".join(part[:1].upper() + part[1:] for part in attr.split("_") if part)
    return name or "Task"


def check_names(tasks: Iterable[TaskSignature], client_names: Iterable[str]) -> list[CodegenProblem]:
    """Generated names that would collide after sanitising: each is an error with a fix."""
    problems: list[CodegenProblem] = []
    modules = set(client_names)
    taken: dict[tuple[str | None, str], str] = {}
    for task in tasks:
        where = f"{task.client or '__init__'}.py"
        cls = class_name(task.attr)
        for name in (task.attr, cls, f"{cls}Args"):
            other = taken.get((task.client, name))
            if other is not None and other != task.name:
                problems.append(
                    CodegenProblem(
                        task.name,
                        f"tasks {other!r} and {task.name!r} both generate the name {name!r} in {where}",
                        "rename one of the tasks so that the names differ in more than "
                        "punctuation or letter case",
                    )
                )
                break
            taken[(task.client, name)] = task.name
        if task.client is None and task.attr in modules:
            problems.append(
                CodegenProblem(
                    task.name,
                    f"task attribute {task.attr!r} in __init__.py collides with the generated "
                    f"module {task.attr}.py",
                    "rename the task, or register it inside an included module",
                )
            )
        if task.attr.startswith("_"):
            problems.append(
                CodegenProblem(
                    task.name,
                    f"the generated attribute {task.attr!r} would be private",
                    "start the task name with a letter",
                )
            )
    return problems
