"""Every registered agentgym id keeps the tool-env contract, and a task folder registers itself (issue 46, part 5)."""

import sys
import textwrap

import gymnasium as gym
import pytest

import agentgym.core.registration as registration
from agentgym.core.conformance import ConformanceError, check_tool_env
from agentgym.core.registration import ENV_IDS, declared_ids, declared_recipes


def test_every_id_is_declared_by_its_task_folder_and_registered():
    tasks, clients = declared_ids()
    assert set(tasks) == set(ENV_IDS) and len(tasks) == 6 and list(clients) == ["agentgym/Remote-v0"]
    assert all(env_id in gym.registry for env_id in [*tasks, *clients])
    assert gym.spec("agentgym/SQLLookup-v1").kwargs == {"task_set": "v1"}
    assert gym.spec("agentgym/CliffWalk-v0").max_episode_steps == 100
    source = open(registration.__file__).read()
    assert not any(name in source for name in ("CliffWalk", "WeatherRun", "SQLLookup", "CodeSandbox", "Remote-v0"))


@pytest.mark.filterwarnings("ignore:.*different from the unwrapped version")
@pytest.mark.parametrize("env_id", sorted(ENV_IDS))
def test_every_env_keeps_the_tool_env_contract(env_id):
    check_tool_env(env_id, episodes=2, steps=6)


COUNTER_ENV = '''
    """Counter: add numbers until the total is exactly the target."""

    from agentgym import ToolEnv, ToolResult, tool


    class CounterEnv(ToolEnv):
        """Counter: add numbers until the total is exactly the target."""

        def _reset_task(self, options):
            self.total, self.target = 0, int(self.np_random.integers(3, 9))

        @tool
        def add(self, n: int) -> ToolResult:
            """Add a number to the total.

            Args:
                n: the number to add.
            """
            self.total += n
            return ToolResult(f"total {self.total}", {"done": 1.0 if self.total == self.target else 0.0},
                              self.total >= self.target)

        def task_prompt(self):
            return f"Reach a total of {self.target}."

        def summary(self):
            return f"total {self.total} of {self.target}"

        def reward_bounds(self):
            return (0.0, float(self.max_calls_per_step))
'''


def _fifth_env_package(tmp_path, monkeypatch, env_source=COUNTER_ENV):
    """A task package of its own, as a project outside agentgym writes one (README: "Add an environment")."""
    root = tmp_path / "mytasks"
    (root / "counter").mkdir(parents=True)
    (root / "__init__.py").write_text('"""My tasks."""\n')
    (root / "counter" / "__init__.py").write_text(
        '"""Counter: reach a target total."""\n\n'
        'ENV_SPECS = {"mytasks/Counter-v0": '
        '{"entry_point": "mytasks.counter.env:CounterEnv", "max_episode_steps": 6}}\n'
    )
    (root / "counter" / "env.py").write_text(textwrap.dedent(env_source))
    (root / "counter" / "recipes.py").write_text(
        'RECIPES = {"mytasks/Counter-v0": {"grpo": {"rollout": {"max_turns": 6}, "beta": 0.2}}}\n'
    )
    monkeypatch.syspath_prepend(str(tmp_path))
    yield
    for module in [m for m in sys.modules if m == "mytasks" or m.startswith("mytasks.")]:
        del sys.modules[module]
    gym.registry.pop("mytasks/Counter-v0", None)
    declared_ids.cache_clear()
    declared_recipes.cache_clear()


@pytest.fixture
def fifth_env(tmp_path, monkeypatch):
    yield from _fifth_env_package(tmp_path, monkeypatch)


def test_a_fifth_env_in_a_package_of_its_own_registers_itself_and_conforms(fifth_env):
    registration.register_envs("mytasks")
    assert gym.spec("mytasks/Counter-v0").max_episode_steps == 6
    assert "mytasks.counter.env" not in sys.modules  # only the folder's declaration was read
    check_tool_env("mytasks/Counter-v0")


def test_a_task_folder_declares_its_tiny_recipes_and_the_app_merges_them(fifth_env):
    from agentgym.app.recipes import TINY, TINY_DEFAULTS, merged_recipe, tiny_overrides

    assert {TINY[name]["env_id"] for name in ("grpo", "sft-cliffwalk", "sft-sqllookup")} == {
        "agentgym/WeatherRun-v0",
        "agentgym/CliffWalk-v0",
        "agentgym/SQLLookup-v1",
    }
    source = open(registration.__file__).read()
    assert "learning_rate" not in source and "tiny" not in source.lower()  # the core reads no setting
    declared = declared_recipes("mytasks")
    assert declared == {"mytasks/Counter-v0": {"grpo": {"rollout": {"max_turns": 6}, "beta": 0.2}}}
    recipe = merged_recipe("grpo", "mytasks/Counter-v0", declared["mytasks/Counter-v0"]["grpo"])
    assert recipe["env_id"] == "mytasks/Counter-v0" and recipe["beta"] == 0.2
    assert recipe["learning_rate"] == TINY_DEFAULTS["grpo"]["learning_rate"]
    assert recipe["rollout"] == {**TINY_DEFAULTS["grpo"]["rollout"], "max_turns": 6}  # a group keeps its defaults
    # a stage of WeatherRun's recipe holds there only: on SQLLookup "sft" is SQLLookup's own, on Counter the default's
    assert tiny_overrides("sft", "agentgym/SQLLookup-v1") == TINY["sft-sqllookup"]
    assert "env_kwargs" not in tiny_overrides("grpo", "mytasks/Counter-v0")
    with pytest.raises(ValueError, match="'variant', which names no algorithm"):
        merged_recipe("variant", "mytasks/Counter-v0", {})


def test_a_recipe_for_an_id_its_folder_does_not_declare_is_refused(fifth_env, tmp_path):
    (tmp_path / "mytasks" / "counter" / "recipes.py").write_text('RECIPES = {"mytasks/Other-v0": {"grpo": {}}}\n')
    with pytest.raises(ValueError, match="mytasks.counter.recipes has a recipe for 'mytasks/Other-v0'"):
        declared_recipes("mytasks")


BROKEN = COUNTER_ENV.replace('{"done": 1.0 if self.total == self.target else 0.0}', '{"done": 100.0}')


@pytest.fixture
def broken_env(tmp_path, monkeypatch):
    yield from _fifth_env_package(tmp_path, monkeypatch, BROKEN)


def test_the_contract_catches_a_reward_outside_the_declared_bounds(broken_env):
    registration.register_envs("mytasks")
    with pytest.raises(ConformanceError, match="mytasks/Counter-v0: .*reward 100.0 outside the declared bounds"):
        check_tool_env("mytasks/Counter-v0")
