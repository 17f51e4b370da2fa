"""The wire-types app: every task records the arguments it received (received.RECEIVED)."""

from __future__ import annotations

import os

from akadze import Akadze

app = Akadze(database_url=os.environ.get("AKADZE_DATABASE_URL", "postgresql://localhost/codegen"))
app.include("tests.codegen.apps.wire.shipping")
app.include("tests.codegen.apps.wire.billing")
app.include("tests.codegen.apps.wire.kinds")
app.include("tests.codegen.apps.wire.payments")
