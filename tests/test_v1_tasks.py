"""The v1 task sets (CodeSandbox-v1, SQLLookup-v1): shipped files match their checksums and rebuild byte for byte,
the splits are large enough and disjoint, the envs pass check_env, and the oracle solves the test splits."""

import time
from collections import Counter

import gymnasium as gym
import pytest
from gymnasium.utils.env_checker import check_env

import agentgym  # noqa: F401 (registers the ids)
from agentgym.app.evaluation.runner import evaluate
from agentgym.core.data import sha256_file
from agentgym.envs.code import dataset as code_data
from agentgym.envs.code.build import families as code_families
from agentgym.envs.code.dataset import TASKS_V0, TASKS_V0_SHA256, TASKS_V1, TASKS_V1_SHA256, verify_tasks
from agentgym.envs.sandbox import Sandbox, layer_status
from agentgym.envs.sql import dataset as sql_data
from agentgym.envs.sql.build import generate as sql_build

STATUS = layer_status()
LAYER = next((layer for layer in ("bwrap", "unshare") if STATUS[layer] is None), None)
needs_sandbox = pytest.mark.skipif(LAYER is None, reason=f"no sandbox layer on this machine: {STATUS}")


def test_shipped_files_match_their_checksums():
    assert sha256_file(TASKS_V1) == TASKS_V1_SHA256
    assert sha256_file(sql_data.TASKS_V1) == sql_data.TASKS_V1_SHA256
    assert sha256_file(TASKS_V0) == TASKS_V0_SHA256  # v0 untouched
    assert sha256_file(sql_data.TASKS_V0) == sql_data.TASKS_V0_SHA256
    assert sha256_file(sql_data.DATABASE_V0) == sql_data.DATABASE_V0_SHA256


def test_a_changed_v1_file_is_refused(tmp_path):
    for path, load in ((TASKS_V1, code_data.load_tasks), (sql_data.TASKS_V1, sql_data.load_tasks)):
        copy = tmp_path / path.name
        copy.write_bytes(path.read_bytes().replace(b"test", b"tess", 1))
        with pytest.raises(ValueError, match="the data changed"):
            load(copy, sha256=code_data.sha256_file(path))


def test_code_v1_rebuilds_byte_for_byte(tmp_path):
    start = time.perf_counter()
    checksum = code_data.write_tasks(code_families.generate_tasks(), tmp_path / "code_tasks_v1.jsonl")
    assert checksum == TASKS_V1_SHA256
    assert time.perf_counter() - start < 10  # measured 0.6 s


def test_sql_v1_rebuilds_byte_for_byte(tmp_path):
    assert sql_data.write_tasks(sql_build.build_tasks_v1(), tmp_path / "sql_tasks_v1.jsonl") == sql_data.TASKS_V1_SHA256


def test_code_v1_sizes_and_families():
    tasks = code_data.load_tasks(TASKS_V1)
    splits = Counter(t.split for t in tasks)
    assert splits["test"] >= 100 and splits["train"] >= 150
    families = Counter(t.id.rsplit("-", 1)[0] for t in tasks)
    assert len(families) == len(code_families.FAMILIES) and min(families.values()) >= 15
    for split in ("train", "test"):
        assert {t.topic for t in tasks if t.split == split} == {t.topic for t in tasks}
        assert {t.difficulty for t in tasks if t.split == split} == {"easy", "medium", "hard"}
    for t in tasks:
        assert len(t.visible_tests) >= 2 and len(t.hidden_tests) >= 6 and len(t.wrong_solutions) == 2
    assert len({t.entry_point for t in tasks}) == len(tasks)  # every problem is its own function
    assert len({t.prompt for t in tasks}) == len(tasks)


@needs_sandbox
def test_code_v1_sample_verifies_in_the_sandbox():
    tasks = code_data.load_tasks(TASKS_V1)
    sample = [t for k, t in enumerate(tasks) if k % 30 == 0]  # every family, 11 problems
    assert verify_tasks(sample, Sandbox(LAYER)) == []


def test_sql_v1_sizes_splits_and_gold_queries():
    tasks = sql_data.load_tasks(sql_data.TASKS_V1)
    splits = Counter(t.split for t in tasks)
    assert splits["test"] >= 200 and splits["train"] >= 200
    for split in ("train", "test"):
        assert {t.difficulty for t in tasks if t.split == split} == set(sql_data.DIFFICULTIES)
    train = {t.question for t in tasks if t.split == "train"} | {t.gold_sql for t in tasks if t.split == "train"}
    assert not [t.id for t in tasks if t.split == "test" and (t.question in train or t.gold_sql in train)]
    assert all(len(t.distractors) == 3 for t in tasks)


@pytest.mark.parametrize("env_id", ["agentgym/SQLLookup-v1", "agentgym/CodeSandbox-v1"])
def test_check_env_passes(env_id):
    if "Code" in env_id and LAYER is None:
        pytest.skip("no sandbox layer")
    env = gym.make(env_id, split="test")
    check_env(env.unwrapped, skip_render_check=True)
    assert env.unwrapped.data_checksum in (TASKS_V1_SHA256, sql_data.TASKS_V1_SHA256)


def test_v0_ids_still_load_v0():
    assert gym.make("agentgym/SQLLookup-v0").unwrapped.data_checksum == sql_data.DATABASE_V0_SHA256
    assert len(gym.make("agentgym/SQLLookup-v0", split="test").unwrapped.tasks) == 74
    with pytest.raises(ValueError, match="task_set"):
        gym.make("agentgym/SQLLookup-v0", task_set="v9")


def test_sql_oracle_solves_every_v1_test_question():
    env = gym.make("agentgym/SQLLookup-v1", split="test")
    report = evaluate(env.unwrapped.oracle(), env, agent="oracle")
    assert report.episodes == env.unwrapped.num_tasks >= 200
    assert report.success_rate == 1.0


@needs_sandbox
def test_code_oracle_solves_a_sample_of_v1_test_problems():
    env = gym.make("agentgym/CodeSandbox-v1", split="test", layer=LAYER)
    assert env.unwrapped.num_tasks >= 100
    report = evaluate(env.unwrapped.oracle(), env, episodes=20, agent="oracle")
    assert report.episodes == 20 and report.success_rate == 1.0
