// The row list: pages of stored rows (the query API's cursor, then on past the window to the
// first stored event), rows added at either end at most MAX_ROWS, one line each, and the field
// sidebar of the rows shown. Rows and fields are set as text, never as HTML.
import { details } from "./context.js";
import { topFields, filterTerm } from "./fields.js";
import { formatTime, lineNodes, markNodes, timeTitle } from "./rows.js";
import { $, api, EARLIEST, params, showEmpty, showError, state } from "./state.js";
import { writeUrl } from "./url.js";

/** Rows in the list at most; past it rows leave from the end away from where rows arrive. */
export const MAX_ROWS = 5000;
/**
 * While live rows arrive at the newest row, the list keeps this many: every addition lays out
 * the list again, and nobody reads 5,000 rows going by (Load older brings back the rest).
 */
export const LIVE_ROWS_MAX = 1000;
const PAGE = 200;
const NUMBER = new Intl.NumberFormat("en-US");
/**
 * Live rows go into the list at most this often: each time lays out the list again (removing the
 * oldest rows moves every row), so at 1,000 rows/s four times a second costs a tenth of what every
 * frame does, and a reader still sees rows arrive as they come.
 */
const LIVE_EVERY_MS = 250;
/** Rendering a batch yields to the page this often (a task over 50 ms is one the user feels). */
const SLICE_MS = 8;
/** A live batch this small still flashes its rows; a bigger one arrives without the animation. */
const FRESH_MAX = 20;
/** The sidebar is recomputed at least this long apart, and at most 5 % of the time. */
const FIELDS_EVERY_MS = 500;

export async function loadOlder(generation) {
  const segment = state.segments[0];
  if (!segment || state.loadingOlder === generation) return;
  state.loadingOlder = generation;
  $("older").disabled = true;
  $("older").textContent = "Loading…";
  try {
    const search = params({ batch: String(PAGE), from: segment.from });
    if (segment.to) search.set("to", segment.to);
    if (segment.cursor) search.set("cursor", segment.cursor);
    const response = await api(`/api/v2/query/live-tail?${search}`);
    if (generation !== state.generation) return;
    if (!response.ok) return failed((await response.json().catch(() => ({ errors: `HTTP ${response.status}` }))).errors, response.status);
    const body = await response.json();
    const box = $("rows");
    const opening = state.shown.size === 0;
    const fromBottom = box.scrollHeight - box.scrollTop;
    if (segment.before && !segment.started && body.data.length) {
      $("list").prepend(divider(`before ${formatTime(state.window.from, state.utc).replace(/\.\d{3}$/, "")} — outside the window`));
    }
    const firstPage = !segment.started;
    segment.started = true;
    addRows(body.data);
    segment.cursor = body.pagination.next ? new URL(body.pagination.next).searchParams.get("cursor") : undefined;
    if (!segment.cursor) state.segments.shift();
    if (!state.segments.length) $("list").prepend(divider("start of the stored events"));
    // The view opens at the newest row; an older page keeps the rows the reader was looking at in place.
    box.scrollTop = opening ? box.scrollHeight : box.scrollHeight - fromBottom;
    if (firstPage && body.meta?.empty_window && state.shown.size === 0) emptyWindow(body.meta, generation);
    else if (state.shown.size === 0 && !state.segments.length)
      showEmpty(state.range === "live" ? "Nothing stored yet — new events appear here as they arrive." : "No events, here or before.");
  } catch (error) {
    if (generation === state.generation) failed(`could not load rows: ${error.message}`);
  } finally {
    if (state.loadingOlder === generation) state.loadingOlder = undefined;
    if (generation === state.generation) updateOlder();
  }
}

/** A page of rows that did not come: the message above, and in the list instead of "Loading…". */
function failed(errors, status) {
  showError(String(errors));
  if (state.shown.size > 0) return;
  const why = status === 503 ? "logpond is busy or the query took too long" : status ? `HTTP ${status}` : "no answer";
  showEmpty(`No rows: the request failed (${why}). Apply or pick a range to try again.`);
}

