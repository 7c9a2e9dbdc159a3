"""agentgym.core.data: frozen JSONL files round-trip every string, and a damaged or oversized file is refused with one
line that names the file and the line, before it is parsed (or, when too large, read)."""

from __future__ import annotations

import time
import tracemalloc

import gymnasium as gym
import pytest

from agentgym.app.cli import main
from agentgym.core import data
from agentgym.core.data import MAX_FILE_BYTES, read_jsonl, sha256_file, write_jsonl
from agentgym.envs.code.dataset import TASKS_V0 as CODE_TASKS
from agentgym.envs.sql.dataset import TASKS_V0 as SQL_TASKS
from agentgym.envs.weather.dataset import SNAPSHOT_V0, WeatherRecord, load_snapshot

# every character str.splitlines() splits at, besides "\n" and "\r\n" (which JSON always escapes)
LINE_BREAKS = ["\u2028", "\u2029", "\x85", "\x0b", "\x0c", "\x1c", "\x1d", "\x1e", "\r"]


def record(n: int, conditions: str = "sunny") -> WeatherRecord:
    return WeatherRecord(
        city=f"City {n}", date="2024-05-03", temperature_c=18.5, conditions=conditions, humidity_pct=50,
        wind_kph=10.0, aqi=40, pm2_5=9.0,
    )  # fmt: skip


def the_error(path, **kwargs) -> str:
    with pytest.raises(ValueError) as info:
        read_jsonl(path, WeatherRecord, what="weather", **kwargs)
    message = str(info.value)
    assert "\n" not in message and len(message) < 400, message
    return message


@pytest.mark.parametrize("sep", LINE_BREAKS, ids=[f"U+{ord(c):04X}" for c in LINE_BREAKS])
def test_records_holding_line_breaks_round_trip(tmp_path, sep):
    records = [record(0), record(1, f"sunny{sep}windy"), record(2, f"{sep}")]
    path = tmp_path / "w.jsonl"
    checksum = write_jsonl(records, path)
    assert read_jsonl(path, WeatherRecord, sha256=checksum) == records


def test_a_line_that_is_not_utf8_is_one_line_naming_the_file_and_line(tmp_path):
    path = tmp_path / "w.jsonl"
    write_jsonl([record(0), record(1), record(2)], path)
    lines = path.read_bytes().split(b"\n")
    lines[2] = lines[2].replace(b"City 2", b"City \xff")  # Latin-1 damage on line 3
    path.write_bytes(b"\n".join(lines))
    assert the_error(path) == f"{path}:3: not UTF-8 text (invalid start byte at byte 26)"


@pytest.mark.parametrize(
    "line, problem",
    [
        ('{"city": "A", "date": "2024-01-01", "temperature_c": NaN, "conditions": "x", "humidity_pct": 1, '
         '"wind_kph": 1, "aqi": 1, "pm2_5": 1}', "(temperature_c: Input should be a finite number)"),
        ('{"city": "A", "date": "2024-01-01"}', "(temperature_c: Field required (and 5 more problems))"),
        ('{"city": "A", "date": "01/01/2024", "temperature_c": 1, "conditions": "x", "humidity_pct": 1, '
         '"wind_kph": 1, "aqi": 1, "pm2_5": 1, "extra": 1}', "(date: String should match pattern"),
        ('{"city": "A", "date": ', "(Invalid JSON: EOF while parsing a value at line 1 column 22)"),
        ("[1, 2, 3]", "(Input should be an object)"),
    ],
    ids=["nan", "missing", "bad-fields", "not-json", "not-an-object"],
)  # fmt: skip
def test_a_bad_record_is_one_line_naming_the_file_the_line_and_the_field(tmp_path, line, problem):
    path = tmp_path / "w.jsonl"
    write_jsonl([record(0), record(1)], path)
    path.write_bytes(path.read_bytes() + b"\n" + line.encode() + b"\n")  # a blank line 3 counts as a line
    assert the_error(path).startswith(f"{path}:4: not a weather record {problem}")


def test_a_duplicate_an_empty_file_and_changed_data_are_one_line(tmp_path):
    path = tmp_path / "t.jsonl"
    write_jsonl([record(0), record(1), record(0)], path)
    assert the_error(path, unique="city") == f"{path}:3: duplicate weather city 'City 0'"
    assert the_error(path, sha256="0" * 64).startswith(f"weather file {path} has SHA-256 {sha256_file(path)}")
    path.write_bytes(b"\n \n")
    assert the_error(path) == f"weather file {path} holds no weathers"


