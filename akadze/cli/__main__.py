"""``python -m akadze.cli``: the akadze command."""

from akadze.cli import main

main()
