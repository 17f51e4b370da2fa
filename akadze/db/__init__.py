"""Database access: the schema, its migrations and every statement akadze runs."""