def test_a_file_over_the_limit_is_refused_without_reading_it(tmp_path):
    path = tmp_path / "huge.jsonl"
    with path.open("wb") as f:  # sparse: costs no disk
        f.truncate(MAX_FILE_BYTES + 1)
    tracemalloc.start()
    start = time.perf_counter()
    message = the_error(path)
    elapsed = time.perf_counter() - start
    peak = tracemalloc.get_traced_memory()[1]
    tracemalloc.stop()
    assert message == f"weather file {path} is {MAX_FILE_BYTES + 1:,} bytes; the limit is {MAX_FILE_BYTES:,}"
    assert peak < 1_000_000 and elapsed < 0.5, (peak, elapsed)  # nothing of the 64 MiB was read


def test_the_limit_is_generous_for_the_shipped_data():
    largest = max(p.stat().st_size for p in (SNAPSHOT_V0, SQL_TASKS, CODE_TASKS))
    assert largest * 100 < MAX_FILE_BYTES  # 149 kB: a file of your own may be 400 times the largest we ship


def test_the_limit_holds_for_a_file_whose_size_is_not_known_in_advance(monkeypatch):
    # the bound is on what is read, not on what stat() says: /proc files (like a file still being written) stat as 0
    monkeypatch.setattr(data, "MAX_FILE_BYTES", 100)
    assert the_error("/proc/self/maps") == "weather file /proc/self/maps is more than 100 bytes; the limit is 100"


def test_without_a_model_each_line_is_a_json_object(tmp_path):
    # what SFT's data= reads (chat transcripts, checked by the trainer)
    path = tmp_path / "chats.jsonl"
    path.write_text('{"messages": [{"role": "user", "content": "a\u2028b"}]}\n\n{"messages": []}\n', encoding="utf-8")
    assert read_jsonl(path) == [{"messages": [{"role": "user", "content": "a\u2028b"}]}, {"messages": []}]
    path.write_text('{"messages": []}\n[1]\n', encoding="utf-8")
    with pytest.raises(ValueError, match=rf"^{path}:2: not a record \(Input should be an object\)$"):
        read_jsonl(path)


def test_sha256_file_streams(tmp_path):
    path = tmp_path / "big.bin"
    with path.open("wb") as f:  # sparse: costs no disk
        f.truncate(50_000_000)
    tracemalloc.start()
    sha256_file(path)
    peak = tracemalloc.get_traced_memory()[1]
    tracemalloc.stop()
    assert peak < 4_000_000, peak  # read in 1 MiB chunks, not as one 50 MB bytes object


def test_a_damaged_snapshot_given_to_the_cli_is_one_line(tmp_path, capsys):
    path = tmp_path / "snapshot.jsonl"
    good = load_snapshot()
    write_jsonl(good[:5], path)
    lines = path.read_bytes().split(b"\n")
    lines[3] = lines[3].replace(b'"split"', b'"spl\xe9t"')
    path.write_bytes(b"\n".join(lines))
    code = main(["eval", "--env", "agentgym/WeatherRun-v0", "--env-kwargs", f'{{"snapshot": "{path}"}}',
                 "--agent", "oracle", "--episodes", "1", "--no-progress"])  # fmt: skip
    err = capsys.readouterr().err
    assert code == 2 and err.count("\n") == 1 and "Traceback" not in err, err
    assert err.startswith(f"agentgym: {path}:4: not UTF-8 text"), err
    assert gym.make("agentgym/WeatherRun-v0").unwrapped.backend is not None  # the shipped snapshot still loads


def test_a_task_list_keeps_its_split_refuses_a_bad_one_and_picks_by_task_index():
    """The task-list piece SQLLookup and CodeSandbox share: one split, its checksum, the task_index rule."""
    from types import SimpleNamespace

    import numpy as np

    from agentgym.core.data import TaskList

    tasks = [SimpleNamespace(id=i, split="train" if i % 2 else "test") for i in range(6)]
    train = TaskList(tasks, "train", "abc")
    assert [t.id for t in train] == [1, 3, 5] and len(train) == 3 and train.data_checksum == "abc"
    assert train.pick({"task_index": 2}, None).id == 5
    rng = np.random.default_rng(0)
    assert {train.pick({}, rng).id for _ in range(40)} == {1, 3, 5}
    for bad in (3, -1, "0", None.__class__):
        with pytest.raises(ValueError, match=r"task_index must be in \[0, 3\)"):
            train.pick({"task_index": bad}, rng)
    with pytest.raises(ValueError, match="split must be 'train', 'test' or 'all'"):
        TaskList(tasks, "dev")
    with pytest.raises(ValueError, match=r"no tasks in split 'test'; the tasks file has splits \['train'\]"):
        TaskList(tasks[1::2], "test")
    assert len(TaskList(tasks, "all")) == 6
