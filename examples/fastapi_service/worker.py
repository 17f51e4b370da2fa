"""The worker side: `akadze worker examples.fastapi_service.worker:app`.

Its tasks live in two modules; billing chains to shipping through the generated client
(``examples/fastapi_service/clients``), typed, without importing the shipping module.
"""

from __future__ import annotations

import os

from akadze import Akadze

#: constructing the app does not connect: codegen imports it without a database
app = Akadze(database_url=os.environ.get("AKADZE_DATABASE_URL", "postgresql://localhost/shop"))
app.include("examples.fastapi_service.tasks.billing")
app.include("examples.fastapi_service.tasks.shipping")
app.include("examples.fastapi_service.tasks.quotes")
