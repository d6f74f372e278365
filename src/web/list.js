// The row list: pages of stored rows (the query API's cursor, then on past the window to the
// first stored event), rows added at either end at most MAX_ROWS, one line each, and the field
// sidebar of the rows shown. Rows and fields are set as text, never as HTML.
import { details } from "./context.js";
import { topFields, filterTerm } from "./fields.js";
import { formatTime, lineNodes, markNodes, timeTitle } from "./rows.js";
import { $, api, EARLIEST, params, showEmpty, showError, state } from "./state.js";

const MAX_ROWS = 5000;
const PAGE = 200;

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
    if (!response.ok) return showError((await response.json().catch(() => ({ errors: `HTTP ${response.status}` }))).errors);
    const body = await response.json();
    const box = $("rows");
    const opening = state.shown.size === 0;
    const fromBottom = box.scrollHeight - box.scrollTop;
    if (segment.before && !segment.started && body.data.length) {
      $("list").prepend(divider(`before ${formatTime(state.window.from, state.utc).replace(/\.\d{3}$/, "")} — outside the window`));
    }
    const firstPage = !segment.started;
    segment.started = true;
    for (const row of body.data) addRow(row, "top");
    segment.cursor = body.pagination.next ? new URL(body.pagination.next).searchParams.get("cursor") : undefined;
    if (!segment.cursor) state.segments.shift();
    if (!state.segments.length) $("list").prepend(divider("start of the stored events"));
    // The view opens at the newest row; an older page keeps the rows the reader was looking at in place.
    box.scrollTop = opening ? box.scrollHeight : box.scrollHeight - fromBottom;
    if (firstPage && body.meta?.empty_window && state.shown.size === 0) emptyWindow(body.meta, generation);
    else if (state.shown.size === 0 && !state.segments.length)
      showEmpty(state.range === "live" ? "Nothing stored yet — new events appear here as they arrive." : "No events, here or before.");
  } catch (error) {
    if (generation === state.generation) showError(`could not load rows: ${error.message}`);
  } finally {
    if (state.loadingOlder === generation) state.loadingOlder = undefined;
    if (generation === state.generation) updateOlder();
  }
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

/** Adds a row unless it is shown already; false when it was. */
export function addRow(row, where) {
  if (state.shown.has(row.id)) return false;
  state.shown.set(row.id, row);
  const box = $("rows");
  const atBottom = box.scrollHeight - box.scrollTop - box.clientHeight < 40;
  const item = render(row);
  const list = $("list");
  if (where === "top") list.prepend(item);
  else {
    item.classList.add("fresh");
    list.append(item);
  }
  if (state.shown.size > MAX_ROWS) trim(where);
  $("empty").hidden = true;
  updateCounts();
  scheduleFields();
  if (where === "bottom" && atBottom) box.scrollTop = box.scrollHeight;
  return true;
}

/** Past MAX_ROWS, rows leave from the end away from where rows arrive. */
function trim(where) {
  const list = $("list");
  const rows = list.querySelectorAll(":scope > li[data-id]");
  const gone = where === "top" ? rows[rows.length - 1] : rows[0];
  state.shown.delete(gone.dataset.id);
  gone.remove();
  if (where === "bottom") {
    // Load older resumes from the new top row (rows sharing its dt are shown already, skipped by id).
    const top = list.querySelector(":scope > li[data-id]");
    state.segments = [{ from: EARLIEST, to: state.shown.get(top.dataset.id).dt }];
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
  const time = Object.assign(document.createElement("span"), { className: "time", textContent: shown, title: timeTitle(row.dt) });
  time.dataset.dt = row.dt;
  const name = Object.assign(document.createElement("span"), { className: "source", textContent: source ? source.name : `#${row.source_id}` });
  const line = Object.assign(document.createElement("span"), { className: "line" });
  line.append(...markNodes(lineNodes(source ? source.pattern : "{level} {message}", row), state.mark));
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
  $("count").textContent = `${n.toLocaleString("en-US")} row${n === 1 ? "" : "s"}`;
  $("dropped").hidden = state.dropped === 0;
  $("dropped").textContent = `${state.dropped} dropped (too slow to keep up; reload older rows to see them)`;
}

// The field sidebar, recomputed at most every 150 ms while rows arrive.
let fieldsTimer;
export function scheduleFields() {
  if (fieldsTimer === undefined) fieldsTimer = setTimeout(renderFields, 150);
}

function renderFields() {
  fieldsTimer = undefined;
  const fields = topFields(state.shown.values());
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
}

// The view stays on the newest row while the reader is there, whatever changes the box's height.
let pinned = true;
$("rows").addEventListener("scroll", () => {
  const box = $("rows");
  pinned = box.scrollHeight - box.scrollTop - box.clientHeight < 40;
});
new ResizeObserver(() => {
  if (pinned) $("rows").scrollTop = $("rows").scrollHeight;
}).observe($("rows"));

/** Empties the list for a new view. */
export function resetList() {
  state.shown.clear();
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
$("list").addEventListener("click", (event) => {
  const item = event.target.closest("li[data-id]");
  if (!item || event.target.closest(".details") || String(getSelection())) return;
  const open = item.querySelector(".details");
  item.classList.toggle("open", !open);
  if (open) return open.remove();
  item.append(details(state.shown.get(item.dataset.id)));
});
