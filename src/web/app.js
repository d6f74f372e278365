// The live-tail page: reads the SSE stream with fetch (so the API token travels in the
// Authorization header, never in a URL), formats rows with each source's live_tail_pattern,
// pauses by closing the stream and resumes from the last event id (the server replays the gap),
// and pages back with the query API's cursor. Everything from the server is set as text, never HTML.
"use strict";

const $ = (id) => document.getElementById(id);
const MAX_ROWS = 5000;
const state = {
  token: sessionStorage.getItem("logpond-token") || "",
  sources: new Map(),
  selected: new Set(),
  query: "",
  lastEventId: "",
  stream: undefined,
  paused: false,
  shown: new Set(),
  olderNext: undefined,
  dropped: 0,
  rows: 0,
  generation: 0,
};

const api = (path, init = {}) => fetch(path, { ...init, headers: { ...init.headers, authorization: `Bearer ${state.token}` } });

function setState(kind, text) {
  $("state").className = `state ${kind}`;
  $("state").textContent = text;
}

async function connect() {
  state.token = $("token").value.trim();
  if (!state.token) return;
  sessionStorage.setItem("logpond-token", state.token);
  $("forget").hidden = false;
  const sources = [];
  let next = "/api/v1/sources?per_page=250";
  while (next) {
    const response = await api(next);
    if (response.status === 401) {
      $("sources-note").textContent = "That token was not accepted.";
      setState("failed", "token not accepted");
      return;
    }
    const body = await response.json();
    sources.push(...body.data);
    next = body.pagination.next;
  }
  state.sources = new Map(sources.map((s) => [s.id, { name: s.attributes.name, pattern: s.attributes.live_tail_pattern }]));
  renderSources();
}

function renderSources() {
  const list = $("sources");
  list.replaceChildren();
  $("sources-note").textContent = state.sources.size ? "Tick the sources to watch." : "No sources yet: create one with POST /api/v1/sources.";
  for (const [id, source] of state.sources) {
    const input = Object.assign(document.createElement("input"), { type: "checkbox", value: id, checked: state.selected.has(id) });
    input.dataset.sourceId = id;
    input.addEventListener("change", () => {
      input.checked ? state.selected.add(id) : state.selected.delete(id);
      restart();
    });
    const name = document.createElement("span");
    name.textContent = source.name;
    const pattern = Object.assign(document.createElement("span"), { className: "pattern", textContent: source.pattern });
    name.append(pattern);
    const label = document.createElement("label");
    label.append(input, name);
    const item = document.createElement("li");
    item.append(label);
    list.append(item);
  }
}

function params(extra = {}) {
  const search = new URLSearchParams({ source_ids: [...state.selected].join(","), ...extra });
  if (state.query) search.set("query", state.query);
  return search;
}

/** A fresh view: new sources or query. Starts live, then shows the newest stored page above. */
function restart() {
  state.stream?.abort();
  state.generation++;
  state.lastEventId = "";
  state.olderNext = undefined;
  state.shown.clear();
  state.rows = 0;
  state.dropped = 0;
  $("list").replaceChildren();
  updateCounts();
  $("query-error").hidden = true;
  $("older").hidden = true;
  $("empty").hidden = state.selected.size > 0;
  if (state.selected.size === 0) return setState("idle", "no source picked");
  if (state.paused) return setState("paused", "paused");
  void stream(state.generation);
  void loadOlder(state.generation);
}

async function stream(generation) {
  const controller = new AbortController();
  state.stream = controller;
  setState("connecting", "connecting…");
  const headers = state.lastEventId ? { "last-event-id": state.lastEventId } : {};
  let response;
  try {
    response = await api(`/api/v2/query/live-tail/stream?${params()}`, { headers, signal: controller.signal });
  } catch {
    return retry(generation, controller);
  }
  if (!response.ok) return refused(response);
  setState("live", "live");
  const reader = response.body.pipeThrough(new TextDecoderStream()).getReader();
  let buffer = "";
  try {
    for (;;) {
      const { value, done } = await reader.read();
      if (done) break;
      buffer += value;
      let end;
      while ((end = buffer.indexOf("\n\n")) >= 0) {
        handle(buffer.slice(0, end));
        buffer = buffer.slice(end + 2);
      }
    }
  } catch {}
  retry(generation, controller);
}

function retry(generation, controller) {
  if (controller.signal.aborted || generation !== state.generation || state.paused) return;
  setState("connecting", "reconnecting…");
  setTimeout(() => generation === state.generation && !state.paused && stream(generation), 1000);
}

async function refused(response) {
  const body = await response.json().catch(() => ({ errors: `HTTP ${response.status}` }));
  setState("failed", response.status === 401 ? "token not accepted" : "stopped");
  $("query-error").textContent = body.errors;
  $("query-error").hidden = false;
}

function handle(block) {
  let id = "", event = "message", data = "";
  for (const line of block.split("\n")) {
    if (line.startsWith(":")) continue;
    const colon = line.indexOf(":");
    const field = colon < 0 ? line : line.slice(0, colon);
    const value = colon < 0 ? "" : line.slice(colon + 1).replace(/^ /, "");
    if (field === "id") id = value;
    else if (field === "event") event = value;
    else if (field === "data") data += data ? `\n${value}` : value;
  }
  if (event === "dropped") {
    state.dropped += JSON.parse(data).count || 0;
    return updateCounts();
  }
  // Per SSE, an id without data still moves the position (the server sends one at the live start).
  if (id) state.lastEventId = id;
  if (event !== "message" || !data) return;
  addRow(JSON.parse(data), "bottom");
}

