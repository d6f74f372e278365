// The log explorer page: token → sources → a view. "Live" (the default) shows the newest stored
// rows, then streams new ones (SSE read with fetch; Pause closes the stream, Resume reconnects from
// the last event id so nothing is lost). A range (15 min … 7 d, custom, or a zoom on the
// histogram) shows the window's stored rows. Either way "Load older" walks the query API's cursor
// back to the start of the stored events (list.js). Everything from the server is set as text.
import { withTerm } from "./fields.js";
import { createHistogram } from "./histogram.js";
import { loadOlder, queueLive, resetList, retime, updateCounts } from "./list.js";
import { formatTime, marker, searchedWords, zoneName } from "./rows.js";
import { openContext } from "./context.js";
import { $, api, EARLIEST, isoMicro, microBefore, msOf, params, setState, showEmpty, showError, sourcesWhere, state } from "./state.js";
import { readEvents } from "./stream.js";
import { readUrl, writeUrl } from "./url.js";
import { loadViews, pageRangeOf, saveView } from "./views.js";

const RANGE_MS = { "15m": 15 * 60_000, "1h": 3_600_000, "24h": 86_400_000, "7d": 7 * 86_400_000 };
const RANGE_NAME = { "15m": "last 15 minutes", "1h": "last hour", "24h": "last 24 hours", "7d": "last 7 days" };
/** Live view: the stored rows and the histogram of this long before now, then the stream. */
const LIVE_MS = 30 * 60_000;

const histogram = createHistogram({
  box: $("histogram"),
  plot: $("histogram-plot"),
  axis: $("histogram-axis"),
  total: $("histogram-total"),
  legend: $("legend"),
  onZoom: zoom,
});

// ── token and sources ──────────────────────────────────────────────────────────────────────────

async function connect() {
  state.token = $("token").value.trim();
  if (!state.token) return;
  sessionStorage.setItem("logpond-token", state.token);
  $("forget").hidden = false;
  setState("connecting", "connecting…");
  const sources = [];
  let next = "/api/v1/sources?per_page=250";
  while (next) {
    let response;
    try {
      response = await api(next);
    } catch {
      return setState("failed", "logpond did not answer");
    }
    if (response.status === 401) {
      $("sources-note").textContent = "That token was not accepted.";
      state.connected = false;
      return setState("failed", "token not accepted");
    }
    const body = await response.json();
    sources.push(...body.data);
    next = body.pagination.next;
  }
  state.connected = true;
  state.sources = new Map(
    sources.map((s) => [s.id, { name: s.attributes.name, pattern: s.attributes.live_tail_pattern, paused: s.attributes.ingesting_paused }]),
  );
  for (const id of state.selected) if (!state.sources.has(id)) state.selected.delete(id);
  renderSources();
  restart();
  void loadViews(applyView);
  // A link to an event: it opens with its context once the sources are known.
  if (linkedEvent && state.sources.has(linkedEvent.source_id)) void openContext(linkedEvent);
  linkedEvent = undefined;
}

/** A saved view on the page: its sources (those still there), query, range and columns. */
function applyView({ source_ids, query, range, columns }) {
  const { range: pageRange, custom } = pageRangeOf(range);
  Object.assign(state, { selected: new Set(source_ids.filter((id) => state.sources.has(id))), query, range: pageRange, columns });
  if (custom) state.custom = custom;
  $("query").value = query;
  showRange(pageRange);
  if (custom) fillCustom(custom);
  renderSources();
  restart();
}

