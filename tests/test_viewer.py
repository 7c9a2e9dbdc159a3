"""agentgym view: the viewer's API on hostile files, and its pages in a real browser (headless Chromium).

The browser tests drive Chromium through the DevTools protocol (a small client below, on ``websockets``): they load
the pages, read the rendered DOM, type into the play page's form and click its buttons. They are skipped only
where no ``chromium`` is installed (``.ci/run`` installs Debian's).
"""

from __future__ import annotations

import contextlib
import itertools
import json
import shutil
import socket
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

import gymnasium as gym
import httpx
import pytest

from agentgym.app.cli import main
from agentgym.app.serving.viewer import EpisodeIndex, ViewerServer
from agentgym.core.episode import EpisodeRecord

CHROMIUM = shutil.which("chromium") or shutil.which("chromium-browser")
needs_chromium = pytest.mark.skipif(CHROMIUM is None, reason="no chromium on PATH (apt-get install chromium)")
WEATHER = "agentgym/WeatherRun-v0"
ATTACKS = [  # each would set a DOM marker if the page ever treated data as HTML
    "<script>document.body.dataset.pwned = 'script'</script>",
    "<img src=x onerror=\"document.body.dataset.pwned = 'img'\">",
    "<svg onload=\"document.body.dataset.pwned = 'svg'\"></svg>",
    "</pre><iframe srcdoc=\"<script>parent.document.body.dataset.pwned = 'iframe'</script>\"></iframe>",
]


def _eval(out: Path, agent: str = "oracle", episodes: int = 30) -> Path:
    assert (
        main(
            [
                "eval",
                "--env",
                WEATHER,
                "--agent",
                agent,
                "--episodes",
                str(episodes),
                "--out",
                str(out),
                "--no-progress",
            ]
        )
        == 0
    )
    return out


@pytest.fixture(scope="module")
def runs(tmp_path_factory: pytest.TempPathFactory) -> Path:
    root = tmp_path_factory.mktemp("runs")
    _eval(root / "oracle")
    _eval(root / "random", agent="random")
    return root


# ---------------------------------------------------------------------------------------------- the browser


class Browser:
    """Headless Chromium driven over the DevTools protocol: one page, commands answered in order."""

    def __init__(self) -> None:
        from websockets.sync.client import connect

        self.profile = tempfile.mkdtemp(prefix="agentgym-chromium-")
        self.proc = subprocess.Popen(
            [
                CHROMIUM,
                "--headless",
                "--no-sandbox",
                "--disable-gpu",
                "--no-first-run",
                "--remote-debugging-port=0",
                f"--user-data-dir={self.profile}",
                "--window-size=1280,900",
                "about:blank",
            ],
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
        )
        port_file = Path(self.profile) / "DevToolsActivePort"
        deadline = time.monotonic() + 30
        while not (port_file.is_file() and port_file.read_text().strip()):
            if time.monotonic() > deadline or self.proc.poll() is not None:
                raise RuntimeError("chromium did not start")
            time.sleep(0.05)
        port = int(port_file.read_text().split()[0])
        pages = [t for t in httpx.get(f"http://127.0.0.1:{port}/json/list").json() if t["type"] == "page"]
        self._stack = contextlib.ExitStack()
        self.ws = self._stack.enter_context(connect(pages[0]["webSocketDebuggerUrl"], max_size=None, open_timeout=10))
        self.ids = itertools.count(1)

    def send(self, method: str, **params: Any) -> dict[str, Any]:
        call_id = next(self.ids)
        self.ws.send(json.dumps({"id": call_id, "method": method, "params": params}))
        while True:
            message = json.loads(self.ws.recv(timeout=20))
            if message.get("id") == call_id:
                if "error" in message:
                    raise RuntimeError(message["error"])
                return message["result"]

    def js(self, expression: str) -> Any:
        result = self.send("Runtime.evaluate", expression=expression, returnByValue=True, awaitPromise=True)
        if "exceptionDetails" in result:
            raise RuntimeError(result["exceptionDetails"])
        return result["result"].get("value")

    def wait(self, expression: str, timeout: float = 10.0) -> Any:
        deadline = time.monotonic() + timeout
        while not (value := self.js(expression)):
            if time.monotonic() > deadline:
                raise TimeoutError(
                    f"the page never made {expression!r} true; body: {self.js('document.body.innerText')!r}"
                )
            time.sleep(0.05)
        return value

    def open(self, url: str, page: str) -> None:
        self.send("Page.navigate", url="about:blank")
        self.send("Page.navigate", url=url)
        self.wait(f"document.body && document.body.dataset.ready === 'true' && document.body.dataset.page === '{page}'")

    def click(self, selector: str) -> None:
        """A real mouse click at the element's centre."""
        box = self.js(
            f"(() => {{ const e = document.querySelector({json.dumps(selector)}); e.scrollIntoView();"
            " const r = e.getBoundingClientRect(); return [r.x + r.width / 2, r.y + r.height / 2]; })()"
        )
        for kind in ("mousePressed", "mouseReleased"):
            self.send("Input.dispatchMouseEvent", type=kind, x=box[0], y=box[1], button="left", clickCount=1)

    def type(self, selector: str, text: str) -> None:
        """Click into a field, clear it, and type ``text`` as keyboard input."""
        self.click(selector)
        self.js(f"document.querySelector({json.dumps(selector)}).select()")
        self.send("Input.insertText", text=text)

    def close(self) -> None:
        self._stack.close()
        self.proc.terminate()
        self.proc.wait(timeout=10)
        shutil.rmtree(self.profile, ignore_errors=True)


