// The realistic event corpus: what ordinary services send, generated here from a fixed seed (nothing
// downloaded), so every run and every machine sees the same bytes. Mix per 100 events: nginx/HTTP
// access events, JSON application logs with W3C trace/span ids, UUIDs and Kubernetes metadata, error
// events with stack traces, Unicode text; and a few large events (50–200 KB) across a body pool.
// Strings here deliberately look like numbers (hex ids with `e` + digits, `node1234`, `e2e100`,
// 20-digit order ids): a whole-text check for big numbers used to send every such body down the
// exact-number parse.

/** mulberry32: a small seeded PRNG; the same seed gives the same corpus. */
export function rng(seed: number): () => number {
  let a = seed >>> 0;
  return () => {
    a = (a + 0x6d2b79f5) >>> 0;
    let t = a;
    t = Math.imul(t ^ (t >>> 15), t | 1);
    t ^= t + Math.imul(t ^ (t >>> 7), t | 61);
    return ((t ^ (t >>> 14)) >>> 0) / 4294967296;
  };
}

type Rand = () => number;
const pick = <T>(r: Rand, list: readonly T[]): T => list[Math.floor(r() * list.length)]!;
const int = (r: Rand, lo: number, hi: number) => lo + Math.floor(r() * (hi - lo + 1));
const hex = (r: Rand, n: number) => {
  let s = "";
  for (let i = 0; i < n; i++) s += "0123456789abcdef"[Math.floor(r() * 16)];
  return s;
};
const uuid = (r: Rand) => `${hex(r, 8)}-${hex(r, 4)}-4${hex(r, 3)}-${pick(r, ["8", "9", "a", "b"])}${hex(r, 3)}-${hex(r, 12)}`;
const digits = (r: Rand, n: number) => {
  let s = String(int(r, 1, 9));
  while (s.length < n) s += String(Math.floor(r() * 10));
  return s;
};

const PATHS = ["/api/v1/orders", "/api/v1/orders/{id}", "/api/v1/users/{id}/sessions", "/healthz", "/static/app.{hash}.js", "/graphql", "/api/v2/search"];
const METHODS = ["GET", "GET", "GET", "POST", "PUT", "DELETE"];
const STATUSES = [200, 200, 200, 200, 201, 204, 301, 304, 400, 401, 404, 429, 500, 502];
const AGENTS = [
  "Mozilla/5.0 (Windows NT 10.0; Win64; x64) AppleWebKit/537.36 (KHTML, like Gecko) Chrome/131.0.0.0 Safari/537.36",
  "Mozilla/5.0 (iPhone; CPU iPhone OS 18_1 like Mac OS X) AppleWebKit/605.1.15 (KHTML, like Gecko) Version/18.1 Mobile/15E148 Safari/604.1",
  "curl/8.11.0",
  "kube-probe/1.31",
  "Go-http-client/2.0",
];
const SERVICES = ["checkout", "payments", "search-api", "auth", "inventory", "e2e100-runner"];
const NAMESPACES = ["prod", "staging", "payments-prod", "kube-system"];
const WORDS = ["order", "user", "cache", "retry", "upstream", "timeout", "queue", "batch", "node1234", "shard", "e2e100", "replica", "lease"];
const TEXTS = [
  "Zahlung für Bestellung abgeschlossen ✅",
  "Заказ отправлен покупателю",
  "注文が確定しました 🎉",
  "결제가 완료되었습니다",
  "تم تأكيد الطلب",
  "Commande expédiée — numéro de suivi attribué",
  "उपयोगकर्ता ने लॉग इन किया",
  "ユーザー 👩‍💻 がログインしました",
];
const FRAMES = ["OrderService.place", "PaymentClient.charge", "Retry.run", "HttpClient.send", "Router.handle", "Db.query", "Pool.acquire"];

function iso(ms: number): string {
  return new Date(ms).toISOString();
}

function k8s(r: Rand, service: string) {
  return {
    namespace: pick(r, NAMESPACES),
    pod: `${service}-${hex(r, 9)}-${hex(r, 5)}`,
    node: `node${int(r, 1000, 9999)}`,
    container: service,
    labels: { app: service, "pod-template-hash": hex(r, 10), version: `v${int(r, 1, 4)}.${int(r, 0, 20)}.${int(r, 0, 9)}` },
  };
}

