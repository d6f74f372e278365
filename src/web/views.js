// Saved views (GET/POST/DELETE /api/v2/views): listed in the sidebar; a click applies one (its
// sources, query, range and columns), Save keeps the view on the page under a name. A view's range
// is kept as the API keeps it: `to: null` is live, `now-24h`…`now` a preset when one matches,
// anything else a custom window resolved when the view is applied.
import { $, api, isoMicro, showError, state } from "./state.js";

const PRESETS = { "now-15m": "15m", "now-1h": "1h", "now-24h": "24h", "now-7d": "7d" };
const UNIT_MS = { s: 1_000, m: 60_000, h: 3_600_000, d: 86_400_000, w: 604_800_000 };
let views = [];

/** The page's range as a view's: { from, to }. */
export function rangeOfPage() {
  if (state.range === "live") return { from: "now-30m", to: null };
  if (state.range === "custom") return { from: state.custom.from, to: state.custom.to };
  const preset = Object.entries(PRESETS).find(([, range]) => range === state.range);
  return { from: preset[0], to: "now" };
}

/** A view's range as the page's: { range, custom? }. */
export function pageRangeOf({ from, to }) {
  if (to === null) return { range: "live" };
  if (to === "now" && PRESETS[from]) return { range: PRESETS[from] };
  const instant = (value) => {
    const relative = /^now(?:-(\d+)([smhdw]))?$/.exec(value);
    return relative ? Date.now() - (relative[1] ? Number(relative[1]) * UNIT_MS[relative[2]] : 0) : Date.parse(value);
  };
  return { range: "custom", custom: { from: isoMicro(instant(from)), to: isoMicro(instant(to)) } };
}

/** Lists the views the token may read. */
export async function loadViews(onApply) {
  const box = $("views-box");
  let response;
  try {
    response = await api("/api/v2/views");
  } catch {
    return;
  }
  if (!response.ok) return;
  views = (await response.json()).data;
  box.hidden = false;
  const list = $("views");
  list.replaceChildren(
    ...views.map((view) => {
      const item = document.createElement("li");
      const button = Object.assign(document.createElement("button"), { type: "button", className: "view", textContent: view.attributes.name });
      button.dataset.viewId = view.id;
      const { query, range } = view.attributes;
      button.title = `${query || "(no query)"} · ${range.to === null ? "live" : `${range.from} → ${range.to}`}`;
      button.addEventListener("click", () => onApply(view.attributes));
      item.append(button);
      return item;
    }),
  );
  $("views-note").textContent = views.length ? "" : "No saved views yet: Save keeps this one.";
}

/** Saves the view on the page under `name`; true when saved. */
export async function saveView(name) {
  const body = { name, source_ids: [...state.selected], query: state.query, range: rangeOfPage(), columns: state.columns };
  const response = await api("/api/v2/views", { method: "POST", headers: { "content-type": "application/json" }, body: JSON.stringify(body) });
  if (response.ok) return true;
  const answer = await response.json().catch(() => ({ errors: `HTTP ${response.status}` }));
  const details = answer.invalid_attributes
    ? `: ${Object.entries(answer.invalid_attributes)
        .map(([key, problems]) => `${key} ${problems.join(", ")}`)
        .join("; ")}`
    : "";
  showError(`Save view: ${answer.errors}${details}`);
  return false;
}
