"""The protocol core: what every task, learner and application builds on, and which imports none of them.

``tool_env`` (:class:`ToolEnv`, its observation and the task facts it declares), ``tools`` (``@tool`` and the
call types), ``parser`` (the tolerant tool-call parser), ``spaces``, ``wrappers``, ``registration`` (the ids
the task folders declare), ``conformance`` (the tool-env contract), ``episode`` (the episode record and
``episodes.jsonl``'s one writer and reader), ``summary`` (what a set of episodes measured), ``data`` (frozen task
data), ``deadline`` (HTTP calls that end by a deadline). The names below are :mod:`agentgym.core.tool_env`'s.
"""

from agentgym.core.tool_env import (
    MAX_SHOWN_ACTION_CHARS,
    Interpretation,
    ObservationParts,
    RewardWeights,
    TaskInfo,
    ToolEnv,
    Turn,
    parts_of,
    past_turn,
    process_reward_weight,
    recent_turns,
    task_info,
    tools_of,
)

__all__ = [
    "MAX_SHOWN_ACTION_CHARS",
    "Interpretation",
    "ObservationParts",
    "RewardWeights",
    "TaskInfo",
    "ToolEnv",
    "Turn",
    "past_turn",
    "parts_of",
    "process_reward_weight",
    "recent_turns",
    "task_info",
    "tools_of",
]
