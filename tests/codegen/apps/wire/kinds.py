"""Cases 22-30: enums, bytes, time, numbers, containers, constraints, aliases, model features."""

from __future__ import annotations

import dataclasses
import enum
from dataclasses import InitVar, dataclass, field
from datetime import date, datetime, time, timedelta
from decimal import Decimal
from typing import (
    Annotated,
    ClassVar,
    Literal,
    NamedTuple,
    NewType,
    NotRequired,
    Optional,
    TypeAlias,
    Union,
)
from uuid import UUID

from pydantic import (
    AwareDatetime,
    BaseModel,
    ConfigDict,
    Field,
    NaiveDatetime,
    PrivateAttr,
    RootModel,
    computed_field,
    conint,
    constr,
)
from typing_extensions import TypeAliasType, TypedDict

from akadze import Akadze

from .received import RECEIVED


class Color(str, enum.Enum):  # noqa: UP042 (a str mixin, not StrEnum: case 22)
    RED = "red"
    GREEN = "green"
    CRIMSON = "red"  # an alias (duplicate value)


class Level(enum.IntEnum):
    LOW = 1
    HIGH = 10


class Mode(enum.StrEnum):
    DASHED = "a-b"
    SPACED = "with space"


class Perm(enum.Flag):
    READ = 1
    WRITE = 2


class Blob(BaseModel):
    """bytes inside a model need base64 JSON bytes (case 23)."""

    model_config = ConfigDict(val_json_bytes="base64", ser_json_bytes="base64")
    data: bytes


class Price(BaseModel):
    """Decimal constraints in a strict model (case 25)."""

    model_config = ConfigDict(strict=True)
    amount: Decimal = Field(max_digits=8, decimal_places=2)
    id: UUID


class Point(NamedTuple):
    x: int
    y: int


UserId = NewType("UserId", int)
Ids: TypeAlias = list[UserId]
Scores = TypeAliasType("Scores", dict[str, float])


class Labels(RootModel[list[str]]):
    """A RootModel is its root on the wire (case 29)."""


class Base(BaseModel):
    model_config = ConfigDict(extra="forbid")
    name: str
    size: int = 0


class Child(Base):
    """Inheritance that overrides a field's type, and fields a producer never sends (case 29)."""

    size: float = 0.0  # type: ignore[assignment]
    internal: str = Field(default="x", exclude=True)
    _cache: dict[str, int] = PrivateAttr(default_factory=dict)

    @computed_field  # type: ignore[prop-decorator]
    @property
    def label(self) -> str:
        return self.name.upper()


@dataclass(kw_only=True)
class Settings:
    """InitVar, init=False, ClassVar, kw_only (case 30)."""

    VERSION: ClassVar[int] = 2
    name: str
    seed: InitVar[int]
    derived: int = field(init=False, default=0)
    retries: int = 3

    def __post_init__(self, seed: int) -> None:
        self.derived = seed * 2


class Meta(TypedDict, total=False):
    source: str
    weight: float


class TaggedMeta(Meta):
    tag: str
    extra: NotRequired[int]


def register(app: Akadze) -> None:
    @app.task("kinds.enums")
    async def enums(
        color: Color,
        level: Level,
        mode: Mode,
        perm: Perm,
        red: Literal[Color.RED],
        any_of: Literal["a", 1, True, None],
    ) -> None:
        RECEIVED.append(("kinds.enums", dict(locals())))

    @app.task("kinds.times")
    async def times(
        blob: Blob,
        raw: bytes,
        aware: AwareDatetime,
        naive: NaiveDatetime,
        day: date,
        at: time,
        wait: timedelta,
        when: datetime,
    ) -> None:
        RECEIVED.append(("kinds.times", dict(locals())))

    @app.task("kinds.numbers")
    async def numbers(
        price: Price,
        plain: Decimal,
        uid: UUID,
        positive: Annotated[int, Field(gt=0)],
        small: conint(ge=1, le=10),  # type: ignore[valid-type]
        code: constr(pattern=r"^[A-Z]{3}$"),  # type: ignore[valid-type]
    ) -> None:
        RECEIVED.append(("kinds.numbers", dict(locals())))

    @app.task("kinds.containers")
    async def containers(
        by_int: dict[int, Point],
        by_uuid: dict[UUID, str],
        by_enum: dict[Level, int],
        unique: set[int],
        frozen: frozenset[str],
        pair: tuple[int, str],
        many: tuple[int, ...],
        point: Point,
    ) -> None:
        RECEIVED.append(("kinds.containers", dict(locals())))

    @app.task("kinds.aliases")
    async def aliases(
        user: UserId,
        ids: Ids,
        scores: Scores,
        either: Optional[Union[int, Union[str, None]]],  # noqa: UP007, UP045 (case 28)
    ) -> None:
        RECEIVED.append(("kinds.aliases", dict(locals())))

    @app.task("kinds.models")
    async def models(labels: Labels, child: Child, settings: Settings, meta: TaggedMeta) -> None:
        RECEIVED.append(("kinds.models", dict(locals())))

    unused = dataclasses
    del unused
