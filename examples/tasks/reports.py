"""Report tasks: two steps chained with complete_tx; the follow-up exists only if step one
committed."""

from __future__ import annotations

from decimal import Decimal

from pydantic import BaseModel
from sqlalchemy import text

from akadze import Akadze, current


class ReportSpec(BaseModel):
    title: str
    total: Decimal


def register(app: Akadze) -> None:
    @app.task("reports.notify")
    async def notify(report_id: int) -> str:
        return f"report {report_id} is ready"

    @app.task("reports.build", timeout=None)
    async def build(report_id: int, spec: ReportSpec) -> None:
        assert isinstance(spec.total, Decimal)
        async with current().complete_tx() as conn:
            await conn.execute(
                text("INSERT INTO example_reports (id, title, total) VALUES (:id, :title, :total)"),
                {"id": report_id, "title": spec.title, "total": spec.total},
            )
            await notify.using(session=conn).enqueue(report_id=report_id)