function forget() {
  sessionStorage.removeItem("logpond-token");
  Object.assign(state, { token: "", connected: false, sources: new Map(), selected: new Set() });
  $("token").value = "";
  $("forget").hidden = true;
  $("sources").replaceChildren();
  $("views-box").hidden = true;
  $("sources-note").textContent = "Enter the API token or a read token to list sources.";
  restart();
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
    const name = Object.assign(document.createElement("span"), { className: "name", textContent: source.name });
    const text = document.createElement("span");
    text.append(name);
    if (source.paused) {
      name.append(Object.assign(document.createElement("span"), { className: "badge paused", textContent: "paused" }));
    }
    text.append(Object.assign(document.createElement("span"), { className: "pattern", textContent: source.pattern }));
    const label = document.createElement("label");
    label.append(input, text);
    const item = document.createElement("li");
    if (source.paused) {
      item.className = "paused";
      item.title = "Ingestion is paused for this source (ingesting_paused): events sent to it are dropped, so no new rows will arrive.";
    }
    item.append(label);
    list.append(item);
  }
}

// ── views ──────────────────────────────────────────────────────────────────────────────────────

/** A fresh view: new sources, query or range. */
function restart() {
  state.stream?.abort();
  state.stream = undefined;
  const generation = ++state.generation;
  Object.assign(state, { lastEventId: "", segments: [], dropped: 0, window: undefined, event: undefined, mark: marker(searchedWords(state.query)) });
  writeUrl();
  resetList();
  $("query-error").hidden = true;
  histogram.clear(state.connected && state.selected.size > 0);
  const live = state.range === "live";
  $("pause").hidden = !live || state.selected.size === 0;
  if (!state.connected) {
    setState("idle", "not connected");
    return showEmpty("Enter the API token or a read token above to list the sources.");
  }
  if (state.selected.size === 0) {
    setState("idle", "connected — pick a source");
    updateWindowText();
    return showEmpty(`Pick a source ${sourcesWhere()} to see its events.`);
  }
  showEmpty("Loading…");
  if (live) {
    const from = Date.now() - LIVE_MS;
    // The first stretch leaves `to` to the server's clock, where the stream starts: no gap between them.
    state.segments = [{ from: isoMicro(from) }, { from: EARLIEST, to: microBefore(from) }];
    void loadHistogram(generation, { from: "now-30m" });
    if (state.paused) setState("paused", "paused");
    else void stream(generation);
  } else {
    const now = Date.now();
    state.window = state.range === "custom" ? state.custom : { from: isoMicro(now - RANGE_MS[state.range]), to: isoMicro(now) };
    state.segments = [{ ...state.window }, { from: EARLIEST, to: microBefore(msOf(state.window.from)), before: true }];
    setState("stored", "stored events");
    void loadHistogram(generation, state.window);
  }
  updateWindowText();
  void loadOlder(generation);
}

function showRange(range) {
  for (const button of document.querySelectorAll("#ranges button")) button.setAttribute("aria-checked", String(button.dataset.range === range));
  $("custom").hidden = range !== "custom";
}

function setRange(range) {
  state.range = range;
  showRange(range);
  if (range !== "custom") return restart();
  // Custom opens on the window shown (or the last hour) and waits for Show (or Apply).
  state.custom = state.window ?? { from: isoMicro(Date.now() - 3_600_000), to: isoMicro(Date.now()) };
  fillCustom(state.custom);
}

function fillCustom({ from, to }) {
  $("custom-from").value = inputValue(msOf(from));
  $("custom-to").value = inputValue(msOf(to));
}

/** The histogram's zoom (a drag or a click on a bar): that stretch becomes the custom window. */
function zoom(from, toExcluded) {
  setRange("custom");
  state.custom = { from: isoMicro(from), to: microBefore(toExcluded) };
  fillCustom(state.custom);
  restart();
}

/** The custom inputs' text for an instant, "2026-11-27 17:05:09" (24 h, as the rows), in the zone the page shows. */
function inputValue(ms) {
  const date = new Date(state.utc ? ms : ms - new Date(ms).getTimezoneOffset() * 60_000);
  return date.toISOString().slice(0, 19).replace("T", " ");
}

