"""The app of the TypeScript client tests."""

from akadze import Akadze

app = Akadze(database_url="postgresql://localhost/unused")
app.include("tests.codegen.apps.producers.orders")