async function loadOlder(generation) {
  const search = params({ batch: "100" });
  const first = !state.olderNext;
  if (state.olderNext) search.set("cursor", state.olderNext);
  const response = await api(`/api/v2/query/live-tail?${search}`);
  if (generation !== state.generation) return;
  if (!response.ok) return refused(response);
  const body = await response.json();
  const box = $("rows");
  const fromBottom = box.scrollHeight - box.scrollTop;
  for (const row of body.data) addRow(row, "top");
  // The first page opens at the newest row (else the view sat on the oldest and live rows arrived
  // out of sight); an older page keeps the rows the reader was looking at in place.
  box.scrollTop = first ? box.scrollHeight : box.scrollHeight - fromBottom;
  state.olderNext = body.pagination.next ? new URL(body.pagination.next).searchParams.get("cursor") : undefined;
  $("older").hidden = !state.olderNext;
}

function addRow(row, where) {
  if (state.shown.has(row.id)) return;
  state.shown.add(row.id);
  const box = $("rows");
  const atBottom = box.scrollHeight - box.scrollTop - box.clientHeight < 40;
  const item = render(row);
  const list = $("list");
  if (where === "top") list.prepend(item);
  else {
    item.className = "fresh";
    list.append(item);
  }
  state.rows++;
  while (list.childElementCount > MAX_ROWS) list.firstElementChild.remove();
  $("empty").hidden = true;
  updateCounts();
  if (where === "bottom" && atBottom) box.scrollTop = box.scrollHeight;
}

function render(row) {
  const source = state.sources.get(row.source_id);
  const item = document.createElement("li");
  item.dataset.id = row.id;
  const time = Object.assign(document.createElement("span"), { className: "time", textContent: row.dt.slice(11, 23), title: row.dt });
  const name = Object.assign(document.createElement("span"), { className: "source", textContent: source ? source.name : `#${row.source_id}` });
  const message = document.createElement("span");
  message.className = "message";
  message.append(...formatted(source ? source.pattern : "{level} {message}", row));
  item.append(time, name, message);
  item.addEventListener("click", () => {
    const open = item.querySelector("pre");
    if (open) return open.remove();
    item.append(Object.assign(document.createElement("pre"), { textContent: JSON.stringify(row, null, 2) }));
  });
  return item;
}

/** `{level} {message}` → text and spans; dotted paths allowed; a missing field is empty. */
function formatted(pattern, row) {
  const parts = [];
  let last = 0;
  for (const match of pattern.matchAll(/\{([^{}]+)\}/g)) {
    if (match.index > last) parts.push(document.createTextNode(pattern.slice(last, match.index)));
    const path = match[1].trim();
    const value = path.split(".").reduce((object, key) => (object !== null && typeof object === "object" ? object[key] : undefined), row);
    const text = value === undefined || value === null ? "" : typeof value === "object" ? JSON.stringify(value) : String(value);
    if (/^(level|severity|log\.level)$/i.test(path)) {
      parts.push(Object.assign(document.createElement("span"), { className: `level ${levelClass(text)}`, textContent: text }));
    } else parts.push(document.createTextNode(text));
    last = match.index + match[0].length;
  }
  if (last < pattern.length) parts.push(document.createTextNode(pattern.slice(last)));
  return parts;
}

function levelClass(level) {
  const l = level.toLowerCase();
  if (/^(err|error|fatal|crit|critical|alert|emerg|panic)/.test(l)) return "error";
  if (/^warn/.test(l)) return "warn";
  if (/^(info|notice)/.test(l)) return "info";
  return "debug";
}

function updateCounts() {
  $("count").textContent = `${state.rows} row${state.rows === 1 ? "" : "s"}`;
  $("dropped").hidden = state.dropped === 0;
  $("dropped").textContent = `${state.dropped} dropped (too slow to keep up; reload older rows to see them)`;
}

$("token").value = state.token;
$("forget").hidden = !state.token;
$("token-form").addEventListener("submit", (event) => {
  event.preventDefault();
  void connect();
});
$("forget").addEventListener("click", () => {
  sessionStorage.removeItem("logpond-token");
  state.token = "";
  $("token").value = "";
  $("forget").hidden = true;
});
$("query-form").addEventListener("submit", (event) => {
  event.preventDefault();
  state.query = $("query").value.trim();
  restart();
});
$("pause").addEventListener("click", () => {
  state.paused = !state.paused;
  $("pause").textContent = state.paused ? "Resume" : "Pause";
  $("pause").setAttribute("aria-pressed", String(state.paused));
  if (state.paused) {
    state.stream?.abort();
    setState("paused", "paused");
  } else if (state.selected.size > 0) void stream(state.generation);
});
$("clear").addEventListener("click", () => {
  $("list").replaceChildren();
  state.rows = 0;
  updateCounts();
});
$("older").addEventListener("click", () => loadOlder(state.generation));
if (state.token) void connect();
