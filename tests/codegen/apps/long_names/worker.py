"""Names long enough that naive output would overflow 88 columns everywhere."""

from __future__ import annotations

import os
from typing import Literal

from pydantic import BaseModel, Field

from akadze import Akadze

app = Akadze(database_url=os.environ.get("AKADZE_DATABASE_URL", "postgresql://localhost/codegen"))


class AVeryLongShippingAddressNameForTesting(BaseModel):
    a_rather_long_field_name_for_the_test: dict[str, list[tuple[int, str, float, bool]]] | None = None
    another_quite_long_field: list[dict[str, AVeryLongShippingAddressNameForTesting]] | None


class Other(BaseModel):
    zip_code_with_a_longer_name_here_really_long_yes: AVeryLongShippingAddressNameForTesting = Field(
        alias="zipCodeWithALongerNameHereReallyLongYes"
    )
    zip_code_with_a_longer_name_here_2: AVeryLongShippingAddressNameForTesting | None = Field(
        default=None, alias="zipCode"
    )
    lits: Literal[
        "aaaaaaaaaaaaaaaaaaaaa",
        "bbbbbbbbbbbbbbbbbbbbbbbbbbbb",
        "ccccccccccccccccccccccccc",
        "ddddddddddddddd",
    ] = "ddddddddddddddd"
    many: (
        dict[
            str,
            list[tuple[int, str, float, bool, int, str, float, bool, AVeryLongShippingAddressNameForTesting]],
        ]
        | None
    ) = None
    wide: int | str | float | bool | list[int] | list[str] | dict[str, int] | tuple[int, int, int] | None = 0


@app.task("a.really.quite.long.task.name.that.goes.on.and.on.for.a.while.longer")
async def long_task(
    an_extremely_long_parameter_name_that_nobody_should_write: dict[
        str, list[AVeryLongShippingAddressNameForTesting]
    ]
    | None = None,
    x: int = 1,
) -> None:
    return None


@app.task("short")
async def short(
    o: Other,
    t: tuple[AVeryLongShippingAddressNameForTesting, AVeryLongShippingAddressNameForTesting, Other]
    | None = None,
) -> None:
    return None
