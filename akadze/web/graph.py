"""A workflow's graph drawn as inline SVG by the server: no script, no CDN, no build.

Steps are laid out by level, left to right (level 0 waits for nothing; a step sits one level
right of its highest parent), each with its state and a link to its job's page; an edge runs
from each parent to each child. A level of more than LEVEL_STEPS steps is drawn as one node per
task (say "images.resize, 2,000 steps"), with the share of each state as a bar; only the first LEVELS levels
are drawn. The page's table lists the steps themselves. Pure: the layout is a function of the
steps; colours come from the stylesheet (classes), so dark mode applies; every name is escaped.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field

from markupsafe import Markup, escape

from akadze.db.graph import StepView

#: a level of more steps is drawn as one node per task
LEVEL_STEPS = 12
#: levels drawn, at most (a longer chain is drawn to this depth; the table lists every step)
LEVELS = 40
NODE_W, NODE_H = 176, 44
COLUMN_GAP, ROW_GAP, PAD = 56, 12, 8
#: characters of a step's name shown in its node (the whole name is its tooltip)
LABEL_CHARS = 22
#: the order of the states in a group's bar, and their classes
SHARES = ("succeeded", "running", "queued", "waiting", "failed", "cancelled")


@dataclass(slots=True)
class Node:
    """A step, or a level's steps of one task (``job_id`` None)."""

    key: tuple[object, ...]
    level: int
    label: str
    #: the step's state class (waiting apart from queued), or "group"
    kind: str
    job_id: int | None = None
    #: the steps it stands for (1 for a step)
    size: int = 1
    title: str = ""
    #: steps per state (a group's bar)
    shares: dict[str, int] = field(default_factory=dict)
    row: float = 0.0
    x: float = 0.0
    y: float = 0.0


@dataclass(frozen=True, slots=True)
class Drawing:
    """What the page draws: nodes placed, edges between them, and what was left out."""

    nodes: tuple[Node, ...]
    #: (parent node, child node, class) once per pair of nodes
    edges: tuple[tuple[Node, Node, str], ...]
    width: int
    height: int
    #: levels of the workflow, and how many are drawn
    levels: int
    drawn_levels: int
    #: whether some level is drawn as one node per task
    grouped: bool


def state_of(step: StepView) -> str:
    """The step's state as drawn: "waiting" for a queued step parked for its parents."""
    return "waiting" if step.waiting else step.state.value


def layout(steps: Sequence[StepView], level: Mapping[int, int]) -> Drawing:
    """Place ``steps`` (``level``: each one's level, db.graph.levels) by level, left to right;
    within a level, each node near its parents (the mean of their rows) to keep edges short."""
    by_level: dict[int, list[StepView]] = {}
    for step in steps:
        by_level.setdefault(level[step.id], []).append(step)
    depth = max(by_level, default=-1) + 1
    drawn = min(depth, LEVELS)
    node_of: dict[int, Node] = {}
    columns: list[list[Node]] = []
    for n in range(drawn):
        column = _column(n, by_level.get(n, []), node_of)
        for node in column:
            rows = [p.row for p in _parents(node, by_level.get(n, []), node_of)]
            node.row = sum(rows) / len(rows) if rows else 0.0
        column.sort(key=lambda node: (node.row, node.job_id or 0, node.label))
        for row, node in enumerate(column):
            node.row = row
        columns.append(column)
    tallest = max((len(column) for column in columns), default=0)
    for n, column in enumerate(columns):
        offset = (tallest - len(column)) * (NODE_H + ROW_GAP) / 2
        for node in column:
            node.x = PAD + n * (NODE_W + COLUMN_GAP)
            node.y = PAD + offset + node.row * (NODE_H + ROW_GAP)
    edges: dict[tuple[int, int], tuple[Node, Node, str]] = {}
    for step in steps:
        child = node_of.get(step.id)
        for parent_id in step.after_ids:
            parent = node_of.get(parent_id)
            if child is None or parent is None or parent is child:
                continue
            kind = parent.kind if parent.job_id is not None else "group"
            edges.setdefault((id(parent), id(child)), (parent, child, kind))
    width = PAD * 2 + max(drawn, 1) * NODE_W + max(drawn - 1, 0) * COLUMN_GAP
    height = PAD * 2 + max(tallest, 1) * NODE_H + max(tallest - 1, 0) * ROW_GAP
    return Drawing(
        tuple(node for column in columns for node in column),
        tuple(edges.values()),
        width,
        height,
        depth,
        drawn,
        any(len(by_level.get(n, [])) > LEVEL_STEPS for n in range(drawn)),
    )


