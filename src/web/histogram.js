// The volume histogram of the window: the histogram endpoint's buckets as bars stacked by level,
// or by the values of another field when it was asked with by= (SVG), a time axis under them, a legend with the totals. Drag across it to zoom to that time, or
// click a bar for its bucket: both end in onZoom(fromMs, toMs), `to` excluded. Live rows add to the last bars.
import { foldLevel } from "./levels.js";
import { levelClass } from "./rows.js";

const SVG = "http://www.w3.org/2000/svg";
/** Bottom to top: errors stay visible at the foot of a bar however many info rows stand on them. */
const STACK = ["fatal", "error", "warn", "info", "debug", "trace", "other", "none"];
const LABEL = { fatal: "fatal", error: "error", warn: "warn", info: "info", debug: "debug", trace: "trace", other: "other", none: "no level" };
const LEVELS_MAX = 6;
const TICKS_S = [1, 5, 10, 30, 60, 300, 600, 900, 1800, 3600, 3 * 3600, 6 * 3600, 12 * 3600, 86_400, 2 * 86_400, 7 * 86_400, 30 * 86_400, 365 * 86_400];
const MONTHS = ["Jan", "Feb", "Mar", "Apr", "May", "Jun", "Jul", "Aug", "Sep", "Oct", "Nov", "Dec"];
const W = 1000,
  H = 100;

const ms = (dt) => Date.parse(`${dt.slice(0, 23)}Z`);
const NUMBER = new Intl.NumberFormat("en-US");
const number = (n) => NUMBER.format(n);
/** Live rows redraw the bars at most this often: a busy tail adds rows every frame. */
const LIVE_DRAW_EVERY_MS = 1000;
const pad = (n) => String(n).padStart(2, "0");

