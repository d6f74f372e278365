import { expect, test } from "bun:test";
import { ConfigError, DEFAULTS, loadConfig } from "../../src/config";

test("defaults come from the one table and the result is frozen", () => {
  const config = loadConfig({});
  expect(config.apiPort).toBe(DEFAULTS.API_PORT);
  expect(config.ingestPort).toBe(DEFAULTS.INGEST_PORT);
  expect(config.host).toBe(DEFAULTS.HOST);
  expect(config.bufferMaxBytes).toBe(DEFAULTS.BUFFER_MAX_BYTES);
  expect(config.flushIntervalMs).toBeLessThanOrEqual(1000);
  expect(Object.isFrozen(config)).toBe(true);
});

test("every problem is reported at once", () => {
  let error: unknown;
  try {
    loadConfig({ API_PORT: "abc", INGEST_ACK: "sometimes", FLUSH_INTERVAL_MS: "5000", BUFFER_MAX_EVENTS: "-1", DATABASE_URL: "mysql://x" });
  } catch (e) {
    error = e;
  }
  expect(error).toBeInstanceOf(ConfigError);
  const problems = (error as ConfigError).problems;
  expect(problems).toHaveLength(5);
  for (const name of ["API_PORT", "INGEST_ACK", "FLUSH_INTERVAL_MS", "BUFFER_MAX_EVENTS", "DATABASE_URL"]) {
    expect(problems.some((p) => p.startsWith(name))).toBe(true);
  }
});

test("port 0 is allowed and the same non-zero port twice is not", () => {
  expect(loadConfig({ API_PORT: "0", INGEST_PORT: "0" }).apiPort).toBe(0);
  expect(() => loadConfig({ API_PORT: "4000", INGEST_PORT: "4000" })).toThrow(/must differ/);
});
