"""Types shared by two included modules, and ones that refer to each other."""

from __future__ import annotations

from typing import Generic, Literal, TypeVar

from pydantic import BaseModel, Field

T = TypeVar("T")


class Money(BaseModel):
    """Used by shipping and by billing: mirrored once (case 21)."""

    cents: int
    currency: str = "EUR"


class Page(BaseModel, Generic[T]):
    """A generic model used with two parametrisations (case 20)."""

    items: list[T]
    total: int = 0


class Node(BaseModel):
    """Recursive (case 19)."""

    value: int
    children: list[Node] = Field(default_factory=list)


class Order(BaseModel):
    """A forward reference to a class defined later (case 19)."""

    lines: list[Line]
    note: Comment | None = None


class Line(BaseModel):
    sku: str
    quantity: int = 1


class Cat(BaseModel):
    kind: Literal["cat"] = "cat"
    lives: int = 9


class Dog(BaseModel):
    kind: Literal["dog"] = "dog"
    good: bool = True


from .comments import Comment  # noqa: E402 (mutual recursion across two modules: case 19)

Order.model_rebuild()
