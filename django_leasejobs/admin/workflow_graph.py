"""A workflow run's graph as SVG text, drawn on the server: no JavaScript, nothing fetched.

Steps are laid out by depth, in columns from left to right: a step with no parent is in the
first column, every other step one column right of its deepest parent (the topological layers),
so every edge points rightwards. Within a column the steps are ordered by where their parents
sit (the mean of their rows, then the step's own order), which keeps most edges short.

As in :mod:`.svg`, the markup carries no colour: each step gets the class of its state
(``leasejobs-step-succeeded``...), the admin's style sheet colours it with the theme's
variables, and the state is also written in the box, so it reads without colour. Every text
that comes from a row (step names, links) is escaped.

A run may hold thousands of steps (a group of 10,000 members, a chain of 1,000): a column
shows at most ``MAX_PER_COLUMN`` steps and one box counting the rest, at most ``MAX_COLUMNS``
columns are drawn and one box counts the steps further right, and edges to steps not drawn are
left out; the table under the graph lists the steps.
"""

from __future__ import annotations

from collections.abc import Hashable, Sequence
from dataclasses import dataclass, field
from html import escape

from .display import truncated

BOX_WIDTH, BOX_HEIGHT = 150, 40
COLUMN_GAP, ROW_GAP = 50, 14
MARGIN = 10
MAX_PER_COLUMN = 30
"""Steps drawn per column; past it, one box says how many more the column holds."""
MAX_COLUMNS = 40
"""Columns drawn; past it (a long chain), one last box says how many steps lie further."""
MAX_LABEL = 22
"""Characters of a step's name in its box (the title tooltip has the whole name)."""


@dataclass(frozen=True)
class Node:
    """One step: its key, its name, its state (the CSS class's suffix and the text in the box),
    its parents' keys, and the page it links to (its job's, or none before it is released)."""

    key: Hashable
    name: str
    state: str
    parents: Sequence[Hashable] = field(default_factory=tuple)
    href: str | None = None


def depths(nodes: Sequence[Node]) -> dict[Hashable, int]:
    """Each step's column: 0 without parents, else one more than its deepest parent.

    Kahn's order over the edges, so a long chain costs one pass, not a recursion per step.
    A parent that is not among ``nodes`` is ignored; steps on a cycle (the engine never makes
    one) land in the column after the deepest step placed, rather than looping.
    """
    known = {node.key for node in nodes}
    parents = {node.key: [p for p in dict.fromkeys(node.parents) if p in known] for node in nodes}
    children: dict[Hashable, list[Hashable]] = {node.key: [] for node in nodes}
    waiting = {}
    for key, mine in parents.items():
        waiting[key] = len(mine)
        for parent in mine:
            children[parent].append(key)
    found: dict[Hashable, int] = {}
    ready = [node.key for node in nodes if waiting[node.key] == 0]
    while ready:
        key = ready.pop()
        found[key] = max((found[p] + 1 for p in parents[key]), default=0)
        for child in children[key]:
            waiting[child] -= 1
            if waiting[child] == 0:
                ready.append(child)
    last = max(found.values(), default=-1)
    for node in nodes:
        found.setdefault(node.key, last + 1)
    return found


@dataclass(frozen=True)
class Placed:
    node: Node | None
    """None: the box that counts a column's steps not drawn."""
    column: int
    row: int
    hidden: int = 0

    @property
    def x(self) -> int:
        return MARGIN + self.column * (BOX_WIDTH + COLUMN_GAP)

    @property
    def y(self) -> int:
        return MARGIN + self.row * (BOX_HEIGHT + ROW_GAP)