/** An instant from "YYYY-MM-DD HH:MM[:SS]" in the zone the page shows; undefined when it is not one. */
function inputInstant(value) {
  const m = value.trim().match(/^(\d{4})-(\d{2})-(\d{2})[ T](\d{2}):(\d{2})(?::(\d{2}))?$/);
  if (!m) return undefined;
  const [y, mo, d, h, mi, s = 0] = m.slice(1).map(Number);
  if (mo < 1 || mo > 12 || d < 1 || d > 31 || h > 23 || mi > 59 || s > 59) return undefined;
  const ms = state.utc ? Date.UTC(y, mo - 1, d, h, mi, s) : new Date(y, mo - 1, d, h, mi, s).getTime();
  return Number.isNaN(ms) ? undefined : ms;
}

function updateWindowText() {
  const text = $("window-text");
  const zone = state.utc ? "UTC" : zoneName();
  $("zone").textContent = state.utc ? "UTC" : `local time (${zone})`;
  if (!state.selected.size) return (text.textContent = "");
  if (state.range === "live") return (text.textContent = "last 30 min, then live");
  if (!state.window) return (text.textContent = ""); // a range from the URL, not yet shown
  const { from, to } = state.window;
  const span = windowSpan(from, to);
  text.textContent = state.range === "custom" ? span : `${RANGE_NAME[state.range]} (${span})`;
  text.title = `${from} – ${to} (UTC)`;
}

/** "Nov 23 23:41:26 – Nov 24 23:41:26", the second date left out when it is the first one's. */
function windowSpan(from, to) {
  const [a, b] = [from, to].map((dt) => formatTime(dt, state.utc, new Date(), true).replace(/\.\d{3}$/, ""));
  const [dayA, dayB] = [a, b].map((t) => t.slice(0, t.lastIndexOf(" ")));
  return `${a} – ${dayA === dayB ? b.slice(b.lastIndexOf(" ") + 1) : b}${state.utc ? " UTC" : ""}`;
}

/** Bumped by every histogram request: an answer to an older one (another split) is dropped. */
let histogramAsked = 0;

async function loadHistogram(generation, window) {
  const asked = ++histogramAsked;
  const width = $("rows").clientWidth || 1000;
  const buckets = String(Math.max(20, Math.min(240, Math.floor(width / 8))));
  state.histogramWindow = window;
  const by = state.histogramBy === "level" ? {} : { by: state.histogramBy };
  const extra = { buckets, ...by, from: window.from, ...(window.to ? { to: window.to } : {}) };
  let response;
  try {
    response = await api(`/api/v2/query/histogram?${params(extra)}`);
  } catch {
    return;
  }
  if (generation !== state.generation || asked !== histogramAsked) return;
  if (!response.ok) {
    const body = await response.json().catch(() => ({ errors: `HTTP ${response.status}` }));
    histogram.clear(true);
    $("histogram-total").textContent = "no histogram (see the message above)";
    // A 400 is the query's or the window's, and the rows' request says the same: say it once.
    if (response.status !== 400) showError(`histogram: ${body.errors}`);
    return;
  }
  const answer = await response.json();
  if (generation !== state.generation || asked !== histogramAsked) return;
  histogram.show(answer);
  histogram.setUtc(state.utc);
}

// ── the live stream ────────────────────────────────────────────────────────────────────────────

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
  try {
    await readEvents(response, handle);
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
  showError(body.errors);
}

function handle({ id, event, data }) {
  if (event === "dropped") {
    state.dropped += JSON.parse(data).count || 0;
    return updateCounts();
  }
  // Per SSE, an id without data still moves the position (the server sends one at the live start).
  if (id) state.lastEventId = id;
  if (event !== "message" || !data) return;
  const row = JSON.parse(data);
  if (queueLive(row)) histogram.add(row.dt, state.histogramBy === "level" ? row.level : valueAt(row, state.histogramBy));
}

/** A row's value at a dotted path as the histogram by a field counts it (its text), or undefined. */
function valueAt(row, path) {
  let value = row;
  for (const step of path.split(".")) {
    if (value === null || typeof value !== "object") return undefined;
    value = value[step];
  }
  if (value === null || value === undefined) return undefined;
  return typeof value === "object" ? JSON.stringify(value) : String(value);
}

