"""CliffWalk: the classic 4×12 cliff-walking grid, played by calling a ``move`` tool."""

from __future__ import annotations

import re
from typing import Annotated, Any, Literal

import numpy as np
from pydantic import BeforeValidator

from agentgym.core import ToolEnv
from agentgym.core.tools import ToolCall, ToolResult, tool
from agentgym.core.wrappers import DiscreteView

__all__ = ["CliffWalkEnv", "CliffWalkOracle", "draw_path"]

SHAPE = (4, 12)
START = (3, 0)
GOAL = (3, 11)
CLIFF = frozenset((START[0], col) for col in range(START[1] + 1, GOAL[1]))  # the bottom row between them
DIRECTIONS = ("up", "right", "down", "left")  # Gymnasium's action order 0..3
_DELTAS = {"up": (-1, 0), "right": (0, 1), "down": (1, 0), "left": (0, -1)}
_ALIASES = {
    **{d: d for d in DIRECTIONS},
    **{d[0]: d for d in DIRECTIONS},
    "north": "up",
    "east": "right",
    "south": "down",
    "west": "left",
    "n": "up",
    "e": "right",
    "s": "down",
    "w": "left",
}
# Gymnasium picks a slippery outcome with argmax(cumsum(p) > u); the same float thresholds here
# make seeded slippery runs identical to CliffWalking-v1(is_slippery=True).
_STARTS = [(r, c) for r in range(SHAPE[0]) for c in range(SHAPE[1]) if (r, c) not in CLIFF and (r, c) != GOAL]
_SLIP_THRESHOLDS = np.cumsum([1 / 3] * 3)
_MENU = [ToolCall("move", {"direction": d}).to_text() for d in DIRECTIONS]


def _direction(value: Any) -> Any:
    if isinstance(value, str):
        return _ALIASES.get(value.strip().lower(), value)
    if isinstance(value, int) and not isinstance(value, bool) and 0 <= value < 4:
        return DIRECTIONS[value]
    return value


Direction = Annotated[Literal["up", "right", "down", "left"], BeforeValidator(_direction)]