/** An empty first page: say so, and where the newest older event is (meta.older_dt). */
function emptyWindow(meta, generation) {
  const where = state.range === "live" ? "in the last 30 minutes" : "in this window";
  if (meta.older === false) return showEmpty(`No events ${where}, and none before.${state.range === "live" ? " New events appear here as they arrive." : ""}`);
  const when = meta.older_dt ? ` The newest older one is from ${formatTime(meta.older_dt, state.utc)}.` : "";
  showEmpty(`No events ${where}.${when}`);
  // Live: go on to the newest stored rows, so a quiet source still opens on its latest events
  // (once the page that found nothing has finished).
  if (state.range === "live" && meta.older) queueMicrotask(() => loadOlder(generation));
}

export function updateOlder() {
  const button = $("older");
  const segment = state.segments[0];
  button.disabled = false;
  button.hidden = !segment;
  if (segment)
    button.textContent =
      segment.before && !segment.started ? `Load older — before ${formatTime(state.window.from, state.utc).replace(/\.\d{3}$/, "")}` : "Load older";
}

function divider(text) {
  return Object.assign(document.createElement("li"), { className: "divider", textContent: text });
}

/** A page of older rows (newest first) at the top of the list, in one insertion. */
function addRows(rows) {
  const fragment = document.createDocumentFragment();
  for (const row of rows) {
    if (state.shown.has(row.id)) continue;
    state.shown.set(row.id, row);
    fragment.prepend(render(row));
  }
  if (!fragment.childNodes.length) return;
  $("list").prepend(fragment);
  const over = state.shown.size - MAX_ROWS;
  if (over > 0) removeRows(over, "bottom");
  $("empty").hidden = true;
  updateCounts();
  scheduleFields();
}

// ── live rows: queued as they arrive, added once a frame ───────────────────────────────────────
// Adding a row and reading the list's height after each one lays out the whole list per row
// (1,000 rows/s blocked the tab for over a minute); here a frame's rows go in as one fragment, the
// height is read once, and a reader scrolled away keeps their rows: new ones wait, counted in
// "N new events", at most LIVE_ROWS_MAX of them (older waiting ones are dropped and the list restarts
// from the newest when they are shown; "Load older" reaches the rest).

/** Live rows not yet in the list, oldest first (ids in `waitingIds`). */
let waiting = [];
const waitingIds = new Set();
/** Live rows that arrived while the reader was scrolled away, those dropped from `waiting` included. */
let unseen = 0;
let frame = 0;
let shownAt = 0;
/** The batch being rendered: { rows, items, fresh, restart, cancelled }. */
let building;
/** The reader is at the newest row (within 40 px of the bottom). */
let pinned = true;
globalThis.logpond.liveRowsMax = LIVE_ROWS_MAX;

/** Queues a live row unless it is shown or queued already; false when it was. */
export function queueLive(row) {
  if (state.shown.has(row.id) || waitingIds.has(row.id)) return false;
  waiting.push(row);
  waitingIds.add(row.id);
  if (!pinned) unseen++;
  scheduleLive();
  return true;
}

function scheduleLive() {
  if (frame) return;
  const wait = Math.max(0, shownAt + LIVE_EVERY_MS - performance.now());
  frame = setTimeout(() => requestAnimationFrame(showLive), wait);
}

function showLive() {
  frame = 0;
  shownAt = performance.now();
  if (building || !waiting.length) return;
  if (!pinned) return showUnseen();
  let rows = waiting;
  waiting = [];
  unseen = 0;
  $("new-events").hidden = true;
  // More than the list keeps: it starts again from the newest rows.
  const restart = rows.length >= LIVE_ROWS_MAX;
  if (restart) rows = rows.slice(-LIVE_ROWS_MAX);
  building = { rows, items: [], fresh: rows.length <= FRESH_MAX, restart, cancelled: false };
  renderSlice(building);
}

