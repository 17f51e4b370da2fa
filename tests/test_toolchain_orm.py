"""complete_tx() with the ORM: an AsyncSession bound to the block's connection (issue 17, point 6;
documented in docs/fastapi.md and docs/outcomes.md)."""

from __future__ import annotations

import pytest
from sqlalchemy import Integer, Text, select
from sqlalchemy.ext.asyncio import AsyncSession
from sqlalchemy.orm import DeclarativeBase, Mapped, mapped_column

from akadze import Akadze, JobState, current
from akadze.errors import LostOwnershipError
from akadze.testing import drain
from tests.support import execute, fetch, module_database


@pytest.fixture
def database_url(request: pytest.FixtureRequest, server_url: str, template_db: str) -> str:
    return module_database(request, server_url, template_db)


class Base(DeclarativeBase):
    pass


class Note(Base):
    __tablename__ = "notes"
    id: Mapped[int] = mapped_column(Integer, primary_key=True)
    text: Mapped[str] = mapped_column(Text)


@pytest.fixture
async def notes(app: Akadze) -> Akadze:
    async with app.engine.begin() as conn:
        await conn.run_sync(Base.metadata.create_all)
    return app


async def test_orm_writes_commit_with_the_outcome(notes: Akadze, database_url: str) -> None:
    app = notes

    @app.task("note.write")
    async def write(n: int) -> None:
        async with current().complete_tx() as conn:
            session = AsyncSession(bind=conn)
            session.add(Note(id=n, text=f"note {n}"))
            await session.flush()
            found = (await session.execute(select(Note.text).where(Note.id == n))).scalar_one()
            assert found == f"note {n}"

    job = await write.enqueue(n=1)
    assert await drain(app) == 1
    done = await app.get_job(job.id)
    assert done is not None and done.state is JobState.SUCCEEDED
    assert [tuple(r) for r in await fetch(database_url, "SELECT id, text FROM notes")] == [(1, "note 1")]


async def test_an_error_after_a_flush_rolls_back_the_orm_writes_with_the_outcome(
    notes: Akadze, database_url: str
) -> None:
    app = notes

    @app.task("note.fail", max_attempts=1)
    async def fail(n: int) -> None:
        async with current().complete_tx() as conn:
            session = AsyncSession(bind=conn)
            session.add(Note(id=n, text="never"))
            await session.flush()
            raise RuntimeError("after the flush")

    job = await fail.enqueue(n=2)
    await drain(app)
    done = await app.get_job(job.id)
    assert done is not None and done.state is JobState.FAILED
    assert await fetch(database_url, "SELECT id FROM notes") == []


async def test_a_rescued_run_rolls_back_its_orm_writes(notes: Akadze, database_url: str) -> None:
    app = notes
    raised: list[BaseException] = []

    @app.task("note.late", max_attempts=1)
    async def late(n: int) -> None:
        try:
            async with current().complete_tx() as conn:
                session = AsyncSession(bind=conn)
                session.add(Note(id=n, text="late"))
                await session.flush()
                # meanwhile another worker rescued the job: its run counter moved on
                await execute(
                    database_url, f"UPDATE akadze_jobs SET run = run + 1 WHERE id = {current().job.id}"
                )
        except LostOwnershipError as exc:
            raised.append(exc)
            raise

    await late.enqueue(n=3)
    await drain(app)
    assert len(raised) == 1
    assert await fetch(database_url, "SELECT id FROM notes") == []
