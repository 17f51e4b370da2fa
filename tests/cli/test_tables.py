"""akadze/cli/tables.py: print_table aligns a table to the same text as rich's Table did (wide
characters, combining marks, emoji, empty cells), and leaves tables with control characters to
rich; checked over generated tables against rich itself."""

from __future__ import annotations

import random

import pytest

from akadze.cli.tables import _rich_table, print_table

ALPHABET = ["a", "Z", "1", "-", ".", " ", "é", "日", "本", "ß", "Ω", "e\u0301", "😀", "/", "_", "<", "'"]
CONTROL = ["\n", "\t", "\r", "\x1b", "\u200d"]


def tables(seed: int, alphabet: list[str], count: int) -> list[tuple[tuple[str, ...], list[tuple[str, ...]]]]:
    rng = random.Random(seed)
    found = []
    for _ in range(count):
        columns = rng.randint(1, 6)
        header = tuple(
            "".join(rng.choice("ABCDE ") for _ in range(rng.randint(1, 8))).strip() or "H"
            for _ in range(columns)
        )
        rows = [
            tuple("".join(rng.choice(alphabet) for _ in range(rng.randint(0, 12))) for _ in range(columns))
            for _ in range(rng.randint(0, 6))
        ]
        found.append((header, rows))
    return found


@pytest.mark.parametrize(
    ("seed", "alphabet"), [(1, ALPHABET), (2, ALPHABET + CONTROL)], ids=["printable", "with-controls"]
)
def test_print_table_prints_what_richs_table_printed(
    seed: int, alphabet: list[str], capsys: pytest.CaptureFixture[str]
) -> None:
    for header, rows in tables(seed, alphabet, 300):
        print_table(header, rows)
        ours = capsys.readouterr().out
        _rich_table(header, rows)
        assert ours == capsys.readouterr().out, (header, rows)


def test_a_table_is_aligned_by_the_width_a_terminal_shows(capsys: pytest.CaptureFixture[str]) -> None:
    print_table(("ID", "STEP"), [("1", "日本"), ("22", "-")])
    assert capsys.readouterr().out.splitlines() == ["ID  STEP", "1   日本", "22  -"]