/** The histogram's "by" list: level, the Fields sidebar's fields, and the split shown (one from the URL may be neither yet). */
function fillHistogramBy() {
  const select = $("histogram-by");
  const paths = ["level", ...state.fieldPaths.filter((path) => path !== "level")];
  if (!paths.includes(state.histogramBy)) paths.push(state.histogramBy);
  select.replaceChildren(...paths.map((path) => Object.assign(document.createElement("option"), { value: path, textContent: path })));
  select.value = state.histogramBy;
}

// The histogram's split: level, or one of the Fields sidebar's fields (offered when the list opens).
$("histogram-by").addEventListener("focus", fillHistogramBy);
$("histogram-by").addEventListener("change", () => {
  state.histogramBy = $("histogram-by").value;
  writeUrl();
  if (!state.histogramWindow || !state.selected.size) return;
  histogram.clear(true);
  void loadHistogram(state.generation, state.histogramWindow);
});

// ── wiring ─────────────────────────────────────────────────────────────────────────────────────

$("token").value = state.token;
$("forget").hidden = !state.token;
$("token-form").addEventListener("submit", (event) => {
  event.preventDefault();
  void connect();
});
$("forget").addEventListener("click", forget);
$("query-form").addEventListener("submit", (event) => {
  event.preventDefault();
  state.query = $("query").value.trim();
  restart();
});
$("save-view").addEventListener("submit", async (event) => {
  event.preventDefault();
  const name = $("view-name").value.trim();
  if (!name) return showError("Save view: give the view a name.");
  if (!state.selected.size) return showError("Save view: pick at least one source.");
  if (await saveView(name)) {
    $("view-name").value = "";
    await loadViews(applyView);
  }
});
$("ranges").addEventListener("click", (event) => {
  const button = event.target.closest("button[data-range]");
  if (button) setRange(button.dataset.range);
});
$("custom").addEventListener("submit", (event) => {
  event.preventDefault();
  const from = inputInstant($("custom-from").value);
  const to = inputInstant($("custom-to").value);
  if (from === undefined || to === undefined) return showError("Custom: give From and To as YYYY-MM-DD HH:MM:SS (24-hour clock).");
  if (from > to) return showError("Custom: From is after To.");
  // `To` as typed is a whole second: the window runs to its end.
  state.custom = { from: isoMicro(from), to: microBefore(to + 1000) };
  restart();
});
$("pause").addEventListener("click", () => {
  state.paused = !state.paused;
  $("pause").textContent = state.paused ? "Resume" : "Pause";
  $("pause").setAttribute("aria-pressed", String(state.paused));
  if (state.paused) {
    state.stream?.abort();
    setState("paused", "paused");
  } else if (state.selected.size > 0 && state.range === "live") void stream(state.generation);
});
$("zone").addEventListener("click", () => {
  state.utc = !state.utc;
  localStorage.setItem("logpond-utc", state.utc ? "1" : "0");
  retime();
  histogram.setUtc(state.utc);
  if (state.range === "custom" && state.custom) fillCustom(state.custom);
  updateWindowText();
});
$("fields").addEventListener("click", (event) => {
  const button = event.target.closest("button.facet");
  if (!button) return;
  state.query = withTerm(state.query, event.altKey ? button.dataset.exclude : button.dataset.term);
  $("query").value = state.query;
  restart();
});
document.addEventListener("keydown", (event) => {
  if (event.key === "/" && document.activeElement?.tagName !== "INPUT") {
    event.preventDefault();
    $("query").focus();
  }
});
// Phones: the field sidebar starts folded, so the rows get more of the screen.
if (matchMedia("(max-width: 720px)").matches) $("fields-box").open = false;
// The view a link or a reload names (url.js); its event opens once connected.
const linked = readUrl();
let linkedEvent = linked.event;
delete linked.event;
Object.assign(state, linked);
$("query").value = state.query;
fillHistogramBy();
showRange(state.range);
if (state.range === "custom") fillCustom(state.custom);
updateWindowText();
if (state.token) void connect();
