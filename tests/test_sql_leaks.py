"""A training question leaks a test one by what it means to SQLite, not by its text (issue 43, part 5)."""

import pytest

from agentgym.envs.sql import dataset as sql_data
from agentgym.envs.sql.build import generate as sql_build
from agentgym.envs.sql.leaks import LeakCheck, question_key, sql_key

GOLD = "SELECT first_name, last_name FROM employees WHERE last_name LIKE 'D%' ORDER BY last_name, first_name"


@pytest.mark.parametrize(
    "same",
    [
        GOLD.replace("'D%'", "'d%'"),  # LIKE ignores ASCII case
        GOLD.lower().replace("'d%'", "'D%'"),  # keywords and identifiers ignore case
        GOLD.replace("first_name,", '"first_name",').replace("employees", "[employees]"),
        GOLD.replace("last_name LIKE", "`last_name` LIKE").replace(" ORDER", "\n\t ORDER"),
        GOLD.replace("SELECT", "SELECT /* the names */") + "; -- by initial",
        GOLD.replace(", last_name FROM", " ,last_name FROM"),
    ],
)
def test_texts_that_sqlite_reads_alike_share_a_key(same):
    assert sql_key(same) == sql_key(GOLD)


@pytest.mark.parametrize(
    "different",
    [
        GOLD.replace("LIKE 'D%'", "= 'D%'"),
        GOLD.replace("LIKE 'D%'", "GLOB 'd*'"),
        "SELECT 1 FROM customers WHERE city = 'New  York'",  # white space inside a literal counts
        GOLD.replace("'D%'", "'É%'"),  # LIKE folds ASCII only
        GOLD.replace("last_name, first_name", "first_name, last_name"),
    ],
)
def test_texts_that_ask_something_else_keep_their_own_key(different):
    assert sql_key(different) != sql_key(GOLD)
    assert sql_key("SELECT 1 FROM t WHERE a = 'D'") != sql_key("SELECT 1 FROM t WHERE a = 'd'")
    assert sql_key('SELECT "Name" FROM t') == sql_key("select name from T")


def test_question_key_ignores_case_spacing_and_final_punctuation():
    assert question_key("How many  customers are in Germany?") == question_key("how many customers are in germany")
    assert question_key("Germany") != question_key("Germanys")


@pytest.fixture(scope="module")
def test_task():
    return next(t for t in sql_data.load_tasks(sql_data.TASKS_V1) if t.id == "employees_by_initial-8")


@pytest.fixture(scope="module")
def leaks():
    with sql_build.test_leak_check() as check:
        yield check


def test_a_test_task_rewritten_as_sqlite_reads_it_is_caught(leaks, test_task):
    assert "LIKE 'D%'" in test_task.gold_sql
    own = "a question of my own"
    for gold in (test_task.gold_sql.replace("'D%'", "'d%'"), test_task.gold_sql.lower(), test_task.gold_sql + ";"):
        assert "gold query means a test gold query" in leaks.reason(own, gold)
        with pytest.raises(ValueError, match="a question of my own"):
            leaks.assert_none([test_task.model_copy(update={"question": own, "gold_sql": gold})])


def test_a_near_duplicate_question_leaks_only_when_its_rows_are_the_test_rows(leaks, test_task):
    question = test_task.question.replace("'D'", "'d'").upper()
    # the same rows on both databases, written another way: a leak
    same_rows = test_task.gold_sql.replace("LIKE 'D%'", "LIKE 'D%' AND 1 = 1")
    assert "near-duplicate" in leaks.reason(question, same_rows)
    # rows of its own ('d' against 'D' under =, which keeps case): another question
    other_rows = test_task.gold_sql.replace("last_name LIKE 'D%'", "substr(last_name, 1, 1) = 'd'")
    assert leaks.reason(question, other_rows) is None
    assert leaks.reason("Which departments are in Berlin?", "SELECT name FROM departments") is None


def test_the_check_is_the_filter_generation_uses():
    # Unfiltered, the training families on v0's database draw many test tasks; filtered, none.
    raw = sql_build.build_tasks(sql_data.DATABASE_V0, sql_build.TRAINING_SEED, 12, one_offs=False)
    with sql_build.test_leak_check() as check:
        assert sum(check.reason(t.question, t.gold_sql) is not None for t in raw) > 50
        kept = sql_build.build_tasks(sql_data.DATABASE_V0, sql_build.TRAINING_SEED, 12, exclude=check, one_offs=False)
        assert kept and all(check.reason(t.question, t.gold_sql) is None for t in kept)


def test_the_shipped_training_set_holds_no_test_task_by_sqlites_rules():
    training = sql_data.load_tasks(sql_data.TRAINING_TASKS)
    sql_build.assert_no_test_leak(training)
    assert not any("LIKE 'd%'" in t.gold_sql and t.family == "employees_by_initial" for t in training)


def test_v1_holds_exactly_its_one_documented_leak():
    v1 = sql_data.load_tasks(sql_data.TASKS_V1)
    with LeakCheck([t for t in v1 if t.split == "test"], [sql_data.DATABASE_V0, sql_data.TRAINING_DATABASE]) as check:
        found = {t.id for t in v1 if t.split == "train" and check.reason(t.question, t.gold_sql) is not None}
    assert found == sql_build.V1_KNOWN_LEAKS