def layout(nodes: Sequence[Node]) -> list[Placed]:
    """Every box to draw: its column, its row, and per crowded column the "N more" box."""
    depth = depths(nodes)
    order = {node.key: index for index, node in enumerate(nodes)}
    columns: dict[int, list[Node]] = {}
    for node in nodes:
        columns.setdefault(depth[node.key], []).append(node)
    row: dict[Hashable, int] = {}
    placed: list[Placed] = []
    ordered = sorted(columns)
    beyond = sum(len(columns[c]) for c in ordered[MAX_COLUMNS - 1 :])
    if len(ordered) > MAX_COLUMNS:
        ordered = ordered[: MAX_COLUMNS - 1]
    for column in ordered:

        def place(node: Node) -> tuple[float, int]:
            rows = [row[p] for p in node.parents if p in row]
            return (sum(rows) / len(rows) if rows else -1.0, order[node.key])

        members = sorted(columns[column], key=place)
        shown = members if len(members) <= MAX_PER_COLUMN else members[: MAX_PER_COLUMN - 1]
        for index, node in enumerate(shown):
            row[node.key] = index
            placed.append(Placed(node, column, index))
        if len(shown) < len(members):
            placed.append(Placed(None, column, len(shown), hidden=len(members) - len(shown)))
    if len(ordered) < len(columns):
        placed.append(Placed(None, len(ordered), 0, hidden=beyond))
    return placed


def _box(box: Placed) -> str:
    x, y = box.x, box.y
    if box.node is None:
        return (
            f'<g class="leasejobs-step leasejobs-step-more"><rect x="{x}" y="{y}" '
            f'width="{BOX_WIDTH}" height="{BOX_HEIGHT}" rx="4"/>'
            f'<text x="{x + 8}" y="{y + 24}">\u2026 {box.hidden} more</text></g>'
        )
    node = box.node
    state, label = escape(node.state), escape(truncated(node.name, MAX_LABEL))
    shape = (
        f'<title>{escape(node.name)}: {state}</title><rect x="{x}" y="{y}" width="{BOX_WIDTH}" '
        f'height="{BOX_HEIGHT}" rx="4"/>'
        f'<text x="{x + 8}" y="{y + 16}" class="leasejobs-step-name">{label}'
        f'</text><text x="{x + 8}" y="{y + 32}" class="leasejobs-step-state">{state}</text>'
    )
    group = f'<g class="leasejobs-step leasejobs-step-{state}">{shape}</g>'
    if node.href is None:
        return group
    return f'<a href="{escape(node.href)}">{group}</a>'


def _edges(placed: Sequence[Placed]) -> list[str]:
    where = {box.node.key: box for box in placed if box.node is not None}
    lines = []
    for child in where.values():
        assert child.node is not None
        for key in dict.fromkeys(child.node.parents):
            parent = where.get(key)
            if parent is None:
                continue
            x1, y1 = parent.x + BOX_WIDTH, parent.y + BOX_HEIGHT / 2
            x2, y2 = child.x, child.y + BOX_HEIGHT / 2
            bend = (x2 - x1) / 2
            lines.append(
                f'<path class="leasejobs-edge" marker-end="url(#leasejobs-arrow)" '
                f'd="M{x1:.1f},{y1:.1f} C{x1 + bend:.1f},{y1:.1f} {x2 - bend:.1f},{y2:.1f} '
                f'{x2:.1f},{y2:.1f}"/>'
            )
    return lines


def render(nodes: Sequence[Node], element_id: str, title: str) -> str:
    """The graph as an ``<svg>`` element (a string of escaped markup), ``role="img"`` with
    ``title`` as its accessible name; an empty run draws an empty picture with its title."""
    placed = layout(nodes)
    columns = max((box.column for box in placed), default=0) + 1
    rows = max((box.row for box in placed), default=0) + 1
    width = 2 * MARGIN + columns * BOX_WIDTH + (columns - 1) * COLUMN_GAP
    height = 2 * MARGIN + rows * BOX_HEIGHT + (rows - 1) * ROW_GAP
    title_id = escape(f"{element_id}-title")
    body = [
        f'<svg xmlns="http://www.w3.org/2000/svg" id="{escape(element_id)}" '
        f'class="leasejobs-graph" viewBox="0 0 {width} {height}" width="{width}" '
        f'height="{height}" role="img" aria-labelledby="{title_id}">',
        f'<title id="{title_id}">{escape(title)}</title>',
        '<defs><marker id="leasejobs-arrow" viewBox="0 0 10 10" refX="10" refY="5" '
        'markerWidth="7" markerHeight="7" orient="auto-start-reverse">'
        '<path d="M0,0 L10,5 L0,10 z" class="leasejobs-arrow"/></marker></defs>',
        *_edges(placed),
        *(_box(box) for box in placed),
        "</svg>",
    ]
    return "\n".join(body)
