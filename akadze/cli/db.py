"""``akadze db``: the schema, and the embedded development server."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated, Any

import typer

from akadze.cli.common import fail, handled, run, with_conn
from akadze.cli.options import DATABASE, Target, expand_options
from akadze.cli.tables import Output, OutputOption, print_json, print_table, when

app = typer.Typer(help="The schema, and the embedded development server.", no_args_is_help=True)


@app.command("migrate")
@handled
@expand_options
def migrate(target: Target = DATABASE) -> None:
    """Create or upgrade the schema (idempotent)."""
    application = target.database()

    async def go() -> list[int]:
        try:
            return await application.migrate()
        finally:
            await application.dispose()

    applied = run(go())
    typer.echo(f"applied migrations {', '.join(map(str, applied))}" if applied else "schema is up to date")


@app.command("status")
@handled
@expand_options
def status(target: Target = DATABASE, output: OutputOption = Output.TABLE) -> None:
    """The migrations applied and pending; exit 1 while some are pending."""
    from akadze.db.migrate import migrations
    from akadze.db.status import SchemaStatus, schema_status

    application = target.database()

    async def read(conn: Any) -> SchemaStatus:
        return await schema_status(conn)

    found = with_conn(application, read)
    applied = {a.version: a for a in found.applied}
    rows: list[dict[str, Any]] = []
    for version in sorted({*applied, *(m.version for m in migrations())}):
        shipped = next((m for m in migrations() if m.version == version), None)
        record = applied.get(version)
        state = "applied" if record and shipped else "pending" if shipped else "newer than this akadze"
        name = shipped.name if shipped else record.name if record else ""
        rows.append(
            {"version": version, "name": name, "state": state, "applied_at": record and record.applied_at}
        )
    if output is Output.JSON:
        print_json(
            {
                "database_version": found.database_version,
                "code_version": found.code_version,
                "pending": [m.version for m in found.pending],
                "migrations": rows,
            }
        )
    else:
        print_table(
            ["VERSION", "NAME", "STATE", "APPLIED_AT"],
            [[f"{r['version']:04d}", r["name"], r["state"], when(r["applied_at"])] for r in rows],
        )
        typer.echo(
            f"schema at version {found.database_version}; this akadze needs version {found.code_version}"
        )
    if found.pending:
        fail(1, f"{len(found.pending)} migration(s) pending: run `akadze db migrate`")


@app.command("revision")
@handled
def revision(
    alembic: Annotated[
        Path,
        typer.Option(
            "--alembic",
            metavar="DIR",
            help="Alembic's versions folder: write a revision there that applies akadze's migrations.",
        ),
    ],
    down_revision: Annotated[
        str | None,
        typer.Option(help="The revision it follows (default: the folder's single head)."),
    ] = None,
) -> None:
    """Write an Alembic revision that applies akadze's pending migrations (docs/schema.md)."""
    from akadze.alembic import write_revision

    try:
        written = write_revision(alembic, down_revision=down_revision)
    except (FileNotFoundError, ValueError) as exc:
        fail(2, f"error: {exc}")
    typer.echo(str(written))


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
