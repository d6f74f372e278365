// What every part of the page shares: the state of the view, the API call with the token, the
// time helpers, and the status line's few writers. Holds no logic of its own.

export const $ = (id) => document.getElementById(id);
/** "Before the window" reaches back to here: before any time ingestion accepts (years 1–9999). */
export const EARLIEST = "0001-01-01T00:00:00.000000Z";

export const state = {
  token: sessionStorage.getItem("logpond-token") || "",
  connected: false,
  sources: new Map(),
  selected: new Set(),
  query: "",
  range: "live",
  /** The custom window: { from, to } as RFC 3339 with microseconds, both inclusive. */
  custom: undefined,
  /** The window shown (range views), as custom. */
  window: undefined,
  lastEventId: "",
  stream: undefined,
  paused: false,
  /** Rows shown, by id (insertion order is not display order). */
  shown: new Map(),
  /** Stretches still to page back through, newest first: { from, to?, cursor?, before?, started? }. */
  segments: [],
  /** The generation whose older page is being read (one at a time). */
  loadingOlder: undefined,
  dropped: 0,
  /** Bumped by every new view: answers for an older one are dropped. */
  generation: 0,
  utc: localStorage.getItem("logpond-utc") === "1",
  /** The query's searched words, as a regular expression (rows.js marker). */
  mark: undefined,
  /** Field paths shown as each row's line instead of the source's pattern (a saved view's columns). */
  columns: [],
  /** The opened event, { source_id, id, dt } (url.js keeps it in the address bar). */
  event: undefined,
  /** What the histogram's bars are split by: "level" (severity), or a field path (histogram by=). */
  histogramBy: "level",
  /** The window the histogram was last asked for, to ask again by another field. */
  histogramWindow: undefined,
  /** The Fields sidebar's paths, offered as what the histogram is split by. */
  fieldPaths: [],
};
// For the console and the browser test: the page's state, read-only by convention.
globalThis.logpond = { state };

export const api = (path, init = {}) => fetch(path, { ...init, headers: { ...init.headers, authorization: `Bearer ${state.token}` } });

/** The selected sources and the query, plus `extra`, as query parameters. */
export function params(extra = {}) {
  const search = new URLSearchParams({ source_ids: [...state.selected].join(","), ...extra });
  if (state.query) search.set("query", state.query);
  return search;
}

export const isoMicro = (ms) => new Date(ms).toISOString().replace("Z", "000Z");
/** The last microsecond before `ms`. */
export const microBefore = (ms) => new Date(ms - 1).toISOString().replace("Z", "999Z");
export const msOf = (dt) => Date.parse(`${dt.slice(0, 23)}Z`);

export function setState(kind, text) {
  $("state").className = `state ${kind}`;
  $("state").textContent = text;
}

export function showError(text) {
  $("query-error").textContent = text;
  $("query-error").hidden = false;
}

/** Where the sources are: beside the rows, or above them on a narrow screen (style.css). */
export const sourcesWhere = () => (matchMedia("(max-width: 720px)").matches ? "above" : "on the left");

export function showEmpty(text) {
  $("empty").textContent = text;
  $("empty").hidden = false;
}
