"""A workflow's graph, from its steps to the SVG (akadze.db.graph.levels, akadze.web.graph): pure,
no database. Levels, the layout (a wide level drawn per task, a deep graph cut), and escaping."""

from __future__ import annotations

import re
from datetime import UTC, datetime

from akadze.db.graph import StepView, levels
from akadze.job import JobState
from akadze.web.graph import LEVEL_STEPS, LEVELS, NODE_W, layout, svg
from tests.web.conftest import HOSTILE

NOW = datetime(2026, 1, 1, tzinfo=UTC)


def step(
    job_id: int,
    name: str,
    after: tuple[int, ...] = (),
    *,
    task: str = "t",
    state: str = "queued",
    waiting: bool = False,
) -> StepView:
    return StepView(
        id=job_id,
        step=name,
        task=task,
        queue="default",
        state=JobState(state),
        waiting=waiting,
        deps_left=len(after) if waiting else 0,
        after_failure="cancel",
        attempt=0,
        max_attempts=3,
        cancel_requested=False,
        run_at=NOW,
        started_at=None,
        finished_at=None,
        error_type=None,
        after=tuple(f"s{p}" for p in after),
        after_ids=after,
    )


def diamond() -> list[StepView]:
    """charge -> (ship, mail) -> close, and a late step after close and charge."""
    return [
        step(1, "charge", state="succeeded"),
        step(2, "ship", (1,), state="running"),
        step(3, "mail", (1,), state="failed"),
        step(4, "close", (2, 3), waiting=True),
        step(5, "audit", (1, 4), waiting=True),
    ]


def test_a_steps_level_is_one_more_than_its_highest_parents() -> None:
    assert levels(diamond()) == {1: 0, 2: 1, 3: 1, 4: 2, 5: 3}


def test_levels_ignore_parents_outside_the_steps_and_never_loop() -> None:
    # a parent that is not among the steps (pruned) is ignored; a cycle leaves its steps where they were
    assert levels([step(7, "a", (99,)), step(8, "b", (7,))]) == {7: 0, 8: 1}
    assert levels([step(1, "a", (2,)), step(2, "b", (1,)), step(3, "c")]) == {1: 0, 2: 0, 3: 0}


def test_the_layout_places_levels_left_to_right_and_draws_each_edge_once() -> None:
    steps = diamond()
    drawing = layout(steps, levels(steps))
    x = {node.job_id: node.x for node in drawing.nodes}
    assert x[1] < x[2] == x[3] < x[4] < x[5]
    assert x[2] - x[1] > NODE_W
    pairs = sorted((parent.job_id, child.job_id) for parent, child, _ in drawing.edges)
    assert pairs == [(1, 2), (1, 3), (1, 5), (2, 4), (3, 4), (4, 5)]
    kinds = {(parent.job_id, child.job_id): kind for parent, child, kind in drawing.edges}
    assert kinds[(1, 2)] == "succeeded" and kinds[(3, 4)] == "failed" and kinds[(4, 5)] == "waiting"
    assert (drawing.levels, drawing.drawn_levels, drawing.grouped) == (4, 4, False)


def test_a_wide_level_is_drawn_as_one_node_per_task_with_its_states() -> None:
    """A fan-out of 2,000 steps and its fan-in: three nodes and two edges, not 4,000."""
    fan = [step(1, "start", state="succeeded")]
    fan += [
        step(n, f"resize-{n}", (1,), task="images.resize", state="succeeded" if n % 4 else "failed")
        for n in range(2, 2002)
    ]
    fan += [step(n, f"thumb-{n}", (1,), task="images.thumb", state="running") for n in range(2002, 2012)]
    fan.append(step(3000, "album", tuple(range(2, 2012)), waiting=True))
    drawing = layout(fan, levels(fan))
    assert drawing.grouped
    labels = sorted(node.label for node in drawing.nodes)
    assert labels == ["album", "images.resize", "images.thumb", "start"]
    resize = next(node for node in drawing.nodes if node.label == "images.resize")
    assert resize.job_id is None and resize.size == 2000
    assert resize.shares == {"succeeded": 1500, "failed": 500}
    assert len(drawing.edges) == 4  # start -> each group, each group -> album
    drawn = svg(drawing, "/ops", "workflow 1")
    assert drawn.count("<a ") == 2  # start and album link to their jobs; groups do not
    assert "2,000 steps" in drawn and 'class="share n-failed"' in drawn


def test_a_level_of_many_tasks_keeps_the_biggest_and_gathers_the_rest() -> None:
    many = [step(1, "start")] + [step(n + 2, f"s{n}", (1,), task=f"task.{n:02d}") for n in range(30)]
    drawing = layout(many, levels(many))
    names = [node.label for node in drawing.nodes if node.level == 1]
    assert len(names) == LEVEL_STEPS and "other tasks" in names


def test_a_long_chain_is_drawn_to_a_depth() -> None:
    chain = [step(1, "s1")] + [step(n, f"s{n}", (n - 1,)) for n in range(2, LEVELS + 21)]
    drawing = layout(chain, levels(chain))
    assert (drawing.levels, drawing.drawn_levels) == (LEVELS + 20, LEVELS)
    assert len(drawing.nodes) == LEVELS and len(drawing.edges) == LEVELS - 1


def test_every_step_links_to_its_job_under_the_mount_and_every_name_is_escaped() -> None:
    steps = [step(1, HOSTILE, task=HOSTILE), step(2, "b", (1,), task=HOSTILE)]
    drawn = str(svg(layout(steps, levels(steps)), "/ops", f"workflow {HOSTILE}"))
    assert "<script>" not in drawn
    assert "&lt;script&gt;" in drawn
    assert re.findall(r'href="([^"]+)"', drawn) == ["/ops/jobs/1", "/ops/jobs/2"]
    # the name shown is cut to fit its box; the tooltip holds it whole
    assert "alert(&#39;x&#39;)&lt;/script&gt;&#34;&#39;&amp;" in drawn


def test_a_workflow_without_steps_draws_an_empty_graph() -> None:
    drawing = layout([], {})
    assert drawing.nodes == () and drawing.levels == 0
    assert str(svg(drawing, "", "empty")).startswith("<svg")