/**
 * Renders the batch's rows a slice at a time (each at most SLICE_MS, then the page may answer
 * input), off the document, so no slice lays anything out; the next frame inserts them all.
 */
function renderSlice(batch) {
  if (batch.cancelled) return;
  const until = performance.now() + SLICE_MS;
  while (batch.items.length < batch.rows.length && performance.now() < until) {
    const item = render(batch.rows[batch.items.length]);
    if (batch.fresh) item.classList.add("fresh");
    batch.items.push(item);
  }
  if (batch.items.length < batch.rows.length) setTimeout(() => renderSlice(batch), 0);
  else requestAnimationFrame(() => insertLive(batch));
}

function insertLive(batch) {
  if (batch.cancelled) return;
  building = undefined;
  if (batch.restart) removeRows(state.shown.size, "top");
  const fragment = document.createDocumentFragment();
  batch.rows.forEach((row, i) => {
    waitingIds.delete(row.id);
    // A stored page read meanwhile may have shown it.
    if (state.shown.has(row.id)) return;
    state.shown.set(row.id, row);
    fragment.append(batch.items[i]);
  });
  $("list").append(fragment);
  // Rows leaving above a reader who scrolled away meanwhile do not move their view (scroll anchoring).
  const over = state.shown.size - LIVE_ROWS_MAX;
  if (over > 0) removeRows(over, "top");
  $("empty").hidden = true;
  updateCounts();
  scheduleFields();
  if (pinned) $("rows").scrollTop = $("rows").scrollHeight;
  if (waiting.length) scheduleLive();
}

/** Scrolled away: the rows stay as they are; the button says how many wait. */
function showUnseen() {
  if (waiting.length > LIVE_ROWS_MAX) {
    for (const row of waiting.splice(0, waiting.length - LIVE_ROWS_MAX)) waitingIds.delete(row.id);
  }
  const button = $("new-events");
  button.textContent = `${NUMBER.format(unseen)} new event${unseen === 1 ? "" : "s"} ↓`;
  button.hidden = unseen === 0;
}

/** "N new events": the waiting rows go in and the view goes to the newest. */
function jumpToNewest() {
  pinned = true;
  showLive();
  const box = $("rows");
  box.scrollTop = box.scrollHeight;
}

/** Drops what waits (a new view). */
function clearWaiting() {
  if (building) building.cancelled = true;
  building = undefined;
  waiting = [];
  waitingIds.clear();
  unseen = 0;
  $("new-events").hidden = true;
}

/** Removes `n` rows from the top or the bottom of the list at once. */
function removeRows(n, end) {
  const list = $("list");
  const rows = list.querySelectorAll(":scope > li[data-id]");
  n = Math.min(n, rows.length);
  if (n <= 0) return;
  const first = end === "top" ? 0 : rows.length - n;
  const last = end === "top" ? n - 1 : rows.length - 1;
  for (let i = first; i <= last; i++) state.shown.delete(rows[i].dataset.id);
  // One range, one removal: the list is changed once, not once per row.
  const range = document.createRange();
  range.setStartBefore(rows[first]);
  range.setEndAfter(rows[last]);
  range.deleteContents();
  if (end === "top") {
    // Load older resumes from the new top row (rows sharing its dt are shown already, skipped by id).
    const top = list.querySelector(":scope > li[data-id]");
    state.segments = top ? [{ from: EARLIEST, to: state.shown.get(top.dataset.id).dt }] : state.segments;
    for (const mark of list.querySelectorAll(":scope > li.divider")) mark.remove();
    updateOlder();
  }
}

