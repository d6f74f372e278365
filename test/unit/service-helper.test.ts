// test/helpers/service.ts against a stand-in for logpond (a bun script printing the banner's lines):
// the banner parsed for the URLs, and stop() escalating to SIGKILL when SIGTERM is ignored.
import { expect, test } from "bun:test";
import { spawnService } from "../helpers/service";

const banner = [
  "logpond is running (started in 5 ms)",
  "  management API  http://127.0.0.1:4001/api/v1/sources",
  "  ingestion       http://127.0.0.1:4002/",
  "  database        postgres://someone@db.example:5432/logs",
  "  acknowledgement memory; flush every 1000 ms or 10000 events",
].join("\n");

const standIn = (onTerm: string) => [
  process.execPath,
  "-e",
  `process.on("SIGTERM", () => { ${onTerm} }); console.log(${JSON.stringify(banner)}); setInterval(() => {}, 1000);`,
];

test("parses the banner; stop() sends SIGTERM and returns the exit code", async () => {
  const service = await spawnService({ DATABASE_URL: "postgres://someone@db.example:5432/logs" }, { command: standIn("process.exit(0)") });
  expect(service.apiUrl).toBe("http://127.0.0.1:4001");
  expect(service.ingestUrl).toBe("http://127.0.0.1:4002");
  expect(service.databaseUrl).toBe("postgres://someone@db.example:5432/logs");
  expect(await service.stop()).toBe(0);
});

test("a process that ignores SIGTERM is killed once the stop's deadline passes", async () => {
  const service = await spawnService({ DATABASE_URL: "postgres://x@127.0.0.1:1/x" }, { command: standIn("") });
  expect(await service.stop(200)).toBe("SIGKILL");
});

test("a process that exits before its banner fails the start with its output", async () => {
  const failing = [process.execPath, "-e", 'console.error("could not start: no reason"); process.exit(3)'];
  await expect(spawnService({}, { command: failing })).rejects.toThrow(/exit 3\):\ncould not start: no reason/);
});
