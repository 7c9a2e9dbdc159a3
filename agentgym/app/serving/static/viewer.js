// agentgym view: the page. Everything shown comes from files, models and envs: it is set as text
// (textContent, attribute values), never as HTML.
"use strict";

function el(tag, attrs, ...children) {
  const node = document.createElement(tag);
  for (const [key, value] of Object.entries(attrs || {})) {
    if (value === null || value === undefined || value === false) continue;
    if (key === "class") node.className = value;
    else if (key.startsWith("on")) node.addEventListener(key.slice(2), value);
    else node.setAttribute(key, value);
  }
  for (const child of children.flat()) {
    if (child === null || child === undefined) continue;
    node.append(child instanceof Node ? child : document.createTextNode(String(child)));
  }
  return node;
}

const app = () => document.getElementById("app");
function show(...nodes) { app().replaceChildren(...nodes.flat(Infinity).filter((n) => n !== null && n !== undefined)); }
function pct(x) { return x === null || x === undefined ? "—" : (100 * x).toFixed(1) + "%"; }
function num(x, d = 3) { return x === null || x === undefined ? "—" : Number(x).toFixed(d); }
function short(s, n = 12) { return s ? String(s).slice(0, n) : "—"; }
function href(route, params) { return "#/" + route + (params ? "?" + new URLSearchParams(params) : ""); }

async function api(path, params, body) {
  const url = "/api/" + path + (params ? "?" + new URLSearchParams(params) : "");
  const response = await fetch(url, body === undefined ? {} :
    { method: "POST", headers: { "Content-Type": "application/json" }, body: JSON.stringify(body) });
  const data = await response.json();
  if (!response.ok) throw new Error(data.error || (data.detail && JSON.stringify(data.detail)) || response.statusText);
  return data;
}

function failure(error) { show(el("p", { class: "problem", id: "error" }, "Error: " + error.message)); }

// ------------------------------------------------------------------------------------------ runs

async function runsPage() {
  const { runs } = await api("runs");
  const picked = new Set();
  const compareButton = el("button", { id: "compare", disabled: "", onclick: () => {
    const [a, b] = [...picked]; location.hash = href("compare", { a, b });
  } }, "Compare the two selected runs");
  const rows = runs.map((r) => {
    const box = el("input", { type: "checkbox", onchange: (e) => {
      e.target.checked ? picked.add(r.id) : picked.delete(r.id);
      compareButton.disabled = picked.size !== 2;
    } });
    const ci = r.success_ci95 ? ` [${pct(r.success_ci95[0])}, ${pct(r.success_ci95[1])}]` : "";
    const tags = Object.entries(r.by_tag).map(([name, values]) => el("div", { class: "tags" }, el("span", { class: "muted" }, name + " "),
      Object.entries(values).map(([v, s]) => el("span", { class: "label", title: `${s.successes}/${s.episodes}` }, `${v} ${pct(s.success_rate)}`))));
    const links = [r.lines ? el("a", { href: href("run", { id: r.id }) }, `${r.lines} episodes`) : null,
      r.has_metrics ? el("a", { href: href("curves", { run: r.id }), class: "curves" }, " curves") : null];
    return el("tr", { class: "run", "data-run": r.id },
      el("td", {}, box),
      el("td", {}, el("div", {}, r.path), r.problem ? el("div", { class: "problem" }, r.problem) : null, links),
      el("td", { class: "env" }, r.env_id || "—"),
      el("td", {}, r.split || "—"),
      el("td", { class: "agent" }, r.agent || "—", r.model ? el("div", { class: "muted" }, r.model) : null),
      el("td", { class: "num episodes" }, r.episodes ?? r.lines),
      el("td", { class: "num success" }, pct(r.success_rate), el("span", { class: "muted ci" }, ci)),
      el("td", { class: "num return" }, num(r.mean_return)),
      el("td", { class: "muted provenance" }, r.package_version ? el("div", {}, `agentgym ${r.package_version}`) : null,
        r.data_checksum ? el("div", { title: r.data_checksum }, `data ${short(r.data_checksum)}`) : null,
        r.git_commit ? el("div", { title: r.git_commit }, `commit ${short(r.git_commit, 10)}`) : null),
      el("td", {}, tags));
  });
  show(el("h1", {}, "Runs"),
    runs.length ? el("table", { id: "runs" },
      el("thead", {}, el("tr", {}, ["", "run", "env", "split", "agent / model", "episodes", "success (95% CI)",
        "mean return", "provenance", "per tag"].map((h) => el("th", {}, h)))),
      el("tbody", {}, rows)) : el("p", { class: "muted" }, "No runs found under the folders given."),
    compareButton);
}

