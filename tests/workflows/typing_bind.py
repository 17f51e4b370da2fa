"""``bind`` is typed with the task's parameters, on a registered task, on what ``using(...)``
returns and on a generated client's task. Checked by test_typing.py with mypy; never run."""

from __future__ import annotations

from typing import reveal_type

from registration import mail
from sqlalchemy.ext.asyncio import AsyncConnection

from akadze import Akadze, Workflow

app = Akadze(database_url="postgresql://localhost/typing")


@app.task("mail.send", queue="mail")
async def send(user_id: int, subject: str = "hi") -> str:
    return subject


async def producer(conn: AsyncConnection) -> None:
    wf = Workflow()
    reveal_type(send.bind(user_id=5))
    reveal_type(mail.mail_notify.bind(user_id=5))
    wf.add("a", send.bind(user_id=5))
    wf.add("b", send.using(priority=3).bind(5, subject="x"), after=["a"])
    wf.add("c", mail.mail_notify.bind(user_id=5), after=["a"])
    reveal_type(await wf.enqueue(session=conn))
    # a wrong name
    send.bind(user_idd=5)
    # a wrong type
    send.bind(user_id="5")
    # through using(...)
    send.using(priority=1).bind(user_id=5, subjectt="x")
    # a generated client's task: a wrong name, a wrong type
    mail.mail_notify.bind(user_idd=5)
    mail.mail_notify.bind(user_id="5")
    # an after_failure that is neither "cancel" nor "run"
    wf.add("d", send.bind(user_id=5), after_failure="ignore")
