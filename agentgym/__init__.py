"""agentgym: Gymnasium environments whose actions are tool calls, and trainers that learn on them.

``import agentgym`` registers the ``agentgym/*`` ids::

    import gymnasium as gym
    import agentgym

    env = gym.make("agentgym/CliffWalk-v0")
"""

__version__ = "0.1.0"

from agentgym.core import TaskInfo, ToolEnv, task_info
from agentgym.core.parser import ParseResult, parse_tool_calls
from agentgym.core.registration import register_envs
from agentgym.core.spaces import AnyText
from agentgym.core.tools import Tool, ToolCall, ToolError, ToolResult, tool
from agentgym.core.wrappers import DiscreteToolActions

register_envs()

__all__ = [
    "AnyText",
    "DiscreteToolActions",
    "ParseResult",
    "TaskInfo",
    "Tool",
    "ToolCall",
    "ToolEnv",
    "ToolError",
    "ToolResult",
    "__version__",
    "parse_tool_calls",
    "register_envs",
    "task_info",
    "tool",
]