// ------------------------------------------------------------------------------------------ episodes

const FILTERS = ["outcome", "tag", "truncated", "invalid", "q"];

async function runPage(params) {
  const id = params.get("id");
  const offset = Number(params.get("offset") || 0);
  const limit = 50;
  const query = { run: id, offset, limit };
  for (const f of FILTERS) if (params.get(f)) query[f] = params.get(f);
  const data = await api("episodes", query);
  const form = el("form", { class: "filters", id: "filters", onsubmit: (e) => {
    e.preventDefault();
    const next = { id };
    for (const f of FILTERS) { const v = form.elements[f].value; if (v) next[f] = v; }
    location.hash = href("run", next);
  } },
    el("label", {}, "outcome ", select("outcome", ["", "success", "failure"], params.get("outcome"))),
    el("label", {}, "truncated ", select("truncated", ["", "true", "false"], params.get("truncated"))),
    el("label", {}, "invalid actions ", select("invalid", ["", "true", "false"], params.get("invalid"))),
    el("label", {}, "tag ", el("input", { name: "tag", placeholder: "name=value", value: params.get("tag") || "" })),
    el("label", {}, "text ", el("input", { name: "q", placeholder: "search", value: params.get("q") || "" })),
    el("button", { type: "submit" }, "Filter"));
  const rows = data.items.map((e) => e.problem !== undefined
    ? el("tr", { class: "episode problem" }, el("td", {}, el("a", { href: href("episode", { run: id, line: e.line }) }, e.line)),
      el("td", { colspan: 7 }, e.problem))
    : el("tr", { class: "episode" },
      el("td", {}, el("a", { href: href("episode", { run: id, line: e.line }) }, e.line)),
      el("td", { class: "num" }, e.index),
      el("td", { class: e.success ? "ok" : "bad" }, e.success ? "success" : "failure"),
      el("td", { class: "num" }, num(e.total_reward)),
      el("td", { class: "num" }, e.turns),
      el("td", {}, e.truncation || ""),
      el("td", { class: "num" }, e.invalid || ""),
      el("td", { class: "muted" }, e.error || e.task)));
  const pageParams = (o) => { const p = Object.fromEntries(params); p.offset = o; return p; };
  const pager = el("div", { class: "pager" },
    offset > 0 ? el("a", { href: href("run", pageParams(Math.max(0, offset - limit))) }, "‹ previous") : null,
    el("span", { id: "count" }, `${data.total ? offset + 1 : 0}–${Math.min(offset + limit, data.total)} of ${data.total}` +
      (data.total !== data.lines ? ` matching (${data.lines} lines)` : "")),
    offset + limit < data.total ? el("a", { href: href("run", pageParams(offset + limit)) }, "next ›") : null);
  show(el("h1", {}, "Episodes of ", id), form, pager,
    el("table", { id: "episodes" }, el("thead", {}, el("tr", {},
      ["line", "index", "outcome", "return", "turns", "truncated", "invalid", "task / error"].map((h) => el("th", {}, h)))),
    el("tbody", {}, rows)), pager.cloneNode(true));
}