function access(r: Rand, dt: number | Date | string) {
  const method = pick(r, METHODS);
  const path = pick(r, PATHS)
    .replace("{id}", digits(r, int(r, 3, 9)))
    .replace("{hash}", hex(r, 8));
  const status = pick(r, STATUSES);
  const bytes = int(r, 0, 250_000);
  const ip = `${int(r, 1, 223)}.${int(r, 0, 255)}.${int(r, 0, 255)}.${int(r, 1, 254)}`;
  const agent = pick(r, AGENTS);
  const seconds = Math.round(r() * 2500) / 1000;
  return {
    dt,
    message: `${ip} - - [${iso(Date.UTC(2026, 10, 22, 5, 0, 0)).slice(0, 19)}+00:00] "${method} ${path} HTTP/1.1" ${status} ${bytes} "-" "${agent}" rt=${seconds} uct="0.000" req-${hex(r, 4)}e${digits(r, 3)}`,
    level: status >= 500 ? "error" : status >= 400 ? "warn" : "info",
    http: { method, path, status, bytes, remote_addr: ip, user_agent: agent, request_time: seconds, upstream: `10.0.${int(r, 0, 255)}.${int(r, 1, 254)}:8080` },
    request_id: `req-${hex(r, 4)}e${digits(r, 3)}`,
  };
}

function app(r: Rand, dt: number | Date | string) {
  const service = pick(r, SERVICES);
  return {
    dt,
    level: pick(r, ["debug", "info", "info", "info", "warn"]),
    message: `${pick(r, WORDS)} ${pick(r, WORDS)} done in ${int(r, 1, 900)} ms (${pick(r, WORDS)}=${hex(r, 6)})`,
    service,
    trace_id: hex(r, 32),
    span_id: hex(r, 16),
    parent_span_id: r() < 0.5 ? hex(r, 16) : null,
    user_id: uuid(r),
    order_id: digits(r, 20),
    duration_ms: Math.round(r() * 90_000) / 100,
    attempt: int(r, 1, 3),
    cached: r() < 0.3,
    tags: [pick(r, WORDS), pick(r, WORDS)],
    kubernetes: k8s(r, service),
  };
}

function failure(r: Rand, dt: number | Date | string) {
  const service = pick(r, SERVICES);
  const frames = Array.from(
    { length: int(r, 6, 20) },
    () => `    at ${pick(r, FRAMES)} (/app/src/${pick(r, WORDS)}/${pick(r, WORDS)}.ts:${int(r, 1, 900)}:${int(r, 1, 80)})`,
  );
  return {
    dt,
    level: "error",
    message: `Unhandled error in ${service}: upstream ${pick(r, WORDS)} timed out after 30000 ms`,
    error: { name: "TimeoutError", message: `request ${uuid(r)} timed out`, stack: [`TimeoutError: request timed out`, ...frames].join("\n") },
    trace_id: hex(r, 32),
    span_id: hex(r, 16),
    kubernetes: k8s(r, service),
  };
}

function unicode(r: Rand, dt: number | Date | string) {
  return {
    dt,
    level: "info",
    message: pick(r, TEXTS),
    locale: pick(r, ["de-DE", "ru-RU", "ja-JP", "ko-KR", "ar-EG", "fr-FR", "hi-IN"]),
    customer: { id: uuid(r), name: pick(r, ["Jürgen Groß", "Анна Петрова", "山田太郎", "김민준", "محمد"]) },
    trace_id: hex(r, 32),
  };
}

/** A large event: a request/response dump of about `kb` kilobytes (base64-ish and JSON-ish text). */
function large(r: Rand, dt: number | Date | string, kb: number) {
  const items = Array.from({ length: Math.ceil((kb * 1024) / 180) }, (_, i) => ({
    sku: `SKU-${hex(r, 10)}`,
    qty: int(r, 1, 9),
    price: Math.round(r() * 100_000) / 100,
    note: `${pick(r, WORDS)} ${pick(r, TEXTS)}`,
    i,
  }));
  return { dt, level: "debug", message: `response body dump (${items.length} items)`, trace_id: hex(r, 32), body: { items }, raw: hex(r, 2048) };
}

/**
 * Event `i` of the corpus stream seeded with `seed`. `dt` is what the format carries: epoch ms for
 * JSON/msgpack, a Date for @logtail/node. Event 7 of every 1,600 is large (4 in a pool of 64
 * 100-event bodies, one in each 1,000-event body on average; none in the single-event pool).
 */
export function realisticEvent(r: Rand, dt: number | Date | string, i: number): Record<string, unknown> {
  if (i % 1600 === 7) return large(r, dt, int(r, 50, 200));
  const x = r();
  if (x < 0.4) return access(r, dt);
  if (x < 0.85) return app(r, dt);
  if (x < 0.93) return failure(r, dt);
  return unicode(r, dt);
}

/** `n` events from position `from` of the stream: the same arguments give the same events. */
export function realisticBatch(n: number, from: number, dates = false): Record<string, unknown>[] {
  const r = rng(0x10600d + from);
  return Array.from({ length: n }, (_, k) => realisticEvent(r, dates ? new Date() : Date.now(), from + k));
}