function render(row) {
  const source = state.sources.get(row.source_id);
  const item = document.createElement("li");
  item.dataset.id = row.id;
  const shown = formatTime(row.dt, state.utc);
  fitTime(shown);
  const time = Object.assign(document.createElement("span"), { className: "time", textContent: shown });
  time.dataset.dt = row.dt;
  const name = Object.assign(document.createElement("span"), { className: "source", textContent: source ? source.name : `#${row.source_id}` });
  const line = Object.assign(document.createElement("span"), { className: "line" });
  const pattern = state.columns.length ? state.columns.map((path) => `{${path}}`).join(" ") : source ? source.pattern : "{level} {message}";
  line.append(...markNodes(lineNodes(pattern, row), state.mark));
  item.append(time, name, line);
  return item;
}

/** The time column is as wide as its longest cell ("14:03:07.125", "Nov 23 14:03:07.125", …), the same on every row. */
let timeWidth = 0;
function fitTime(text) {
  if (text.length <= timeWidth) return;
  timeWidth = text.length;
  $("list").style.setProperty("--time-width", `${timeWidth}ch`);
}

export function updateCounts() {
  const n = state.shown.size;
  $("count").textContent = `${NUMBER.format(n)} row${n === 1 ? "" : "s"}`;
  $("dropped").hidden = state.dropped === 0;
  $("dropped").textContent = `${state.dropped} dropped (too slow to keep up; reload older rows to see them)`;
}

// The field sidebar, recomputed while rows arrive at most every FIELDS_EVERY_MS, and never more
// than a twentieth of the time (5,000 rows take some milliseconds to count).
let fieldsTimer;
let fieldsCostMs = 0;
export function scheduleFields() {
  if (fieldsTimer === undefined) fieldsTimer = setTimeout(renderFields, Math.max(FIELDS_EVERY_MS, 20 * fieldsCostMs));
}

function renderFields() {
  const started = performance.now();
  fieldsTimer = undefined;
  const fields = windowCounts(topFields(state.shown.values()));
  state.fieldPaths = fields.map((field) => field.path);
  $("fields-box").hidden = fields.length === 0;
  $("fields").replaceChildren(
    ...fields.map(({ path, present, values }) => {
      const box = Object.assign(document.createElement("div"), { className: "field" });
      box.append(Object.assign(document.createElement("div"), { className: "field-name", textContent: path }));
      const list = document.createElement("ul");
      for (const { value, n } of values) {
        const button = Object.assign(document.createElement("button"), {
          type: "button",
          className: "facet",
          title: `${filterTerm(path, value)} (Alt-click: ${filterTerm(path, value, true)})`,
        });
        button.dataset.term = filterTerm(path, value);
        button.dataset.exclude = filterTerm(path, value, true);
        button.style.setProperty("--share", `${Math.round((n / present) * 100)}%`);
        button.append(
          Object.assign(document.createElement("span"), { className: "value", textContent: value === "" ? '""' : String(value) }),
          Object.assign(document.createElement("span"), { className: "n", textContent: n.toLocaleString("en-US") }),
        );
        const item = document.createElement("li");
        item.append(button);
        list.append(item);
      }
      box.append(list);
      return box;
    }),
  );
  fieldsCostMs = performance.now() - started;
}

// The sidebar's counts are the window's: the fields are chosen from the rows shown, their values
// counted over the whole window and query by GET /api/v2/query/aggregate (facets=), once per view
// and set of fields. Until that answers, or when it fails (a 503 past QUERY_TIMEOUT_MS), the rows'
// own counts are shown, and the hint says so. The count stops at SIDEBAR_MAX_EVENTS matching events
// (max_events=): past it the answer says it is partial, and so does the hint, with how many were
// counted — never a smaller number passed off as the window's.
const SIDEBAR_MAX_EVENTS = 200_000;
const facets = { key: "", answer: undefined, error: undefined, partial: undefined };