function select(name, options, value) {
  return el("select", { name }, options.map((o) => el("option", { value: o, selected: o === (value || "") ? "" : null }, o || "any")));
}

function components(c) {
  const entries = Object.entries(c || {});
  return entries.length ? entries.map(([k, v]) => el("span", { class: "label" }, `${k} ${num(v)}`)) : el("span", { class: "muted" }, "none");
}

async function episodePage(params) {
  const run = params.get("run"), line = Number(params.get("line"));
  const e = await api("episode", { run, line });
  const nav = el("p", {}, el("a", { href: href("run", { id: run }) }, "‹ episodes"), " · ",
    line > 1 ? el("a", { href: href("episode", { run, line: line - 1 }) }, "previous") : "previous", " · ",
    el("a", { href: href("episode", { run, line: line + 1 }) }, "next"));
  if (e.problem !== undefined) {
    show(nav, el("h1", {}, `Line ${line}`), el("p", { class: "problem", id: "line-problem" }, e.problem));
    return;
  }
  const head = el("dl", { class: "kv", id: "outcome" },
    el("dt", {}, "env"), el("dd", {}, e.env_id || "—"),
    el("dt", {}, "outcome"), el("dd", { class: e.success ? "ok" : "bad" }, e.success ? "success" : "failure"),
    el("dt", {}, "return"), el("dd", {}, num(e.total_reward)),
    el("dt", {}, "turns"), el("dd", {}, e.turns),
    el("dt", {}, "reset"), el("dd", {}, JSON.stringify(e.reset)),
    el("dt", {}, "ended"), el("dd", {}, e.terminated ? "terminated" : (e.truncation ? "truncated: " + e.truncation : "not finished"),
      e.error ? el("span", { class: "bad" }, " error: " + e.error) : null, e.attempt > 1 ? ` (attempt ${e.attempt})` : ""));
  const turns = e.turns_.map((t) => el("section", { class: "turn" },
    el("h3", {}, `Turn ${t.turn}`),
    el("div", { class: "muted" }, "observation"), el("pre", { class: "observation" }, t.observation),
    el("div", { class: "muted" }, "state summary: ", el("span", { class: "summary" }, t.summary || "—")),
    el("div", { class: "muted" }, "action (as written)"), el("pre", { class: "action" }, t.action),
    el("div", {}, el("span", { class: "label format" }, "format " + (t.call.format || "none")),
      el("span", { class: t.canonical ? "label" : "label bad" }, t.canonical ? "canonical" : "not canonical"),
      el("span", { class: t.valid ? "label" : "label bad" }, t.valid ? "valid" : "invalid"),
      t.call.calls.map((c) => el("code", { class: "call" }, `${c.name}(${JSON.stringify(c.arguments)}) `)),
      t.call.error ? el("span", { class: "bad" }, " " + t.call.error) : null),
    el("div", {}, "reward ", el("b", { class: "reward" }, num(t.reward)), " = ", components(t.components))));
  const end = e.final.observation !== null ? el("section", { class: "turn" }, el("h3", {}, "After the last action"),
    el("pre", { class: "observation" }, e.final.observation),
    el("div", { class: "muted" }, "state summary: ", e.final.summary || "—")) : null;
  show(nav, el("h1", {}, `Episode ${e.index} (line ${line})`), head, turns, end);
}

// ------------------------------------------------------------------------------------------ compare

