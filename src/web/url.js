// The view in the address bar: sources, query, range (a custom one's from and to), columns, the
// histogram's split and the opened event, so a reload or a shared link opens the same view. Never
// the token (it stays in this tab's sessionStorage). Written with history.replaceState: one entry
// per tab, not one per click.
//
//   ?sources=3,7&q=level:error&range=24h
//   ?sources=3&range=custom&from=2026-11-27T10:00:00.000000Z&to=2026-11-27T11:00:00.000000Z
//   …&columns=level,http.status   (a saved view's columns)
//   …&by=service   (the histogram's bars split by a field; absent: by level)
//   …&event=3:48211@2026-11-27T10:31:07.125000Z   (source id : event id @ its dt)
import { isFieldPath } from "./fields.js";
import { state } from "./state.js";

export const RANGES = new Set(["live", "15m", "1h", "24h", "7d", "custom"]);
const DT = /^\d{4}-\d{2}-\d{2}T\d{2}:\d{2}:\d{2}(\.\d{1,6})?Z$/;

/** The view a URL names: { selected, query, range, custom, columns, histogramBy, event }; what is absent or malformed is left out. */
export function readUrl(search = location.search) {
  const params = new URLSearchParams(search);
  const view = {};
  const sources = params.get("sources");
  if (sources !== null) view.selected = new Set(sources.split(",").filter((id) => /^\d+$/.test(id)));
  if (params.has("q")) view.query = params.get("q");
  const range = params.get("range");
  if (range && RANGES.has(range)) {
    const from = params.get("from");
    const to = params.get("to");
    if (range !== "custom") view.range = range;
    else if (from && to && DT.test(from) && DT.test(to)) Object.assign(view, { range, custom: { from, to } });
  }
  const columns = params.get("columns");
  if (columns) view.columns = columns.split(",").filter(Boolean);
  // A by the endpoint would refuse (a 400, no histogram at all) is left out: the bars split by level.
  const by = params.get("by");
  if (by && isFieldPath(by)) view.histogramBy = by;
  const event = params.get("event")?.match(/^(\d+):(\d+)(?:@(.+))?$/);
  if (event) view.event = { source_id: event[1], id: event[2], ...(event[3] && DT.test(event[3]) ? { dt: event[3] } : {}) };
  return view;
}

/** The URL of a view (this page's path and the view's parameters). */
export function urlOf({ selected, query, range, custom, columns, histogramBy, event }) {
  const params = new URLSearchParams();
  if (selected.size) params.set("sources", [...selected].join(","));
  if (query) params.set("q", query);
  if (range !== "live") params.set("range", range);
  if (range === "custom" && custom) {
    params.set("from", custom.from);
    params.set("to", custom.to);
  }
  if (columns?.length) params.set("columns", columns.join(","));
  if (histogramBy && histogramBy !== "level") params.set("by", histogramBy);
  if (event) params.set("event", `${event.source_id}:${event.id}${event.dt ? `@${event.dt}` : ""}`);
  const search = params.toString();
  return `${location.pathname}${search ? `?${search}` : ""}`;
}

/** The address bar shows the view now on the page. */
export function writeUrl() {
  const url = urlOf(state);
  if (url !== `${location.pathname}${location.search}`) history.replaceState(null, "", url);
}

/** An absolute link to one event of the view (the event opens with its context). */
export function eventLink(row) {
  return new URL(urlOf({ ...state, event: { source_id: row.source_id, id: row.id, dt: row.dt } }), location.href).href;
}