@pytest.fixture(scope="module")
def browser() -> Any:
    if CHROMIUM is None:
        pytest.skip("no chromium on PATH (apt-get install chromium)")
    b = Browser()
    yield b
    b.close()


@pytest.fixture(scope="module")
def viewer(runs: Path, tmp_path_factory: pytest.TempPathFactory) -> Any:
    with ViewerServer([runs], play_dir=tmp_path_factory.mktemp("play"), port=0) as server:
        yield server


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


# ---------------------------------------------------------------------------------------------- the bar


@needs_chromium
def test_the_bar_eval_then_view_then_the_dumped_dom_shows_success_and_env(tmp_path: Path) -> None:
    """From the command line: eval an oracle on WeatherRun, `agentgym view RUN --port P`, and Chromium's
    --dump-dom of the page holds the run's success figure and env id, as summary.json has them."""
    run = tmp_path / "oracle"
    subprocess.run(
        [
            sys.executable,
            "-m",
            "agentgym.app.cli",
            "eval",
            "--env",
            "WeatherRun-v0",
            "--agent",
            "oracle",
            "--episodes",
            "20",
            "--out",
            str(run),
            "--no-progress",
        ],
        check=True,
        capture_output=True,
    )
    port = _free_port()
    server = subprocess.Popen(
        [
            sys.executable,
            "-m",
            "agentgym.app.cli",
            "view",
            str(run),
            "--port",
            str(port),
            "--play-dir",
            str(tmp_path / "play"),
        ],
        stdout=subprocess.PIPE,
        text=True,
    )
    try:
        assert server.stdout is not None
        line = server.stdout.readline()
        assert f"http://127.0.0.1:{port}/" in line
        dom = subprocess.run(
            [
                CHROMIUM,
                "--headless",
                "--no-sandbox",
                "--disable-gpu",
                "--virtual-time-budget=10000",
                f"--user-data-dir={tmp_path / 'profile'}",
                "--dump-dom",
                f"http://127.0.0.1:{port}/",
            ],
            capture_output=True,
            text=True,
            timeout=60,
        ).stdout
    finally:
        server.terminate()
        server.wait(timeout=10)
    summary = json.loads((run / "summary.json").read_text())
    assert f'<td class="env">{summary["env_id"]}</td>' in dom
    assert f'<td class="num success">{100 * summary["success_rate"]:.1f}%' in dom
    assert server.returncode == 0  # SIGTERM stops it cleanly


