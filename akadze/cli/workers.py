"""``akadze workers``: the live workers, from their heartbeat rows."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

import typer

from akadze.cli.common import handled, with_conn
from akadze.cli.options import READ, Target, expand_options
from akadze.cli.tables import Output, OutputOption, print_listing, when

if TYPE_CHECKING:
    pass

app = typer.Typer(help="Look at the live workers.", no_args_is_help=True)

#: the keys of ``workers list --output json`` (DESIGN.md §5), besides host and pid
JSON_KEYS = ("id", "name", "host", "pid", "queues", "slots", "started_at", "heartbeat_at", "running")


@app.command("list")
@handled
@expand_options
def list_workers(target: Target = READ, output: OutputOption = Output.TABLE) -> None:
    """Every live worker (heartbeat within its lost_after): id, name, queues, slots, start, last
    heartbeat and the jobs it runs now."""
    from akadze.db.queries import Queries
    from akadze.db.stats import LiveWorker

    application = target.database()

    found: list[LiveWorker] = with_conn(
        application, lambda conn: Queries.live_workers(conn, max_ids=0), read=True
    )
    print_listing(
        output,
        found,
        ("ID", "NAME", "QUEUES", "SLOTS", "STARTED", "HEARTBEAT", "RUNNING"),
        lambda w: (
            w.id,
            w.name,
            ",".join(w.queues),
            str(w.slots),
            when(w.started_at),
            f"{when(w.heartbeat_at)} ({w.heartbeat_age_s:.0f}s ago)",
            str(w.running),
        ),
        document=_document,
        empty="no live worker",
    )


def _document(worker: Any) -> dict[str, Any]:
    import msgspec

    every: dict[str, Any] = msgspec.to_builtins(worker)
    return {key: every[key] for key in JSON_KEYS}
