"""``Task.enqueue`` is typed with the task's parameters (ParamSpec): mypy checks producers that
import the task itself. Checked by test_task_typing.py against task_enqueue.mypy.txt; never run.
"""

from __future__ import annotations

from datetime import timedelta
from typing import reveal_type

from sqlalchemy.ext.asyncio import AsyncConnection

from akadze import Akadze

app = Akadze(database_url="postgresql://localhost/typing")


@app.task("mail.send", queue="mail")
async def send(user_id: int, subject: str = "hi") -> str:
    return subject


@app.task("sync.add")
def add(a: int, b: int) -> int:
    return a + b


async def producer(conn: AsyncConnection) -> None:
    reveal_type(send)
    reveal_type(await send.enqueue(user_id=5))
    reveal_type(send.using(session=conn, delay=timedelta(seconds=1)))
    reveal_type(await send.using(session=conn).enqueue(5, subject="x"))
    reveal_type(add)
    # a wrong argument name
    await send.enqueue(user_idd=5)
    # a wrong type
    await send.enqueue(user_id="5")
    # a missing required argument
    await send.enqueue(subject="x")
    # the same through using(...)
    await send.using(session=conn).enqueue(user_id=5, subjectt="x")
    await add.enqueue(a=1, b="2")
