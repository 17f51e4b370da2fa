"""The trends' charts as inline SVG, drawn here from the numbers: no script, no CDN, no build.
Colours come from the stylesheet (classes), so dark mode applies; every bar and point has a
``<title>`` (its tooltip), and each chart names itself for screen readers (``role="img"``).
Only numbers and times reach the SVG; they are escaped all the same."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from datetime import datetime, tzinfo

from markupsafe import Markup, escape

from akadze.db.trends import STATES, TrendSlot
from akadze.web.render import duration

WIDTH, HEIGHT = 400, 150
LEFT, RIGHT, TOP, BOTTOM = 40, 6, 8, 20
#: x-axis labels per chart, at most
LABELS = 5
#: a line chart of at most this many slots marks each point (with its tooltip)
DOTS = 60


def _frame(
    title: str, body: list[str], top_label: str, slots: Sequence[TrendSlot], label: Callable[[datetime], str]
) -> Markup:
    plot_h = HEIGHT - TOP - BOTTOM
    parts = [
        f'<svg viewBox="0 0 {WIDTH} {HEIGHT}" role="img" aria-label="{escape(title)}" '
        'xmlns="http://www.w3.org/2000/svg">',
        f"<title>{escape(title)}</title>",
        f'<line class="axis" x1="{LEFT}" y1="{TOP + plot_h}" x2="{WIDTH - RIGHT}" y2="{TOP + plot_h}"/>',
        f'<line class="axis" x1="{LEFT}" y1="{TOP}" x2="{WIDTH - RIGHT}" y2="{TOP}"/>',
        f'<text class="tick" x="{LEFT - 4}" y="{TOP + 9}" text-anchor="end">{escape(top_label)}</text>',
        f'<text class="tick" x="{LEFT - 4}" y="{TOP + plot_h}" text-anchor="end">0</text>',
        *body,
    ]
    step = max(1, len(slots) // LABELS)
    width = (WIDTH - LEFT - RIGHT) / max(1, len(slots))
    for n in range(0, len(slots), step):
        x = LEFT + n * width
        parts.append(f'<text class="tick" x="{x:.1f}" y="{HEIGHT - 6}">{escape(label(slots[n].at))}</text>')
    parts.append("</svg>")
    return Markup("".join(parts))  # noqa: S704 (built from numbers and escaped text only)


def bars(
    title: str, slots: Sequence[TrendSlot], states: Sequence[str], label: Callable[[datetime], str]
) -> Markup:
    """Stacked bars per slot of the jobs in ``states`` (each coloured by its class ``s-STATE``)."""
    totals = [sum(getattr(slot, state) for state in states) for slot in slots]
    top = max([*totals, 1])
    plot_h = HEIGHT - TOP - BOTTOM
    width = (WIDTH - LEFT - RIGHT) / max(1, len(slots))
    body = []
    for n, slot in enumerate(slots):
        base = TOP + plot_h
        said = ", ".join(f"{getattr(slot, state)} {state}" for state in states)
        for state in states:
            count = getattr(slot, state)
            if not count:
                continue
            h = plot_h * count / top
            base -= h
            body.append(
                f'<rect class="s-{state}" x="{LEFT + n * width + 0.5:.1f}" y="{base:.1f}" '
                f'width="{max(width - 1, 0.5):.1f}" height="{h:.1f}">'
                f"<title>{escape(label(slot.at))}: {escape(said)}</title></rect>"
            )
    return _frame(title, body, f"{top:,}", slots, label)


def run_times(title: str, slots: Sequence[TrendSlot], label: Callable[[datetime], str]) -> Markup:
    """p50 and p95 run times per slot as two lines (broken where a slot ran nothing)."""
    values = [v for slot in slots for v in (slot.p50, slot.p95) if v is not None]
    top = max([*values, 0.001])
    plot_h = HEIGHT - TOP - BOTTOM
    width = (WIDTH - LEFT - RIGHT) / max(1, len(slots))
    body = []
    for kind in ("p50", "p95"):
        runs: list[list[str]] = [[]]
        for n, slot in enumerate(slots):
            value = getattr(slot, kind)
            if value is None:
                runs.append([])
                continue
            x, y = LEFT + (n + 0.5) * width, TOP + plot_h - plot_h * value / top
            runs[-1].append(f"{x:.1f},{y:.1f}")
            if len(slots) <= DOTS:
                body.append(
                    f'<circle class="{kind}" cx="{x:.1f}" cy="{y:.1f}" r="1.5">'
                    f"<title>{escape(label(slot.at))}: {kind} {escape(duration(value))}</title></circle>"
                )
        body.extend(f'<polyline class="{kind}" points="{" ".join(run)}"/>' for run in runs if len(run) > 1)
    return _frame(title, body, duration(top), slots, label)


def labeller(span_s: float, where: tzinfo) -> Callable[[datetime], str]:
    """How a slot's start reads on the axis, in the page's zone: 14:05 within a day, else Mon 14:00."""
    pattern = "%H:%M" if span_s <= 86_400 else "%a %H:%M"

    def label(at: datetime) -> str:
        return at.astimezone(where).strftime(pattern)

    return label


__all__ = ["STATES", "bars", "labeller", "run_times"]