# ---------------------------------------------------------------------------------------------- pages


@needs_chromium
def test_run_list_numbers_match_summary_json(browser: Browser, viewer: ViewerServer, runs: Path) -> None:
    browser.open(viewer.url + "/", "runs")
    rows = browser.js("""[...document.querySelectorAll('tr.run')].map((tr) => ({run: tr.dataset.run,
        env: tr.querySelector('.env').textContent, episodes: tr.querySelector('.episodes').textContent,
        success: tr.querySelector('.success').textContent, ret: tr.querySelector('.return').textContent,
        agent: tr.querySelector('.agent').textContent}))""")
    assert len(rows) == 2
    for row in rows:
        s = json.loads((runs / row["run"].split(":", 1)[1] / "summary.json").read_text())
        lo, hi = s["success_ci95"]
        assert row["env"] == s["env_id"] and row["agent"] == s["agent"]
        assert row["episodes"] == str(s["episodes"])
        assert row["success"] == f"{100 * s['success_rate']:.1f}% [{100 * lo:.1f}%, {100 * hi:.1f}%]"
        assert row["ret"] == f"{s['mean_return']:.3f}"


@needs_chromium
def test_an_episode_renders_turn_by_turn(browser: Browser, viewer: ViewerServer, runs: Path) -> None:
    line = 3
    record = EpisodeRecord.from_line((runs / "oracle" / "episodes.jsonl").read_text().splitlines()[line - 1])
    browser.open(f"{viewer.url}/#/episode?run=0%3Aoracle&line={line}", "episode")
    turns = browser.js("""[...document.querySelectorAll('.turn')].filter((t) => t.querySelector('.action')).map((t) =>
        ({action: t.querySelector('.action').textContent, observation: t.querySelector('.observation').textContent,
          summary: t.querySelector('.summary').textContent, format: t.querySelector('.format').textContent,
          reward: t.querySelector('.reward').textContent, call: t.querySelector('.call').textContent}))""")
    assert [t["action"] for t in turns] == record.actions
    assert [t["observation"] for t in turns] == record.observations[:-1]
    assert [t["summary"] for t in turns] == record.summaries[:-1]
    assert [t["reward"] for t in turns] == [f"{r:.3f}" for r in record.rewards]
    assert {t["format"] for t in turns} == {"format tool_call"}
    assert turns[0]["call"].startswith("get_weather(")


@needs_chromium
def test_filters_page_on_the_server(browser: Browser, viewer: ViewerServer, runs: Path) -> None:
    records = [EpisodeRecord.from_line(x) for x in (runs / "random" / "episodes.jsonl").read_text().splitlines()]
    failures = [i + 1 for i, r in enumerate(records) if not r.success]
    browser.open(f"{viewer.url}/#/run?id=0%3Arandom", "run")
    browser.js("document.querySelector('#filters [name=outcome]').value = 'failure'")
    browser.click("#filters button")
    browser.wait("document.getElementById('count')?.textContent.includes('matching')")  # the filtered page is drawn
    lines = browser.js(
        "[...document.querySelectorAll('tr.episode td:first-child')].map((td) => Number(td.textContent))"
    )
    assert lines == failures[:50] and failures
    assert browser.js("document.getElementById('count').textContent").endswith(
        f"of {len(failures)} matching (30 lines)"
    )