class CliffWalkEnv(DiscreteView, ToolEnv):
    """CliffWalk: walk along a cliff edge to the goal without falling, using a move tool.

    The grid has 4 rows and 12 columns; positions are ``(row, col)`` with row 0 at the top. The
    agent starts at ``(3, 0)`` (bottom-left); the goal is ``(3, 11)`` (bottom-right); the cells
    ``(3, 1)`` … ``(3, 10)`` between them are the cliff. This is Sutton & Barto's Example 6.6.

    ## Action and observation
    Text: a tool call such as
    ``<tool_call>{"name": "move", "arguments": {"direction": "right"}}</tool_call>``.
    ``direction`` is ``up``/``right``/``down``/``left``; ``u``/``r``/``d``/``l``,
    ``north``/``east``/``south``/``west`` and any case are accepted. Moves into a wall leave the
    agent in place. The observation text ends with the summary ``pos (3,1) · steps 1 · return -1``.

    Through :class:`~agentgym.core.wrappers.DiscreteToolActions`: ``Discrete(4)`` actions in
    Gymnasium's order (0 up, 1 right, 2 down, 3 left) and ``Discrete(48)`` observations,
    ``row * 12 + col`` — the same encoding as Gymnasium's ``CliffWalking-v1``.

    ## Rewards
    ``-1`` per move (component ``step``); ``-100`` for stepping into the cliff (``cliff``); an
    action that cannot be parsed or validated costs ``-1`` (``invalid_action``) and moves nothing.
    The optimal return is ``-13``.

    ## Episode end
    Terminates at the goal (``success``) and — with ``cliff_terminates=True``, the default and
    the classic teaching version — on the cliff, where the agent stays. With
    ``cliff_terminates=False`` the agent is sent back to the start and the episode goes on:
    exactly Gymnasium's ``CliffWalking-v1`` dynamics. Truncates after ``max_episode_steps``
    (100 by default, set at registration; Gymnasium's version has no limit).

    ## Arguments
    - ``cliff_terminates`` (bool, True): whether falling ends the episode.
    - ``is_slippery`` (bool, False): the move goes in the intended direction or one of the two
      perpendicular ones, each with probability 1/3 (as Gymnasium's).
    - ``exploring_starts`` (float, 0): the probability that a reset starts on a cell drawn uniformly
      (seeded) from the 37 that are neither cliff nor goal instead of the start — Sutton & Barto's
      exploring starts (§5.3; ``True`` is 1). A training aid for learners that only improve on what
      they reach: a policy-gradient agent from the fixed start rarely sees the goal. Evaluate without it.
    - ``history`` (int, 0): previous turns kept in each observation.
    - ``render_mode``: ``"ansi"`` (text grid) or ``"rgb_array"`` (a small image).

    ## Version history
    - v0: initial version.
    """

    metadata = {"render_modes": ["ansi", "rgb_array"], "render_fps": 4}
    task = (
        "Walk from the start (row 3, col 0) to the goal (row 3, col 11) on a 4x12 grid. Row 0 is the top. "
        "The cells (3,1) to (3,10) are a cliff: stepping there costs -100. Every move costs -1."
    )
    invalid_action_reward = -1.0

    def __init__(
        self,
        *,
        cliff_terminates: bool = True,
        is_slippery: bool = False,
        exploring_starts: float = 0.0,
        history: int = 0,
        render_mode: str | None = None,
    ) -> None:
        super().__init__(history=history, render_mode=render_mode)
        self.cliff_terminates = bool(cliff_terminates)
        self.is_slippery = bool(is_slippery)
        self.exploring_starts = float(exploring_starts)
        if not 0.0 <= self.exploring_starts <= 1.0:
            raise ValueError(f"exploring_starts is a probability in [0, 1], got {exploring_starts!r}")
        self.pos = START
        self.fell = False

    @tool
    def move(self, direction: Direction) -> ToolResult:
        """Move one cell on the grid.

        Args:
            direction: up, right, down or left.
        """
        if self.is_slippery:  # Gymnasium's rule: intended direction or a perpendicular one
            a = DIRECTIONS.index(direction)
            u = self.np_random.random()
            direction = DIRECTIONS[(a - 1 + int(np.argmax(_SLIP_THRESHOLDS > u))) % 4]
        dr, dc = _DELTAS[direction]
        row = min(max(self.pos[0] + dr, 0), SHAPE[0] - 1)
        col = min(max(self.pos[1] + dc, 0), SHAPE[1] - 1)
        if (row, col) in CLIFF:
            if self.cliff_terminates:
                self.pos, self.fell = (row, col), True
                return ToolResult(f"Moved {direction} into the cliff at ({row},{col}).", {"cliff": -100.0}, True)
            self.pos = START
            return ToolResult(f"Moved {direction} into the cliff; back to the start.", {"cliff": -100.0})
        self.pos = (row, col)
        at_goal = self.pos == GOAL
        return ToolResult(f"Moved {direction} to ({row},{col}).", {"step": -1.0}, at_goal)

    # ----------------------------------------------------------------- ToolEnv hooks

    def reward_bounds(self) -> tuple[float, float]:
        """Per action: at least one move (-1; an unreadable action also costs 1); at worst ``max_calls_per_step``
        falls (-100 each) when a fall sends the agent back, or ``max_calls_per_step - 1`` moves and a fall that
        ends the episode (-103 with 4 calls)."""
        calls = self.max_calls_per_step
        low = -100.0 - (calls - 1) if self.cliff_terminates else -100.0 * calls
        return min(low, self.invalid_action_reward), max(-1.0, self.invalid_action_reward)

    def _reset_task(self, options: dict[str, Any]) -> None:
        if self.is_slippery:
            self.np_random.random()  # Gymnasium draws the start state; keep the streams aligned
        self.pos, self.fell = START, False
        if self.exploring_starts and self.np_random.random() < self.exploring_starts:
            self.pos = _STARTS[int(self.np_random.integers(len(_STARTS)))]

    def summary(self) -> str:
        where = " · fell off the cliff" if self.fell else (" · at the goal" if self.success else "")
        return f"pos ({self.pos[0]},{self.pos[1]}){where} · steps {self.steps} · return {self.episode_return:g}"

    @property
    def success(self) -> bool:
        return self.pos == GOAL

    def state_key(self) -> str:
        return f"pos ({self.pos[0]},{self.pos[1]})"

    def state_keys(self) -> list[str]:
        return [f"pos ({r},{c})" for r in range(SHAPE[0]) for c in range(SHAPE[1])]

    def action_menu(self) -> list[str]:
        return _MENU

    def oracle(self) -> CliffWalkOracle:
        return CliffWalkOracle()

    def render_text(self) -> str:
        rows = []
        for r in range(SHAPE[0]):
            cells = []
            for c in range(SHAPE[1]):
                cells.append("x" if (r, c) == self.pos else "T" if (r, c) == GOAL else "C" if (r, c) in CLIFF else "o")
            rows.append("  ".join(cells))
        return "\n".join(rows) + "\n\n"

    def render(self) -> Any:
        if self.render_mode == "rgb_array":
            return self.render_rgb()
        return super().render()

    def render_rgb(self, cell: int = 16) -> np.ndarray:
        """The grid as an ``(64, 192, 3)`` uint8 image: ground, cliff, goal and agent in flat colours."""
        grid = np.zeros((*SHAPE, 3), dtype=np.uint8)
        grid[:] = (196, 222, 160)
        for cliff in CLIFF:
            grid[cliff] = (90, 70, 60)
        grid[GOAL] = (250, 210, 60)
        grid[self.pos] = (40, 90, 220)
        image = grid.repeat(cell, axis=0).repeat(cell, axis=1)
        image[::cell, :] = image[:, ::cell] = 255  # grid lines
        return image


def draw_path(states: list[int]) -> str:
    """A text picture of a walk given as discrete states (``row * 12 + col``): arrows show each
    move, ``S`` the start, ``G`` the goal, ``C`` the cliff, ``.`` unvisited ground."""
    grid = [["C" if (r, c) in CLIFF else "." for c in range(SHAPE[1])] for r in range(SHAPE[0])]
    arrows = {(-1, 0): "^", (0, 1): ">", (1, 0): "v", (0, -1): "<"}
    for s, s2 in zip(states, states[1:], strict=False):
        (r, c), (r2, c2) = divmod(s, SHAPE[1]), divmod(s2, SHAPE[1])
        grid[r][c] = arrows.get((r2 - r, c2 - c), "o")
    grid[START[0]][START[1]] = "S" if grid[START[0]][START[1]] == "." else grid[START[0]][START[1]]
    grid[GOAL[0]][GOAL[1]] = "G"
    return "\n".join(" ".join(row) for row in grid)


class CliffWalkOracle:
    """The optimal walk (return −13 from the start on the non-slippery grid): climb to row 2, go right to
    column 11, step down. It reads the position from the observation's state line."""

    def predict(self, observation: str, state: Any = None, deterministic: bool = True) -> tuple[str, None]:
        m = re.search(r"State: pos \((\d+),(\d+)\)", observation)
        row, col = (int(m[1]), int(m[2])) if m else START
        if col == SHAPE[1] - 1 or row < 2:
            direction = "down"
        else:
            direction = "right" if row == 2 else "up"
        return _MENU[DIRECTIONS.index(direction)], None