export function createHistogram({ box, plot, axis, total, legend, onZoom }) {
  let buckets = []; // { start, count, levels: Map(level → n) }
  let size = 0; // bucket width, ms
  let named = new Set();
  /** The field the bars are split by (undefined: the level); `order`: its named values, v0… */
  let by;
  let order = [];
  let utc = false;
  let drawing = 0;
  let drawnAt = 0;

  function show(answer) {
    size = answer.meta.bucket_seconds * 1000;
    by = answer.meta.by;
    named = new Set((by ? answer.meta.values : answer.meta.levels).filter((name) => name !== "other"));
    order = [...named];
    // A null count: that stretch was not counted within the query timeout (meta.complete false).
    buckets = answer.data.map((b) => ({
      start: ms(b.from),
      count: b.count ?? 0,
      uncounted: b.count === null,
      levels: new Map(Object.entries(by ? b.values : b.levels)),
    }));
    box.hidden = false;
    draw();
  }

  /** Empty; `waiting`: the box keeps its room (so the rows below do not jump when the bars come). */
  function clear(waiting = false) {
    buckets = [];
    box.hidden = !waiting;
    delete total.dataset.total;
    total.textContent = waiting ? "counting…" : "";
    plot.replaceChildren(selection);
    axis.replaceChildren();
    legend.replaceChildren();
  }

  /** A live row: counted in its bar; bars slide right (oldest dropped) when time passes the last. */
  function add(dt, level) {
    if (!buckets.length) return;
    const at = ms(dt);
    // A row dated ahead of this clock (a client's skew) is left out rather than sliding the bars off.
    if (at > Date.now() + 60_000) return;
    let index = Math.floor((at - buckets[0].start) / size);
    if (index < 0) return;
    if (index >= 2 * buckets.length) {
      // Quiet for longer than the histogram spans: every bar slides out; start again at this row.
      const start = Math.floor(at / size) * size - (buckets.length - 1) * size;
      buckets = buckets.map((_, i) => ({ start: start + i * size, count: 0, levels: new Map() }));
      index = buckets.length - 1;
    }
    while (index >= buckets.length) {
      buckets.push({ start: buckets[buckets.length - 1].start + size, count: 0, levels: new Map() });
      buckets.shift();
      index--;
    }
    const bucket = buckets[index];
    bucket.count++;
    if (level !== undefined && level !== null && level !== "") {
      // Named as the endpoint names it: its severity, else its text lowered (ASCII) and cut to 40;
      // a field's value as its text cut to 200.
      let name = by ? String(level).slice(0, 200) : foldLevel(String(level).slice(0, 40));
      if (!named.has(name) || name === "other") {
        if (named.size < LEVELS_MAX && name !== "other") {
          named.add(name);
          order.push(name);
        } else name = "other";
      }
      bucket.levels.set(name, (bucket.levels.get(name) ?? 0) + 1);
    }
    if (drawing) return;
    const redraw = () => {
      drawing = 0;
      drawnAt = performance.now();
      if (buckets.length) draw();
    };
    drawing = setTimeout(() => requestAnimationFrame(redraw), Math.max(0, drawnAt + LIVE_DRAW_EVERY_MS - performance.now()));
  }

  function setUtc(value) {
    utc = value;
    if (buckets.length) draw();
  }

  /** The stack class of a level or value as the endpoint names it. */
  const classOf = (name) => (name === "other" ? "other" : by ? `v${order.indexOf(name)}` : levelClass(name));
  const stackOrder = () => (by ? [...order.map((_, i) => `v${i}`), "other", "none"] : STACK);
  const labelOf = (cls) => (!by ? LABEL[cls] : cls === "none" ? `no ${by}` : cls === "other" ? "other" : order[Number(cls.slice(1))]);

  /** Each bucket's counts per stack class, "none" being the events with no level. */
  function stacks(bucket) {
    const byClass = new Map();
    let leveled = 0;
    for (const [level, n] of bucket.levels) {
      const cls = classOf(level);
      byClass.set(cls, (byClass.get(cls) ?? 0) + n);
      leveled += n;
    }
    if (bucket.count > leveled) byClass.set("none", bucket.count - leveled);
    return byClass;
  }

  function draw() {
    const count = buckets.length;
    const max = Math.max(1, ...buckets.map((b) => b.count));
    const svg = document.createElementNS(SVG, "svg");
    svg.setAttribute("viewBox", `0 0 ${W} ${H}`);
    svg.setAttribute("preserveAspectRatio", "none");
    const width = W / count;
    const gap = width > 4 ? Math.min(width * 0.18, 3) : 0;
    const totals = new Map();
    let all = 0;
    buckets.forEach((bucket, i) => {
      const group = document.createElementNS(SVG, "g");
      group.dataset.count = String(bucket.count);
      group.dataset.from = new Date(bucket.start).toISOString();
      const hit = document.createElementNS(SVG, "rect");
      Object.entries({ x: i * width, y: 0, width, height: H, class: "hit" }).forEach(([k, v]) => hit.setAttribute(k, String(v)));
      group.append(hit);
      if (bucket.uncounted) {
        const rest = document.createElementNS(SVG, "rect");
        Object.entries({ x: i * width + gap / 2, y: 0, width: width - gap, height: H, class: "uncounted" }).forEach(([k, v]) =>
          rest.setAttribute(k, String(v)),
        );
        group.append(rest);
      }
      let y = H;
      const byClass = stacks(bucket);
      const parts = [];
      for (const cls of stackOrder()) {
        const n = byClass.get(cls);
        if (!n) continue;
        totals.set(cls, (totals.get(cls) ?? 0) + n);
        parts.push(`${labelOf(cls)} ${number(n)}`);
        // At least one pixel's worth for a bar that has events, so a lone error is never invisible.
        const height = Math.max((n / max) * (H - 4), 1.5);
        y -= height;
        const bar = document.createElementNS(SVG, "rect");
        Object.entries({ x: i * width + gap / 2, y, width: width - gap, height, class: `bar ${cls}` }).forEach(([k, v]) => bar.setAttribute(k, String(v)));
        group.append(bar);
      }
      all += bucket.count;
      const title = document.createElementNS(SVG, "title");
      title.textContent = bucket.uncounted
        ? `${span(bucket.start, bucket.start + size)}\nnot counted: the query took too long (narrow the window or the query)`
        : `${span(bucket.start, bucket.start + size)}\n${number(bucket.count)} event${bucket.count === 1 ? "" : "s"}${parts.length ? ` · ${parts.join(" · ")}` : ""}`;
      group.append(title);
      svg.append(group);
    });
    plot.replaceChildren(svg, selection);
    const uncounted = buckets.filter((b) => b.uncounted).length;
    total.textContent =
      `${number(all)} event${all === 1 ? "" : "s"} · ${duration(size)} bars${all ? ` · tallest ${number(max)}` : ""}` +
      (uncounted ? ` · ${uncounted} older bar${uncounted === 1 ? "" : "s"} not counted in time` : "");
    total.classList.toggle("partial", uncounted > 0);
    total.dataset.total = String(all);
    legend.replaceChildren(
      ...stackOrder()
        .filter((cls) => totals.get(cls))
        .map((cls) => {
          const item = Object.assign(document.createElement("span"), { className: `key ${cls}` });
          item.append(Object.assign(document.createElement("i"), { className: `swatch ${cls}` }), `${labelOf(cls)} ${number(totals.get(cls))}`);
          return item;
        }),
    );
    drawAxis();
  }

  function drawAxis() {
    const from = buckets[0].start,
      to = buckets[buckets.length - 1].start + size;
    const most = Math.max(4, Math.floor(axis.clientWidth / 70)); // labels are ~50 px wide: keep air between them
    const step = (TICKS_S.find((s) => (to - from) / 1000 / s <= most) ?? TICKS_S[TICKS_S.length - 1]) * 1000;
    const labels = [];
    const room = 26 / Math.max(1, axis.clientWidth); // half a label's width, as a fraction of the axis
    // Ticks on round local (or UTC) times: shift into the zone, round up, shift back.
    const offset = (t) => (utc ? 0 : -new Date(t).getTimezoneOffset() * 60_000);
    for (let t = Math.ceil((from + offset(from)) / step) * step - offset(from); t <= to; t += step) {
      const left = ((t - from) / (to - from)) * 100;
      if (left < room * 100 || left > 100 - room * 100) continue; // centred on the edge, it would stick out
      labels.push(Object.assign(document.createElement("span"), { textContent: tick(t, step), style: `left:${left.toFixed(2)}%` }));
    }
    axis.replaceChildren(...labels);
  }

  function parts(t) {
    const d = new Date(t);
    return utc
      ? { mo: d.getUTCMonth(), d: d.getUTCDate(), h: d.getUTCHours(), mi: d.getUTCMinutes(), s: d.getUTCSeconds() }
      : { mo: d.getMonth(), d: d.getDate(), h: d.getHours(), mi: d.getMinutes(), s: d.getSeconds() };
  }

  function tick(t, step) {
    const p = parts(t);
    if (step >= 86_400_000 || (p.h === 0 && p.mi === 0 && p.s === 0)) return `${MONTHS[p.mo]} ${p.d}`;
    return step < 60_000 ? `${pad(p.h)}:${pad(p.mi)}:${pad(p.s)}` : `${pad(p.h)}:${pad(p.mi)}`;
  }

  function span(a, b) {
    const p = parts(a),
      q = parts(b - 1);
    const day = `${MONTHS[p.mo]} ${p.d}`;
    const time = (x) => `${pad(x.h)}:${pad(x.mi)}${size < 60_000 ? `:${pad(x.s)}` : ""}`;
    const end = parts(b);
    return `${day} ${time(p)} – ${p.d === q.d && p.mo === q.mo ? "" : `${MONTHS[end.mo]} ${end.d} `}${time(end)}${utc ? " UTC" : ""}`;
  }

  // Drag to zoom: a band follows the pointer; a click (no real drag) zooms to the bar under it.
  const selection = Object.assign(document.createElement("div"), { className: "selection", hidden: true });
  let start;
  const fraction = (event) => {
    const box = plot.getBoundingClientRect();
    return Math.min(1, Math.max(0, (event.clientX - box.left) / box.width));
  };
  plot.addEventListener("pointerdown", (event) => {
    if (!buckets.length || event.button !== 0) return;
    start = { x: fraction(event), px: event.clientX };
    plot.setPointerCapture(event.pointerId);
    event.preventDefault();
  });
  plot.addEventListener("pointermove", (event) => {
    if (!start) return;
    const [a, b] = [start.x, fraction(event)].sort((x, y) => x - y);
    Object.assign(selection.style, { left: `${a * 100}%`, width: `${(b - a) * 100}%` });
    selection.hidden = Math.abs(event.clientX - start.px) < 4;
  });
  const end = (event) => {
    if (!start) return;
    const from = buckets[0].start,
      to = buckets[buckets.length - 1].start + size;
    const x = fraction(event);
    const dragged = Math.abs(event.clientX - start.px) >= 4;
    const [a, b] = [start.x, x].sort((p, q) => p - q);
    start = undefined;
    selection.hidden = true;
    if (event.type === "pointercancel") return;
    if (dragged) return onZoom(Math.floor(from + a * (to - from)), Math.ceil(from + b * (to - from)));
    const index = Math.min(buckets.length - 1, Math.floor(x * buckets.length));
    onZoom(buckets[index].start, buckets[index].start + size);
  };
  plot.addEventListener("pointerup", end);
  plot.addEventListener("pointercancel", end);

  return { show, clear, add, setUtc };
}

/** "30 s", "5 min", "3 h", "1 d". */
export function duration(ms) {
  const s = ms / 1000;
  if (s < 60) return `${s} s`;
  if (s < 3600) return `${s / 60} min`;
  if (s < 86_400) return `${s / 3600} h`;
  return `${s / 86_400} d`;
}