async function comparePage(params) {
  const c = await api("compare", { a: params.get("a"), b: params.get("b") });
  show(el("h1", {}, "Compare"),
    el("dl", { class: "kv", id: "compare-summary" },
      el("dt", {}, "A"), el("dd", {}, c.a), el("dt", {}, "B"), el("dd", {}, c.b),
      el("dt", {}, "tasks in both"), el("dd", {}, c.shared, c.only_a || c.only_b ? ` (only A: ${c.only_a}, only B: ${c.only_b})` : ""),
      el("dt", {}, "successes"), el("dd", {}, `A ${c.a_success} · B ${c.b_success}`),
      el("dt", {}, "flipped"), el("dd", { id: "flips" }, `${c.gained} gained by B · ${c.lost} lost by B`)),
    el("table", {}, el("thead", {}, el("tr", {}, ["task", "A", "B"].map((h) => el("th", {}, h)))),
      el("tbody", {}, c.flips.map((f) => el("tr", { class: "flip" }, el("td", {}, f.task),
        el("td", { class: f.a ? "ok" : "bad" }, f.a ? "success" : "failure"),
        el("td", { class: f.b ? "ok" : "bad" }, f.b ? "success" : "failure"))))));
}

// ------------------------------------------------------------------------------------------ curves

function plot(name, points, xName) {
  const W = 420, H = 220, L = 52, R = 10, T = 10, B = 30;
  const canvas = el("canvas", { width: W, height: H, "data-metric": name, "data-points": points.length });
  const g = canvas.getContext("2d");
  const xs = points.map((p) => p[0]), ys = points.map((p) => p[1]);
  let [x0, x1, y0, y1] = [Math.min(...xs), Math.max(...xs), Math.min(...ys), Math.max(...ys)];
  if (x1 === x0) x1 = x0 + 1;
  if (y1 === y0) { y0 -= 0.5; y1 += 0.5; }
  const X = (x) => L + (x - x0) / (x1 - x0) * (W - L - R), Y = (y) => H - B - (y - y0) / (y1 - y0) * (H - T - B);
  g.strokeStyle = "#c8ccd4"; g.fillStyle = "#6b7280"; g.font = "11px sans-serif";
  g.beginPath(); g.moveTo(L, T); g.lineTo(L, H - B); g.lineTo(W - R, H - B); g.stroke();
  for (const y of [y0, (y0 + y1) / 2, y1]) g.fillText(Number(y.toPrecision(3)).toString(), 4, Y(y) + 4);
  g.fillText(String(x0), L, H - 12); g.fillText(String(x1), W - R - 30, H - 12);
  g.fillText(xName || "row", (W - L) / 2 + L - 10, H - 2);
  g.strokeStyle = "#2456c9"; g.lineWidth = 1.5; g.beginPath();
  points.forEach((p, i) => (i ? g.lineTo(X(p[0]), Y(p[1])) : g.moveTo(X(p[0]), Y(p[1]))));
  g.stroke();
  return el("div", { class: "chart" }, el("h3", {}, name), canvas);
}

async function curvesPage(params) {
  const m = await api("metrics", { run: params.get("run") });
  show(el("h1", {}, "Training curves of ", params.get("run")),
    el("p", { class: "muted" }, `${m.rows} rows` + (m.shown !== m.rows ? `, ${m.shown} drawn` : "") +
      (m.unreadable ? `, ${m.unreadable} unreadable` : "")),
    el("div", { class: "charts", id: "charts" }, Object.entries(m.curves).map(([k, pts]) => plot(k, pts, m.x))));
}

// ------------------------------------------------------------------------------------------ play

async function playPage() {
  const { envs } = await api("envs");
  const envSelect = el("select", { id: "play-env" }, envs.map((id) => el("option", { value: id }, id)));
  const seed = el("input", { id: "play-seed", type: "number", min: 0, placeholder: "random" });
  const board = el("div", { id: "board" });
  const start = async () => {
    try {
      const body = { env_id: envSelect.value };
      if (seed.value !== "") body.seed = Number(seed.value);
      playBoard(board, await api("play", null, body));
    } catch (error) { board.replaceChildren(el("p", { class: "problem" }, error.message)); }
  };
  show(el("h1", {}, "Play an env by hand"),
    el("div", { class: "filters" }, el("label", {}, "env ", envSelect), el("label", {}, "seed ", seed),
      el("button", { id: "play-start", onclick: start }, "Start an episode")), board);
}

