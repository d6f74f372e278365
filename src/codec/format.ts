// The body formats the codec reads. Which Content-Type names which is the ingest listener's
// business (ingest/content-type.ts): nothing in codec/ knows of HTTP.
export type Format = "json" | "ndjson" | "msgpack";
