"""Mail tasks: rich argument types arrive as themselves."""

from __future__ import annotations

import enum
from dataclasses import dataclass
from datetime import datetime
from uuid import UUID

from pydantic import BaseModel

from akadze import Akadze, Retry


class Template(enum.StrEnum):
    WELCOME = "welcome"
    RECEIPT = "receipt"


class Recipient(BaseModel):
    user_id: int
    email: str
    name: str | None = None


@dataclass
class Tracking:
    campaign: UUID
    sent_after: datetime


#: what the example "sent", for the demo's printout (a real task would call a mail API)
OUTBOX: list[str] = []


def register(app: Akadze) -> None:
    @app.task("mail.send", queue="mail", max_attempts=5)
    async def send(
        to: Recipient, template: Template, tracking: Tracking | None = None, flaky: bool = False
    ) -> dict[str, str]:
        assert isinstance(to, Recipient) and isinstance(template, Template)
        if flaky and len(OUTBOX) == 0:
            OUTBOX.append("(vendor timeout)")
            raise Retry(reason="vendor timed out")
        OUTBOX.append(f"{template.value} -> {to.email}")
        return {"template": template.value}
