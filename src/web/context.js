// An opened event's details (its JSON and a Context button) and the context dialog: the events of
// its source around it (GET /api/v2/query/context, with the row's id and dt), oldest first, the
// event highlighted and scrolled to; more on either side when the reader scrolls to an end or
// presses its button (each answer's pagination link). Everything from the server is set as text.
import { formatTime, lineNodes, timeTitle } from "./rows.js";
import { $, api, state } from "./state.js";
import { eventLink, writeUrl } from "./url.js";

/** Neighbours asked for on each side, at first and per "more". */
const BATCH = 50;
/** How close to an end of the list (px) a scroll loads more. */
const NEAR_PX = 40;

const view = {
  /** Bumped per dialog opened: answers for an earlier one are dropped. */
  generation: 0,
  /** Rows shown, by id. */
  rows: new Map(),
  /** pagination.before / .after of the answers so far (absolute URLs), or null at an end. */
  links: { before: null, after: null },
  loading: { before: false, after: false },
};

/** What an opened row of the list shows under its line. */
export function details(row) {
  const box = Object.assign(document.createElement("div"), { className: "details" });
  const button = Object.assign(document.createElement("button"), {
    type: "button",
    className: "quiet context-open",
    textContent: "Show context",
    title: `The events of this source around this one (${BATCH} before, ${BATCH} after)`,
  });
  button.addEventListener("click", () => openContext(row));
  const json = JSON.stringify(row, null, 2);
  const copyJson = copyButton("Copy JSON", "The event as JSON", () => json);
  const copyLink = copyButton("Copy link", "A link to this event: it opens with its context, for whoever has a token that reads its source", () =>
    eventLink(row),
  );
  copyJson.classList.add("copy-json");
  copyLink.classList.add("copy-link");
  const actions = Object.assign(document.createElement("div"), { className: "actions" });
  actions.append(button, copyJson, copyLink);
  box.append(actions, Object.assign(document.createElement("pre"), { textContent: json }));
  return box;
}

/** A button that copies text() and says so for a moment. */
function copyButton(label, title, text) {
  const button = Object.assign(document.createElement("button"), { type: "button", className: "quiet context-open", textContent: label, title });
  button.addEventListener("click", async () => {
    const done = await copy(text());
    button.textContent = done ? "Copied" : "Copy failed";
    setTimeout(() => (button.textContent = label), 1500);
  });
  return button;
}

/** The clipboard API where the page may use it, else a selected textarea and the copy command. */
async function copy(text) {
  try {
    await navigator.clipboard.writeText(text);
    return true;
  } catch {
    const area = Object.assign(document.createElement("textarea"), { value: text });
    document.body.append(area);
    area.select();
    const done = document.execCommand("copy");
    area.remove();
    return done;
  }
}

export async function openContext(anchor) {
  const generation = ++view.generation;
  view.rows = new Map();
  view.links = { before: null, after: null };
  view.loading = { before: false, after: false };
  $("context-list").replaceChildren();
  $("context-earlier").hidden = true;
  $("context-later").hidden = true;
  const source = state.sources.get(anchor.source_id);
  $("context-title").textContent = `Around ${source ? source.name : `source ${anchor.source_id}`} · ${formatTime(anchor.dt, state.utc, new Date(), true)}`;
  note("Loading…");
  if (!$("context").open) $("context").showModal();
  state.event = { source_id: anchor.source_id, id: anchor.id, dt: anchor.dt };
  writeUrl();
  const search = new URLSearchParams({ source_id: anchor.source_id, id: anchor.id, dt: anchor.dt, before: String(BATCH), after: String(BATCH) });
  const body = await load(`/api/v2/query/context?${search}`, generation);
  if (!body) return;
  const list = $("context-list");
  body.data.forEach((row, i) => {
    view.rows.set(row.id, row);
    list.append(render(row, i === body.meta.anchor_index));
  });
  view.links = { before: body.pagination.before, after: body.pagination.after };
  counted();
  list.querySelector("li.anchor")?.scrollIntoView({ block: "center" });
}