@needs_chromium
def test_compare_two_runs_lists_the_flipped_tasks(browser: Browser, viewer: ViewerServer, runs: Path) -> None:
    def outcomes(name: str) -> list[bool]:
        return [EpisodeRecord.from_line(x).success for x in (runs / name / "episodes.jsonl").read_text().splitlines()]

    a, b = outcomes("oracle"), outcomes("random")
    lost = sum(x and not y for x, y in zip(a, b, strict=True))
    browser.open(f"{viewer.url}/", "runs")
    for box in browser.js("[...document.querySelectorAll('tr.run')].map((tr) => tr.dataset.run)"):
        browser.click(f'tr.run[data-run="{box}"] input')
    browser.click("#compare")
    browser.wait("document.body.dataset.page === 'compare' && document.body.dataset.ready === 'true'")
    assert browser.js("document.getElementById('flips').textContent") == f"0 gained by B · {lost} lost by B"
    assert browser.js("document.querySelectorAll('tr.flip').length") == lost > 0


@needs_chromium
def test_training_curves_are_drawn_from_metrics_jsonl(browser: Browser, tmp_path: Path) -> None:
    run = tmp_path / "train"
    run.mkdir()
    rows = [{"step": s, "success": s > 4, "kl": 0.01 * s, "note": "<b>x</b>", "nan": float("nan")} for s in range(10)]
    (run / "metrics.jsonl").write_text("".join(json.dumps(r) + "\n" for r in rows) + '{"step": 10, "kl"')  # torn
    with ViewerServer([tmp_path], play_dir=tmp_path / "play", port=0) as server:
        browser.open(f"{server.url}/#/curves?run=0%3Atrain", "curves")
        charts = browser.js("[...document.querySelectorAll('canvas')].map((c) => [c.dataset.metric, c.dataset.points])")
    assert sorted(charts) == [["kl", "10"], ["success", "10"]]


# ---------------------------------------------------------------------------------------------- hostile input


def _hostile_run(root: Path) -> Path:
    """A run whose every string holds markup, plus lines that are not episodes (not UTF-8, not a record, torn)."""
    run = root / ATTACKS[1]  # the folder name too
    run.mkdir(parents=True)
    attack = " ".join(ATTACKS)
    record = EpisodeRecord(
        reset={"seed": 0, "options": {attack: attack}},
        observations=[attack, attack],
        summaries=[attack, attack],
        actions=[attack],
        rewards=[0.0],
        reward_components=[{attack: 1.0}],
        canonical=[False],
        valid=[False],
        truncation=attack,
        error=attack,
    )
    lines = [
        record.to_line().encode(),
        b"\xff\xfe not utf-8 " + ATTACKS[0].encode(),
        json.dumps({"actions": attack}).encode(),
        record.to_line().encode()[:120],
    ]
    (run / "episodes.jsonl").write_bytes(b"\n".join(lines))
    summary = json.loads(json.dumps({"env_id": attack, "agent": attack, "split": attack}))
    (run / "run.json").write_text(json.dumps({**summary, "env_kwargs": {}}))
    return run


@needs_chromium
def test_planted_markup_never_runs_and_bad_lines_say_why(browser: Browser, tmp_path: Path) -> None:
    _hostile_run(tmp_path / "runs")
    run_id = "0:" + ATTACKS[1]
    no_markup = "document.querySelectorAll('#app :is(script, img, svg, iframe, [onerror], [onload], [srcdoc])').length"
    with ViewerServer([tmp_path / "runs"], play_dir=tmp_path / "play", port=0) as server:
        pages = [("/", "runs"), (f"/#/run?id={run_id}", "run"), (f"/#/episode?run={run_id}&line=1", "episode")]
        for path, page in pages:
            browser.open(server.url + path.replace(" ", "%20"), page)
            assert browser.js("document.body.dataset.pwned") is None, path
            assert browser.js(no_markup) == 0, path
            assert ATTACKS[0] in browser.js("document.getElementById('app').textContent"), path  # shown, as text
        browser.open(f"{server.url}/#/run?id={run_id}".replace(" ", "%20"), "run")
        rows = browser.js("[...document.querySelectorAll('tr.episode')].map((tr) => tr.textContent)")
        assert len(rows) == 4
        assert "not an episode record: not UTF-8 text" in rows[1]
        assert "not an episode record" in rows[2]
        assert "torn: the file ends without a newline" in rows[3]
        browser.open(f"{server.url}/#/episode?run={run_id}&line=2".replace(" ", "%20"), "episode")
        assert "not UTF-8 text" in browser.js("document.getElementById('line-problem').textContent")


