"""Generated SQL training questions (sql_build.build_training_tasks): many, playable, and never a test question."""

from collections import Counter

import gymnasium as gym
import pytest

import agentgym  # noqa: F401 (registers the ids)
from agentgym.envs.sql import dataset as sql_data
from agentgym.envs.sql.build import generate as sql_build


@pytest.fixture(scope="module")
def generated():
    return sql_build.build_training_tasks()


def _squeezed(text: str) -> str:
    return " ".join(text.split())


def test_no_generated_question_or_gold_query_is_a_test_one(generated):
    test = [
        t for path in (sql_data.TASKS_V0, sql_data.TASKS_V1) for t in sql_data.load_tasks(path) if t.split == "test"
    ]
    reserved = {_squeezed(text) for t in test for text in (t.question, t.gold_sql)}
    assert len(test) == 74 + 209
    leaked = [t.id for t in generated if _squeezed(t.question) in reserved or _squeezed(t.gold_sql) in reserved]
    assert leaked == []


def test_the_filter_is_what_keeps_test_questions_out():
    # The same families with the same seed but no exclusion do produce test questions (202 of 600 measured).
    reserved = {text for t in sql_build.test_tasks() for text in (t.question, t.gold_sql)}
    raw = sql_build.build_tasks(
        sql_data.DATABASE_V0, sql_build.TRAINING_SEED, sql_build.TRAINING_INSTANCES, one_offs=False
    )
    assert sum(t.question in reserved or t.gold_sql in reserved for t in raw) > 50


def test_generated_set_is_large_varied_and_all_train(generated):
    assert len(generated) >= 400  # 423 measured; the v1 train split has 223
    assert {t.split for t in generated} == {"train"}
    assert len({t.id for t in generated}) == len({t.question for t in generated}) == len(generated)
    assert set(Counter(t.difficulty for t in generated)) == {"single_table", "join", "aggregate", "nested", "date"}
    assert len({t.family for t in generated}) >= 30


def test_generation_is_deterministic(generated):
    assert [t.model_dump() for t in sql_build.build_training_tasks()] == [t.model_dump() for t in generated]


def test_the_env_plays_generated_questions_and_the_oracle_solves_them(generated, tmp_path):
    path = tmp_path / "train.jsonl"
    sql_data.write_tasks(generated, path)
    env = gym.make("agentgym/SQLLookup-v1", tasks_path=path, split="train")
    assert env.unwrapped.num_tasks == len(generated)
    oracle = env.unwrapped.oracle()
    for index in range(0, len(generated), 20):
        obs, _ = env.reset(seed=0, options={"task_index": index})
        assert generated[index].question in obs
        for _ in range(10):
            obs, reward, terminated, truncated, info = env.step(oracle.predict(obs)[0])
            if terminated or truncated:
                break
        assert info["success"], generated[index].id