function windowCounts(fields) {
  const paths = fields.map((field) => field.path);
  const key = `${state.generation} ${paths.join(",")}`;
  const hint = $("fields-hint");
  if (!paths.length) return fields;
  if (facets.key !== key) {
    Object.assign(facets, { key, answer: undefined, error: undefined, partial: undefined });
    void countWindow(key, paths);
  }
  hint.classList.toggle("partial", facets.error !== undefined || facets.partial !== undefined);
  if (!facets.answer) {
    hint.textContent = facets.error
      ? `in the rows shown: the window's counts failed (${facets.error}) · click to filter`
      : "in the rows shown · counting the window… · click to filter";
    return fields;
  }
  const where = state.range === "live" ? "last 30 minutes" : "window";
  hint.textContent = facets.partial
    ? `partial: in the first ${facets.partial.toLocaleString("en")} matching events read of the ${where} (it holds more) · click to filter`
    : `in the ${where} · click to filter`;
  return fields.map((field, i) => {
    const counted = facets.answer[i];
    if (!counted || counted.field !== field.path) return field;
    return { path: field.path, present: counted.present, values: counted.top.map(({ value, count }) => ({ value, n: count })) };
  });
}

async function countWindow(key, paths) {
  const window = state.window ?? { from: "now-30m" };
  const search = params({
    facets: paths.join(","),
    top: "5",
    max_events: String(SIDEBAR_MAX_EVENTS),
    from: window.from,
    ...(window.to ? { to: window.to } : {}),
  });
  try {
    const response = await api(`/api/v2/query/aggregate?${search}`);
    const body = await response.json().catch(() => ({ errors: `HTTP ${response.status}` }));
    if (facets.key !== key) return;
    if (response.ok) {
      facets.answer = body.data.facets;
      if (body.meta.complete === false) facets.partial = body.data.count;
    } else facets.error = String(body.errors);
  } catch (error) {
    if (facets.key !== key) return;
    facets.error = error.message;
  }
  scheduleFields();
}

// The view stays on the newest row while the reader is there, whatever changes the box's height.
$("rows").addEventListener("scroll", () => {
  const box = $("rows");
  const was = pinned;
  pinned = box.scrollHeight - box.scrollTop - box.clientHeight < 40;
  // Back at the bottom: what waited goes in.
  if (pinned && !was && waiting.length) scheduleLive();
});
$("new-events").addEventListener("click", jumpToNewest);
new ResizeObserver(() => {
  if (pinned) $("rows").scrollTop = $("rows").scrollHeight;
}).observe($("rows"));

/** Empties the list for a new view. */
export function resetList() {
  state.shown.clear();
  clearWaiting();
  pinned = true;
  $("list").replaceChildren();
  $("list").classList.toggle("single", state.selected.size === 1);
  timeWidth = 0;
  fitTime("00:00:00.000");
  $("older").hidden = true;
  updateCounts();
  scheduleFields();
}

/** Every time shown again, in the zone now chosen. */
export function retime() {
  timeWidth = 0;
  fitTime("00:00:00.000");
  for (const cell of document.querySelectorAll("#list .time")) fitTime((cell.textContent = formatTime(cell.dataset.dt, state.utc)));
  updateOlder();
}

$("older").addEventListener("click", () => loadOlder(state.generation));
// A time's title (both zones) is written when the pointer first reaches it, not for every row
// that streams by.
$("list").addEventListener("mouseover", (event) => {
  const time = event.target.closest?.(".time");
  if (time && !time.title) time.title = timeTitle(time.dataset.dt);
});
$("list").addEventListener("click", (event) => {
  const item = event.target.closest("li[data-id]");
  if (!item || event.target.closest(".details") || String(getSelection())) return;
  const open = item.querySelector(".details");
  item.classList.toggle("open", !open);
  const row = state.shown.get(item.dataset.id);
  state.event = open ? undefined : { source_id: row.source_id, id: row.id, dt: row.dt };
  writeUrl();
  if (open) return open.remove();
  item.append(details(row));
});