def _column(n: int, steps: list[StepView], node_of: dict[int, Node]) -> list[Node]:
    """The nodes of level ``n``: one per step, or one per task when the level is wide."""
    if len(steps) <= LEVEL_STEPS:
        column = []
        for step in steps:
            state = state_of(step)
            node = Node(
                ("step", step.id),
                n,
                step.step,
                state,
                step.id,
                title=f"step {step.step}, job {step.id} ({step.task}): {state}",
            )
            node_of[step.id] = node
            column.append(node)
        return column
    by_task: dict[str, list[StepView]] = {}
    for step in steps:
        by_task.setdefault(step.task, []).append(step)
    ranked = sorted(by_task.items(), key=lambda item: (-len(item[1]), item[0]))
    if len(ranked) > LEVEL_STEPS:
        rest = [step for _, group in ranked[LEVEL_STEPS - 1 :] for step in group]
        ranked = [*ranked[: LEVEL_STEPS - 1], ("", rest)]
    column = []
    for task, group in ranked:
        shares: dict[str, int] = {}
        for step in group:
            shares[state_of(step)] = shares.get(state_of(step), 0) + 1
        said = ", ".join(f"{shares[s]:,} {s}" for s in SHARES if s in shares)
        name = task or "other tasks"
        node = Node(
            ("group", n, task),
            n,
            name,
            "group",
            size=len(group),
            title=f"{len(group):,} steps of {name}: {said}",
            shares=shares,
        )
        for step in group:
            node_of[step.id] = node
        column.append(node)
    return column


def _parents(node: Node, steps: list[StepView], node_of: dict[int, Node]) -> list[Node]:
    """The nodes of the level before that ``node``'s steps wait for (placed already)."""
    found: dict[int, Node] = {}
    for step in steps:
        if node_of.get(step.id) is not node:
            continue
        for parent_id in step.after_ids:
            parent = node_of.get(parent_id)
            if parent is not None and parent.level == node.level - 1:
                found[id(parent)] = parent
    return list(found.values())


def _label(text: str) -> str:
    return text if len(text) <= LABEL_CHARS else text[: LABEL_CHARS - 1] + "…"


def svg(drawing: Drawing, base: str, title: str) -> Markup:
    """The drawing as an ``<svg>``: a link to each step's job page (``base``: the mount prefix)."""
    parts = [
        f'<svg class="workflow" width="{drawing.width}" height="{drawing.height}" '
        f'viewBox="0 0 {drawing.width} {drawing.height}" role="group" aria-label="{escape(title)}" '
        'xmlns="http://www.w3.org/2000/svg">',
        '<defs><marker id="wf-arrow" viewBox="0 0 8 8" refX="8" refY="4" markerWidth="7" '
        'markerHeight="7" orient="auto"><path class="arrow" d="M0,0 L8,4 L0,8 z"/></marker></defs>',
    ]
    for parent, child, kind in drawing.edges:
        x1, y1 = parent.x + NODE_W, parent.y + NODE_H / 2
        x2, y2 = child.x - 2, child.y + NODE_H / 2
        bend = (x2 - x1) / 2
        parts.append(
            f'<path class="edge e-{kind}" d="M{x1:.1f},{y1:.1f} C{x1 + bend:.1f},{y1:.1f} '
            f'{x2 - bend:.1f},{y2:.1f} {x2:.1f},{y2:.1f}" marker-end="url(#wf-arrow)"/>'
        )
    for node in drawing.nodes:
        parts.append(_node(node, base))
    parts.append("</svg>")
    return Markup("".join(parts))  # noqa: S704 (numbers and escaped text only)


def _node(node: Node, base: str) -> str:
    x, y, title = f"{node.x:.1f}", f"{node.y:.1f}", escape(node.title)
    box = (
        f'<rect class="node n-{node.kind}" x="{x}" y="{y}" width="{NODE_W}" height="{NODE_H}" rx="6"/>'
        f'<text class="step" x="{node.x + 10:.1f}" y="{node.y + 17:.1f}">{escape(_label(node.label))}</text>'
    )
    if node.job_id is None:
        what = f"{node.size:,} steps"
        box += f'<text class="what" x="{node.x + 10:.1f}" y="{node.y + 31:.1f}">{what}</text>' + _shares(node)
        return f'<g class="group" tabindex="0" aria-label="{title}"><title>{title}</title>{box}</g>'
    what = f"{escape(node.kind)} · #{node.job_id}"
    box += f'<text class="what" x="{node.x + 10:.1f}" y="{node.y + 34:.1f}">{what}</text>'
    href = f"{escape(base)}/jobs/{node.job_id}"
    return f'<a href="{href}" class="step s-{node.kind}" aria-label="{title}"><title>{title}</title>{box}</a>'


def _shares(node: Node) -> str:
    """A group's bar: each state's share of its steps, in SHARES order."""
    total = sum(node.shares.values()) or 1
    left, width, parts = node.x + 10, NODE_W - 20, []
    for state in SHARES:
        count = node.shares.get(state, 0)
        if not count:
            continue
        w = width * count / total
        parts.append(
            f'<rect class="share n-{state}" x="{left:.1f}" y="{node.y + 35:.1f}" '
            f'width="{max(w, 1):.1f}" height="5"/>'
        )
        left += w
    return "".join(parts)
