"""Mutually recursive with shapes.Order across modules (case 19)."""

from __future__ import annotations

from typing import TYPE_CHECKING

from pydantic import BaseModel

if TYPE_CHECKING:
    from .shapes import Order


class Comment(BaseModel):
    text: str
    about: Order | None = None


from .shapes import Order  # noqa: E402 (resolved once both modules exist)

Comment.model_rebuild()
