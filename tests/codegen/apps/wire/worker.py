"""The wire-types app: every task records the arguments it received, as received."""

from __future__ import annotations

import os
from typing import Any

from akadze import Akadze

app = Akadze(database_url=os.environ.get("AKADZE_DATABASE_URL", "postgresql://localhost/codegen"))
app.include("tests.codegen.apps.wire.shipping")
app.include("tests.codegen.apps.wire.billing")
app.include("tests.codegen.apps.wire.kinds")

#: (task name, the keyword arguments a run received)
RECEIVED: list[tuple[str, dict[str, Any]]] = []
