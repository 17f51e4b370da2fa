"""``akadze db``: the schema, and the embedded development server."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated

import typer

from akadze.cli.common import AppArgument, AppOption, UrlOption, database, fail, handled, run

app = typer.Typer(help="The schema, and the embedded development server.", no_args_is_help=True)


@app.command("migrate")
@handled
def migrate(
    app_path: AppArgument = None, app_option: AppOption = None, database_url: UrlOption = None
) -> None:
    """Create or upgrade the schema (idempotent)."""
    application = database(app_path, app_option, database_url)

    async def go() -> list[int]:
        try:
            return await application.migrate()
        finally:
            await application.dispose()

    applied = run(go())
    typer.echo(f"applied migrations {', '.join(map(str, applied))}" if applied else "schema is up to date")


@app.command("sql")
def sql() -> None:
    """Print the schema's SQL (for Alembic or hand-run migrations)."""
    from akadze.db.migrate import render_sql

    typer.echo(render_sql(), nl=False)


@app.command("start")
@handled
def start(
    pgdata: Annotated[Path | None, typer.Option(help="Data directory (or AKADZE_PGDATA).")] = None,
) -> None:
    """Start (or attach to) the embedded development PostgreSQL and print its URL."""
    from akadze import embedded

    typer.echo(embedded.start(pgdata))


@app.command("stop")
@handled
def stop(pgdata: Annotated[Path | None, typer.Option(help="Data directory.")] = None) -> None:
    """Stop the embedded development PostgreSQL."""
    from akadze import embedded

    embedded.stop(pgdata)


@app.command("url")
@handled
def url(pgdata: Annotated[Path | None, typer.Option(help="Data directory.")] = None) -> None:
    """Print the embedded server's URL; exit 1 when it is not running."""
    from akadze import embedded

    found = embedded.status(pgdata)
    if found is None:
        fail(1, "the embedded PostgreSQL is not running (akadze db start)")
    typer.echo(found)
