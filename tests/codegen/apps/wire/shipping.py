"""Cases 16-21 in one module: defaults, aliases, tags, recursion, generics, duplicate names."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Annotated, Generic, TypeVar

from pydantic import AliasChoices, BaseModel, ConfigDict, Field
from pydantic.alias_generators import to_camel

from akadze import Akadze

from .received import RECEIVED
from .shapes import Cat, Dog, Money, Node, Order, Page

T = TypeVar("T")


class Address(BaseModel):
    """One of two classes named Address (case 21); aliases (case 17)."""

    model_config = ConfigDict(alias_generator=to_camel, populate_by_name=True)

    street: str
    zip_code: str
    house_number: int = Field(alias="nr")
    city: str = Field(validation_alias=AliasChoices("city", "town"), serialization_alias="cityName")
    country: str = "NL"


class Options(BaseModel):
    """Requiredness and defaults (case 16)."""

    must: int | None
    maybe: int | None = None
    five: int = 5
    tags: list[str] = Field(default_factory=list)


@dataclass
class Box(Generic[T]):
    """A generic dataclass used with two parametrisations (case 20)."""

    item: T
    label: str = ""


def register(app: Akadze) -> None:
    @app.task("ship.parcel", queue="shipping")
    async def parcel(
        to: Address,
        options: Options,
        pet: Annotated[Cat | Dog, Field(discriminator="kind")],
        cost: Money,
        required_none: int | None,
        optional_none: int | None = None,
        five: int = 5,
    ) -> None:
        RECEIVED.append(("ship.parcel", dict(locals())))

    @app.task("ship.tree", queue="shipping")
    async def tree(root: Node, order: Order) -> None:
        RECEIVED.append(("ship.tree", {"root": root, "order": order}))

    @app.task("ship.pages", queue="shipping")
    async def pages(
        addresses: Page[Address], numbers: Page[int], box: Box[int], boxes: list[Box[str]]
    ) -> None:
        RECEIVED.append(
            ("ship.pages", {"addresses": addresses, "numbers": numbers, "box": box, "boxes": boxes})
        )
