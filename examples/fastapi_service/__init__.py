"""A FastAPI service and its akadze worker (docs/fastapi.md)."""
