// The body formats the codec reads. Which Content-Type names which is the ingest listener's
// business (ingest/content-type.ts): nothing in codec/ knows of HTTP.
export type Format = "json" | "ndjson" | "msgpack" | Envelope;

/** Other protocols' bodies, whose records become events (POST /v1/logs, POST /loki/api/v1/push). */
export type Envelope = "otlp-proto" | "otlp-json" | "loki-proto" | "loki-json";
