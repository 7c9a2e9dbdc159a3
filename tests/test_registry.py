"""Every registered agentgym id: Gymnasium's checker in text mode and through the discrete view."""

import gymnasium as gym
import pytest
from gymnasium.utils.env_checker import check_env

from agentgym.registration import ENV_IDS, describe
from agentgym.wrappers import DiscreteToolActions


def test_every_id_is_registered_with_a_description():
    for env_id in ENV_IDS:
        assert env_id in gym.registry
        assert describe(env_id).startswith(env_id.split("/")[1].split("-")[0] + ":")


@pytest.mark.filterwarnings("ignore:.*different from the unwrapped version")
@pytest.mark.parametrize("env_id", [i for i in ENV_IDS])
def test_check_env_text_and_discrete(env_id):
    check_env(gym.make(env_id).unwrapped, skip_render_check=False)
    check_env(DiscreteToolActions(gym.make(env_id).unwrapped))