def test_api_answers_bad_requests_in_one_line(tmp_path: Path) -> None:
    _hostile_run(tmp_path / "runs")
    with ViewerServer([tmp_path / "runs"], play_dir=tmp_path / "play", port=0) as server:
        get = lambda path, **params: httpx.get(server.url + path, params=params, timeout=10)  # noqa: E731
        assert get("/api/episodes", run="../../etc").status_code == 404
        assert get("/api/episode", run="0:" + ATTACKS[1], line=99).status_code == 404
        assert get("/api/episodes", run="0:" + ATTACKS[1], limit=10**6).status_code == 400
        assert get("/api/episodes", run="0:" + ATTACKS[1], q="x" * 10_000).status_code == 400
        assert get("/static/../viewer.py").status_code == 404
        play = httpx.post(server.url + "/api/play", json={"env_id": "CartPole-v1"}, timeout=10)
        assert play.status_code == 400 and "not an agentgym env" in play.json()["error"]
        assert httpx.post(server.url + "/api/play/nope/step", json={"action": "x"}).status_code == 404
        assert "script-src 'self'" in get("/").headers["content-security-policy"]


def test_index_grows_with_the_file_and_a_torn_tail_is_indexed_again(tmp_path: Path) -> None:
    path = tmp_path / "episodes.jsonl"
    line = EpisodeRecord(observations=["a"]).to_line()
    path.write_text(line + "\n" + line[:10])
    index = EpisodeIndex(path)
    assert index.refresh() == 2 and "torn" in str(index.record(1))
    with path.open("a") as f:
        f.write(line[10:] + "\n" + line + "\n")
    assert index.refresh() == 3
    assert all(isinstance(index.record(i), EpisodeRecord) for i in range(3))


def test_a_large_run_opens_a_page_at_a_time(tmp_path: Path) -> None:
    """100,000 episodes: the list answers one page (never the file), and a filter counts over all of them."""
    run = tmp_path / "runs" / "big"
    run.mkdir(parents=True)
    with (run / "episodes.jsonl").open("w") as f:
        for i in range(100_000):
            f.write(
                EpisodeRecord(
                    index=i,
                    observations=["o", "p"],
                    actions=[f"a{i}"],
                    rewards=[1.0],
                    valid=[True],
                    canonical=[True],
                    reward_components=[{}],
                    success=i % 3 == 0,
                ).to_line()
                + "\n"
            )
    with ViewerServer([tmp_path / "runs"], play_dir=tmp_path / "play", port=0) as server:
        t0 = time.perf_counter()
        page = httpx.get(server.url + "/api/episodes", params={"run": "0:big"}, timeout=60)
        first_page_s = time.perf_counter() - t0
        assert page.json()["total"] == 100_000 and len(page.json()["items"]) == 50 and len(page.content) < 50_000
        last = httpx.get(server.url + "/api/episodes", params={"run": "0:big", "offset": 99_990}, timeout=60).json()
        assert [e["index"] for e in last["items"]] == list(range(99_990, 100_000))
        found = httpx.get(server.url + "/api/episodes", params={"run": "0:big", "q": "a77777"}, timeout=60).json()
        assert found["total"] == 1 and found["items"][0]["index"] == 77777
    assert first_page_s < 30  # measured ~0.1 s (benchmarks/viewer_large_run.py); the margin is for a loaded machine


# ---------------------------------------------------------------------------------------------- play by hand


