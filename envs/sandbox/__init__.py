"""Run untrusted Python in a sandbox: the security boundary of agentgym's code tasks.

``harness`` starts and bounds the sandbox from outside (layers, limits, seccomp, the result channel; its docstring
gives the guarantees of each layer); ``inside`` is the runner that executes in it. The names below are the public
ones."""

from agentgym.core.registration import lazy_exports

__all__ = [
    "LAYERS",
    "SANDBOX_ENV",
    "Sandbox",
    "SandboxLimits",
    "SandboxResult",
    "SandboxUnavailable",
    "TestOutcome",
    "TestReport",
    "layer_status",
    "parse_value",
    "seccomp_filter",
    "values_equal",
]
__getattr__ = lazy_exports(dict.fromkeys(__all__, "agentgym.envs.sandbox.harness"))
