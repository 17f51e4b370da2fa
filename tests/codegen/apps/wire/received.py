"""What the wire app's tasks received: (task name, keyword arguments as the run got them)."""

from __future__ import annotations

from typing import Any

RECEIVED: list[tuple[str, dict[str, Any]]] = []
