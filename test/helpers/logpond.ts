// Starts a real logpond in-process (both listeners on free ports, the test PostgreSQL) and
// offers the calls tests make: management requests, source factories, ingestion posts, and a
// flush that waits until everything acknowledged is in PostgreSQL.
import { mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import * as path from "node:path";
import postgres from "postgres";
import { loadConfig } from "../../src/config";
import { startLogpond, type Logpond } from "../../src/server";

export const API_TOKEN = "test-api-token-0123456789abcdef";

export interface TestLogpond extends Logpond {
  api(method: string, pathname: string, body?: unknown, headers?: Record<string, string>): Promise<Response>;
  createSource(attributes?: Record<string, unknown>): Promise<TestSource>;
  ingest(token: string, body: NonNullable<RequestInit["body"]>, headers?: Record<string, string>): Promise<Response>;
  /** Events stored for a source, in id order (a request's events get consecutive ids in order). */
  stored(sourceId: string | number): Promise<{ id: number; dt: Date; raw: any; text: string }[]>;
  sql: postgres.Sql;
  logs: string[];
}

export interface TestSource {
  id: string;
  token: string;
  attributes: Record<string, any>;
}

export async function startTestLogpond(env: Record<string, string> = {}): Promise<TestLogpond> {
  const databaseUrl = process.env.LOGPOND_TEST_DATABASE_URL;
  if (!databaseUrl) throw new Error("the test preload did not start PostgreSQL");
  // A DATA_DIR of our own is removed at stop (the suite left ~400 of them per run); one the test
  // passes is the test's.
  const ownDataDir = env.DATA_DIR === undefined ? mkdtempSync(path.join(tmpdir(), "logpond-test-")) : undefined;
  const config = loadConfig({
    DATABASE_URL: databaseUrl,
    API_PORT: "0",
    INGEST_PORT: "0",
    API_TOKEN,
    DATA_DIR: ownDataDir ?? env.DATA_DIR,
    FLUSH_INTERVAL_MS: "50",
    // A read that is correct must not become a 503 because a loaded machine is slow: tests about
    // the timeout set their own.
    QUERY_TIMEOUT_MS: "60000",
    ...env,
  });
  const logs: string[] = [];
  const logpond = await startLogpond(config, (line) => logs.push(line));
  const sql = postgres(databaseUrl, { max: 2, onnotice: () => {} });
  const stopLogpond = logpond.stop;

  const api: TestLogpond["api"] = (method, pathname, body, headers = {}) =>
    fetch(`${logpond.apiUrl}${pathname}`, {
      method,
      headers: { authorization: `Bearer ${API_TOKEN}`, ...headers },
      body: body === undefined ? undefined : typeof body === "string" ? body : JSON.stringify(body),
    });

  return Object.assign(logpond, {
    api,
    sql,
    logs,
    async createSource(attributes: Record<string, unknown> = {}) {
      const response = await api("POST", "/api/v1/sources", { name: `test ${crypto.randomUUID()}`, ...attributes });
      if (response.status !== 201) throw new Error(`createSource: ${response.status} ${await response.text()}`);
      const { data } = (await response.json()) as { data: { id: string; attributes: Record<string, any> } };
      return { id: data.id, token: data.attributes.token as string, attributes: data.attributes };
    },
    ingest(token: string, body: NonNullable<RequestInit["body"]>, headers: Record<string, string> = {}) {
      return fetch(`${logpond.ingestUrl}/`, {
        method: "POST",
        headers: { authorization: `Bearer ${token}`, "content-type": "application/json", ...headers },
        body,
      });
    },
    async stored(sourceId: string | number) {
      await logpond.flusher.flush();
      const rows = await sql<{ id: string; dt: Date; raw: any; text: string }[]>`
        select id, dt, raw, raw::text as text from log_events where source_id = ${Number(sourceId)} order by id`;
      return rows.map((row) => ({ ...row, id: Number(row.id) }));
    },
    async stop() {
      const drained = await stopLogpond();
      await sql.end({ timeout: 5 });
      if (ownDataDir) rmSync(ownDataDir, { recursive: true, force: true });
      return drained;
    },
  });
}
