"""The protocol core: what every task, learner and application builds on, and which imports none of them.

``tool_env`` (:class:`ToolEnv`, its observation and the task facts it declares), ``tools`` (``@tool`` and the
call types), ``parser`` (the tolerant tool-call parser), ``spaces``, ``wrappers``, ``registration`` (the ids
the task folders declare), ``conformance`` (the tool-env contract), ``episode`` (the episode record and
``episodes.jsonl``'s one writer and reader), ``summary`` (what a set of episodes measured), ``data`` (frozen task
data), ``deadline`` (HTTP calls that end by a deadline). The names below are :mod:`agentgym.core.tool_env`'s.
"""

from agentgym.core.tool_env import *  # noqa: F403 (agentgym.core's public names are tool_env's)
from agentgym.core.tool_env import __all__ as __all__