/** More rows on one side: the answer repeats the edge row, which is skipped. */
async function more(side) {
  const link = view.links[side];
  if (!link || view.loading[side]) return;
  view.loading[side] = true;
  const button = $(side === "before" ? "context-earlier" : "context-later");
  button.disabled = true;
  const generation = view.generation;
  try {
    const url = new URL(link);
    const body = await load(url.pathname + url.search, generation);
    if (!body) return;
    const box = $("context-rows");
    const list = $("context-list");
    const fromBottom = box.scrollHeight - box.scrollTop;
    const fresh = body.data.filter((row) => !view.rows.has(row.id));
    for (const row of fresh) view.rows.set(row.id, row);
    if (side === "before") {
      list.prepend(...fresh.map((row) => render(row, false)));
      box.scrollTop = box.scrollHeight - fromBottom; // the rows being read stay in place
    } else list.append(...fresh.map((row) => render(row, false)));
    view.links[side] = body.pagination[side];
    counted();
  } finally {
    if (generation === view.generation) {
      view.loading[side] = false;
      button.disabled = false;
    }
  }
}

/** The answer's body, or undefined (said in the note) when it failed or the dialog moved on. */
async function load(path, generation) {
  let response;
  try {
    response = await api(path);
  } catch (error) {
    if (generation === view.generation) note(`could not load: ${error.message}`);
    return undefined;
  }
  if (generation !== view.generation) return undefined;
  if (!response.ok) {
    const errors = (await response.json().catch(() => ({ errors: `HTTP ${response.status}` }))).errors;
    note(String(errors));
    return undefined;
  }
  return response.json();
}

function counted() {
  const n = view.rows.size;
  const ends = [view.links.before ? "" : "the first event", view.links.after ? "" : "the last event"].filter(Boolean);
  note(
    `${n.toLocaleString("en-US")} event${n === 1 ? "" : "s"} of this source, oldest first${ends.length ? ` · ${ends.join(" and ")} of the source shown` : ""}`,
  );
  $("context-earlier").hidden = !view.links.before;
  $("context-later").hidden = !view.links.after;
}

function note(text) {
  $("context-note").textContent = text;
}

function render(row, anchor) {
  const source = state.sources.get(row.source_id);
  const item = document.createElement("li");
  item.dataset.id = row.id;
  if (anchor) item.className = "anchor";
  const time = Object.assign(document.createElement("span"), {
    className: "time",
    textContent: formatTime(row.dt, state.utc, new Date(), true),
    title: timeTitle(row.dt),
  });
  const line = Object.assign(document.createElement("span"), { className: "line" });
  line.append(...lineNodes(source ? source.pattern : "{level} {message}", row));
  item.append(time, line);
  return item;
}

$("context-close").addEventListener("click", () => $("context").close());
$("context").addEventListener("close", () => {
  state.event = undefined;
  writeUrl();
});
$("context-earlier").addEventListener("click", () => more("before"));
$("context-later").addEventListener("click", () => more("after"));
$("context-rows").addEventListener("scroll", () => {
  const box = $("context-rows");
  if (box.scrollTop < NEAR_PX) more("before");
  if (box.scrollHeight - box.scrollTop - box.clientHeight < NEAR_PX) more("after");
});
// A row of the dialog opens its JSON as a row of the list does.
$("context-list").addEventListener("click", (event) => {
  const item = event.target.closest("li[data-id]");
  if (!item || event.target.closest("pre") || String(getSelection())) return;
  const open = item.querySelector("pre");
  item.classList.toggle("open", !open);
  if (open) return open.remove();
  item.append(Object.assign(document.createElement("pre"), { textContent: JSON.stringify(view.rows.get(item.dataset.id), null, 2) }));
});
