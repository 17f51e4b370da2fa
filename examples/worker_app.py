"""The example worker application: `akadze worker examples.worker_app:app`."""

from __future__ import annotations

import os

from akadze import Akadze

#: constructing the app does not connect, so codegen can import it without a database
app = Akadze(database_url=os.environ.get("AKADZE_DATABASE_URL", "postgresql://localhost/akadze"))
app.include("examples.tasks.mail")
app.include("examples.tasks.reports")