function toolForm(schema, send) {
  const fn = schema.function, props = (fn.parameters || {}).properties || {};
  const required = new Set((fn.parameters || {}).required || []);
  const inputs = {};
  const fields = Object.entries(props).map(([name, p]) => {
    let input;
    if (p.type === "boolean") input = el("select", { name }, el("option", { value: "true" }, "true"), el("option", { value: "false" }, "false"));
    else if (p.enum) input = el("select", { name }, p.enum.map((v) => el("option", { value: JSON.stringify(v) }, String(v))));
    else input = el("input", { name, type: p.type === "integer" || p.type === "number" ? "number" : "text", step: "any" });
    inputs[name] = [input, p];
    return el("label", {}, name + (required.has(name) ? "" : " (optional)"), input);
  });
  const form = el("form", { class: "tool", "data-tool": fn.name, onsubmit: (e) => {
    e.preventDefault();
    const args = {};
    for (const [name, [input, p]] of Object.entries(inputs)) {
      if (input.value === "" && !required.has(name)) continue;
      if (p.type === "boolean") args[name] = input.value === "true";
      else if (p.enum) args[name] = JSON.parse(input.value);
      else if (p.type === "integer" || p.type === "number") args[name] = Number(input.value);
      else args[name] = input.value;
    }
    send(`<tool_call>${JSON.stringify({ name: fn.name, arguments: args })}</tool_call>`);
  } }, el("b", {}, fn.name), el("span", { class: "muted" }, " " + (fn.description || "")), el("div", {}, fields),
    el("button", { type: "submit" }, "Call " + fn.name));
  return form;
}

function playBoard(board, game) {
  const log = el("div", { id: "play-log" });
  const observation = el("pre", { id: "play-observation" }, game.observation);
  const summary = el("div", { id: "play-summary" }, game.summary);
  const status = el("div", { id: "play-status" }, `${game.env_id} · seed ${game.seed} · return 0`);
  const text = el("textarea", { id: "play-action", placeholder: "any action text: it goes through the tolerant parser" });
  let finished = false;
  const send = async (action) => {
    if (finished) return;
    try {
      const r = await api(`play/${game.session}/step`, null, { action });
      observation.textContent = r.observation;
      summary.textContent = r.summary;
      log.append(el("div", { class: "play-turn" }, el("code", {}, action), " → reward ", el("b", {}, num(r.reward)),
        " ", components(r.components), el("span", { class: r.parse_error ? "label bad" : "label" }, "format " + (r.format || "none"))));
      status.textContent = `${game.env_id} · seed ${game.seed} · return ${num(r.total_reward)}`;
      if (r.terminated || r.truncated) {
        finished = true;
        board.append(el("p", { id: "play-done", class: r.success ? "ok" : "bad", "data-success": String(r.success) },
          (r.success ? "Success" : "Failure") + `: return ${num(r.total_reward)}; written to ${r.written}`));
      }
    } catch (error) { log.append(el("p", { class: "problem" }, error.message)); }
  };
  board.replaceChildren(...[status, el("div", { class: "muted" }, "state summary: ", summary), observation,
    el("h2", {}, "Tools"), game.tools.map((t) => toolForm(t, send)),
    el("h2", {}, "Or write the action"), text,
    el("button", { id: "play-send", onclick: () => send(text.value) }, "Send"), el("h2", {}, "Turns"), log].flat());
}

// ------------------------------------------------------------------------------------------ routing

const ROUTES = { "": runsPage, run: runPage, episode: episodePage, compare: comparePage, curves: curvesPage, play: playPage };

async function route() {
  const [path, query] = location.hash.replace(/^#\/?/, "").split("?");
  const page = ROUTES[path] || runsPage;
  document.body.dataset.ready = "false";
  try { await page(new URLSearchParams(query || "")); } catch (error) { failure(error); }
  document.body.dataset.ready = "true";
  document.body.dataset.page = path || "runs";
}

window.addEventListener("hashchange", route);
route();