@needs_chromium
def test_play_by_hand_finishes_weatherrun_with_the_oracle_typed_into_the_form(browser: Browser, tmp_path: Path) -> None:
    play_dir = tmp_path / "play"
    oracle = gym.make(WEATHER).unwrapped.oracle()
    sent = []
    with ViewerServer([], play_dir=play_dir, port=0) as server:
        browser.open(f"{server.url}/#/play", "play")
        browser.js(f"document.getElementById('play-env').value = {json.dumps(WEATHER)}")
        browser.type("#play-seed", "7")
        browser.click("#play-start")
        browser.wait("!!document.getElementById('play-observation')")
        for turn in range(1, 10):
            if browser.js("!!document.getElementById('play-done')"):
                break
            observation = browser.js("document.getElementById('play-observation').textContent")
            action, _ = oracle.predict(observation)
            call = json.loads(action.removeprefix("<tool_call>").removesuffix("</tool_call>"))
            if call["name"] == "answer":  # the free-text box, through the tolerant parser
                browser.type("#play-action", action)
                browser.click("#play-send")
            else:  # the tool's own form
                form = f'form[data-tool="{call["name"]}"]'
                browser.type(f'{form} [name="city"]', call["arguments"]["city"])
                browser.click(f"{form} button")
            sent.append(call)
            browser.wait(f"document.querySelectorAll('.play-turn').length === {turn}")
        assert browser.wait("document.getElementById('play-done')?.dataset.success") == "true"
        assert [c["name"] for c in sent] == ["get_weather", "get_air_quality", "answer"]
        # the episode is a run like any other: listed by the viewer, read by agentgym data
        listed = httpx.get(server.url + "/api/runs", timeout=10).json()["runs"]
        assert [(r["env_id"], r["agent"], r["lines"]) for r in listed] == [(WEATHER, "human", 1)]
    (played,) = (play_dir / "agentgym_WeatherRun-v0" / "episodes.jsonl").read_text().splitlines()
    record = EpisodeRecord.from_line(played)
    assert record.success and record.terminated and record.reset == {"seed": 7, "options": None}
    assert record.actions[-1] == oracle.predict(record.observations[-2])[0]
    env = gym.make(WEATHER)  # the record replays: the same seed and actions earn the same return
    env.reset(seed=7)
    assert sum(env.step(a)[1] for a in record.actions) == record.total_reward
    assert (
        main(["data", str(play_dir / "agentgym_WeatherRun-v0" / "episodes.jsonl"), "--out", str(tmp_path / "d")]) == 0
    )
    assert len((tmp_path / "d" / "sft.jsonl").read_text().splitlines()) == 1


def test_a_run_file_naming_a_module_as_its_env_imports_nothing(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """gym.make("module:Env") imports the module: an env id read from a file is made only if it is agentgym's."""
    (tmp_path / "lib").mkdir()
    marker = tmp_path / "imported"
    (tmp_path / "lib" / "planted_env.py").write_text(f"open({str(marker)!r}, 'w').close()\n")
    monkeypatch.syspath_prepend(str(tmp_path / "lib"))
    run = tmp_path / "runs" / "planted"
    run.mkdir(parents=True)
    (run / "run.json").write_text(json.dumps({"env_id": "planted_env:Env", "env_kwargs": {}}))
    record = EpisodeRecord(observations=["o", "p"], actions=["get_weather('x')"], rewards=[0.0], valid=[True],
                           canonical=[False], reward_components=[{}])  # fmt: skip
    (run / "episodes.jsonl").write_text(record.to_line() + "\n")
    with ViewerServer([tmp_path / "runs"], play_dir=tmp_path / "play", port=0) as server:
        detail = httpx.get(server.url + "/api/episode", params={"run": "0:planted", "line": 1}, timeout=10).json()
        filtered = httpx.get(server.url + "/api/episodes", params={"run": "0:planted", "outcome": "failure"}).json()
    assert detail["turns_"][0]["call"]["error"] == "the run's env is not available here"
    assert filtered["total"] == 1
    assert not marker.exists()
