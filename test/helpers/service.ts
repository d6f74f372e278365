// logpond as users run it: `bun src/main.ts` (or another launcher, such as `npm start`) in its own
// process, with its banner parsed for the two URLs. Output is collected for assertions; the caller
// stops the process (by its PID).
import * as path from "node:path";

const ROOT = path.join(import.meta.dir, "..", "..");
const MAIN = path.join(ROOT, "src", "main.ts");
export const SERVICE_API_TOKEN = "service-token-0123456789abcdef";

export interface Service {
  proc: ReturnType<typeof Bun.spawn>;
  apiUrl: string;
  ingestUrl: string;
  output: () => string;
}

export async function spawnService(env: Record<string, string>, command = [process.execPath, MAIN]): Promise<Service> {
  const proc = Bun.spawn(command, {
    cwd: ROOT,
    // LOG_LEVEL: callers read the log lines (a LOG_LEVEL=silent in the shell must not hide them).
    env: { ...process.env, API_PORT: "0", INGEST_PORT: "0", API_TOKEN: SERVICE_API_TOKEN, EMBEDDED_PG_PORT: "0", LOG_LEVEL: "info", ...env },
    stdout: "pipe",
    stderr: "pipe",
  });
  let output = "";
  const reader = (stream: ReadableStream<Uint8Array>) =>
    (async () => {
      for await (const part of stream) output += new TextDecoder().decode(part);
    })();
  void reader(proc.stdout as ReadableStream<Uint8Array>);
  void reader(proc.stderr as ReadableStream<Uint8Array>);
  const deadline = Date.now() + 60_000;
  while (!/ingestion\s+http/.test(output)) {
    if (proc.exitCode !== null || Date.now() > deadline) {
      proc.kill("SIGKILL");
      throw new Error(`logpond did not start:\n${output}`);
    }
    await Bun.sleep(20);
  }
  const apiUrl = /management API\s+(http\S+)\/api\/v1\/sources/.exec(output)![1]!;
  const ingestUrl = /ingestion\s+(http\S+)\//.exec(output)![1]!;
  return { proc, apiUrl, ingestUrl, output: () => output };
}

/** Creates a source through the service's API; returns its id and token. */
export async function createSource(service: Service, name: string): Promise<{ id: number; token: string }> {
  const response = await fetch(`${service.apiUrl}/api/v1/sources`, {
    method: "POST",
    headers: { authorization: `Bearer ${SERVICE_API_TOKEN}` },
    body: JSON.stringify({ name }),
  });
  if (response.status !== 201) throw new Error(`create source: ${response.status} ${await response.text()}`);
  const { data } = (await response.json()) as { data: { id: string; attributes: { token: string } } };
  return { id: Number(data.id), token: data.attributes.token };
}
