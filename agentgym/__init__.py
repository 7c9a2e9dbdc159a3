"""agentgym: Gymnasium environments whose actions are tool calls, and trainers that learn on them.

``import agentgym`` registers the ``agentgym/*`` ids::

    import gymnasium as gym
    import agentgym

    env = gym.make("agentgym/CliffWalk-v0")
"""

__version__ = "0.1.0"

from agentgym.core import TaskInfo, ToolEnv, task_info
from agentgym.parser import ParseResult, parse_tool_calls
from agentgym.registration import register_envs
from agentgym.spaces import AnyText
from agentgym.tools import Tool, ToolCall, ToolError, ToolResult, tool
from agentgym.wrappers import DiscreteToolActions

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
