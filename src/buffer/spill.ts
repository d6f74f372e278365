// The spill file: what PostgreSQL could not take before SHUTDOWN_TIMEOUT_MS, kept on disk under
// DATA_DIR/spill and written to PostgreSQL at the next start, before ingestion opens (docs/durability.md).
// Written atomically (tmp, fsync, rename, fsync of the folder) so a file that exists is whole; the
// tmp is the spill reserve when there is one (reserve.ts), written over, so a full disk has room.
// Exactly once rests on batch ids: every entry carries the id it is written under; a batch that was
// being written at the stop keeps its id, so if that try committed after all, flush_batches' claim
// skips it. A file is deleted only after every entry in it is stored. replaySpills never touches
// the ring; replayInto (the service's replay at start) hands refused entries back through it.
//
// Format: a line "logpond-spill 2\n", then per entry a JSON line
// {"batchId","events","bytes","firstId"?,"lastId"?} and exactly `bytes` bytes of COPY tuples
// (codec/tuples.ts) whose ids are set exactly when the entry has ids (a batch that had its ids
// when the stop came). Version 1 files (COPY text lines, id-prefixed when the entry has ids; written
// before binary COPY) are still read: their lines become tuples.
import { closeSync, fsyncSync, ftruncateSync, mkdirSync, openSync, readdirSync, readFileSync, renameSync, rmSync, writeSync } from "node:fs";
import * as path from "node:path";
import type { Config } from "../config";
import type { Counter, Registry } from "../metrics";
import { type Service, timeLeft } from "../service";
import { openFlushConnection, type IdRange } from "../store/copy";
import { fromText, tupleCount } from "../codec/tuples";
import type { HeldBatch } from "./batch";
import type { Flusher } from "./flusher";
import { keepSpillReserve, takeReserve } from "./reserve";
import type { Ring, Rows } from "./ring";

export interface SpillEntry {
  batchId: string;
  events: number;
  rows: Rows[];
  /** The batch's reserved event ids, when it had them: they are then set in its tuples. */
  ids?: IdRange;
}

export interface SpillWriter {
  /** Stores the rows in one transaction tagged with batchId; a batch id already committed is skipped. */
  write(batchId: string, rows: readonly Rows[], ids?: IdRange): Promise<unknown>;
}

const MAGIC = "logpond-spill 2\n";
const MAGIC_TEXT = "logpond-spill 1\n";
const FOLDER = "spill";

/**
 * DATA_DIR/spill, or an ingest worker's own DATA_DIR/spill/worker-<i> (cluster/supervisor.ts): one
 * process writes and replays a folder at a time, so no file is replayed twice.
 */
export function spillFolder(dataDir: string, worker?: number): string {
  const folder = path.join(path.resolve(dataDir), FOLDER);
  return worker === undefined ? folder : path.join(folder, `worker-${worker}`);
}

/** The indexes of the worker spill folders under DATA_DIR/spill (those of an earlier INGEST_WORKERS too). */
export function workerSpillFolders(dataDir: string): number[] {
  let names: string[];
  try {
    names = readdirSync(spillFolder(dataDir));
  } catch {
    return [];
  }
  return names
    .map((name) => /^worker-(\d+)$/.exec(name)?.[1])
    .filter((index) => index !== undefined)
    .map(Number)
    .sort((a, b) => a - b);
}

/** Writes the entries to a new spill file; returns its path (nothing is written for no entries). */
export function writeSpill(dataDir: string, entries: readonly SpillEntry[], worker?: number): string | undefined {
  if (entries.length === 0) return undefined;
  const folder = spillFolder(dataDir, worker);
  mkdirSync(folder, { recursive: true });
  const name = `spill-${new Date().toISOString().replace(/[:.]/g, "-")}-${process.pid}.bin`;
  const final = path.join(folder, name);
  const tmp = `${final}.tmp`;
  // The reserve's blocks are written over from its start ("r+" does not truncate), then cut to the
  // spill's length: nothing is asked of the filesystem until the spill outgrows the reserve.
  const reserved = takeReserve(folder, tmp);
  const fd = openSync(tmp, reserved ? "r+" : "w", 0o600);
  try {
    let written = writeAll(fd, Buffer.from(MAGIC));
    for (const entry of entries) {
      const parts = entry.rows;
      const bytes = parts.reduce((sum, part) => sum + part.byteLength, 0);
      const head: Record<string, unknown> = { batchId: entry.batchId, events: entry.events, bytes };
      if (entry.ids !== undefined) Object.assign(head, entry.ids);
      written += writeAll(fd, Buffer.from(`${JSON.stringify(head)}\n`));
      for (const part of parts) written += writeAll(fd, part);
    }
    if (reserved) ftruncateSync(fd, written);
    fsyncSync(fd);
  } finally {
    closeSync(fd);
  }
  renameSync(tmp, final);
  syncFolder(folder);
  return final;
}

/** The spill files waiting, oldest first (a leftover .tmp was never complete: it is removed). */
export function pendingSpills(dataDir: string, worker?: number): string[] {
  const folder = spillFolder(dataDir, worker);
  let names: string[];
  try {
    names = readdirSync(folder);
  } catch {
    return [];
  }
  for (const name of names) if (name.endsWith(".tmp")) rmSync(path.join(folder, name), { force: true });
  return names
    .filter((name) => name.endsWith(".bin"))
    .sort()
    .map((name) => path.join(folder, name));
}

export function readSpill(file: string): SpillEntry[] {
  const data = readFileSync(file);
  const magic = data.subarray(0, MAGIC.length).toString();
  if (magic !== MAGIC && magic !== MAGIC_TEXT) throw new Error(`${file} is not a logpond spill file`);
  const entries: SpillEntry[] = [];
  let at = MAGIC.length;
  while (at < data.length) {
    const end = data.indexOf(0x0a, at);
    if (end < 0) throw new Error(`${file} is cut short at byte ${at}`);
    const head = JSON.parse(data.subarray(at, end).toString()) as { batchId: string; events: number; bytes: number; firstId?: number; lastId?: number };
    const rows = data.subarray(end + 1, end + 1 + head.bytes);
    if (rows.length !== head.bytes) throw new Error(`${file} is cut short in batch ${head.batchId}`);
    const ids = head.firstId !== undefined && head.lastId !== undefined ? { firstId: head.firstId, lastId: head.lastId } : undefined;
    const tuples = magic === MAGIC ? rows : fromText(rows.toString(), ids !== undefined);
    entries.push({ batchId: head.batchId, events: head.events, rows: [tuples], ...(ids ? { ids } : {}) });
    at = end + 1 + head.bytes;
  }
  return entries;
}

/**
 * Writes every waiting spill file to PostgreSQL, oldest first, and deletes each once all of it is
 * stored. An entry PostgreSQL refuses for its data goes to `refused` (the flusher's dead-letter
 * path, under new batch ids: nothing of the refused transaction committed). Returns the events.
 */
export async function replaySpills(
  dataDir: string,
  writer: SpillWriter,
  refused: (entry: SpillEntry) => Promise<void>,
  log: (line: string) => void,
  worker?: number,
): Promise<number> {
  let replayed = 0;
  for (const file of pendingSpills(dataDir, worker)) {
    const entries = readSpill(file);
    for (const entry of entries) {
      try {
        await writer.write(entry.batchId, entry.rows, entry.ids);
      } catch (error) {
        if ((error as { kind?: string }).kind !== "data") throw new Error(`replay of ${file} stopped at batch ${entry.batchId}: ${(error as Error).message}`);
        await refused(entry);
      }
      replayed += entry.events;
    }
    rmSync(file);
    syncFolder(path.dirname(file));
    log(
      `spill: ${entries.reduce((sum, e) => sum + e.events, 0)} events of ${path.basename(file)} written to PostgreSQL (batches already committed were skipped)`,
    );
  }
  return replayed;
}

/**
 * The buffer's part of a start and a stop. At start, before ingestion opens: what an earlier stop
 * spilled is replayed (replayInto), then the spill reserve is kept for the next one, even on a full
 * disk (reserve.ts). At stop: drained into PostgreSQL, or spilled (drainOnStop).
 */
export async function startBuffer(
  config: Config,
  {
    url,
    ring,
    flusher,
    metrics,
    log,
    reserve = true,
  }: { url: string; ring: Ring; flusher: Flusher; metrics: Registry; log: (line: string) => void; reserve?: boolean },
): Promise<Service & { readonly drained: boolean; readonly spilled: Spilled }> {
  await replayInto(config, url, ring, flusher, log);
  // A supervisor's own buffer takes no events (its workers keep a reserve each, in their folders).
  if (reserve) keepSpillReserve(config, spillFolder(config.dataDir, config.workerIndex), metrics, log);
  return drainOnStop(config, { flusher, log });
}

/**
 * At start, before ingestion opens: what an earlier stop could not write goes in, on a connection of
 * its own; an entry PostgreSQL refuses for its data takes the flusher's dead-letter path, back
 * through the ring (which sets ids anew, over any the tuples had). An ingest worker replays its own
 * folder; the process that owns DATA_DIR (ROLE=all) replays its own and every worker's, before it
 * starts any worker, so each folder has one reader at a time.
 */
export async function replayInto(config: Config, url: string, ring: Ring, flusher: Flusher, log: (line: string) => void): Promise<number> {
  const replay = openFlushConnection(url, config.flushTimeoutMs, config.hotTier);
  const folders = config.workerIndex !== undefined ? [config.workerIndex] : [undefined, ...(config.role === "all" ? workerSpillFolders(config.dataDir) : [])];
  try {
    let replayed = 0;
    for (const worker of folders) {
      replayed += await replaySpills(
        config.dataDir,
        replay,
        async (entry) => {
          for (const rows of entry.rows) ring.push({ rows, events: tupleCount(rows), bytes: rows.length, seq: 0 });
          await flusher.flush();
        },
        log,
        worker,
      );
    }
    return replayed;
  } finally {
    await replay.close();
  }
}

/** What a stop left in the spill file: the events, and the file. */
export interface Spilled {
  events: number;
  file?: string;
}

/** Time kept back from the drain for writing the spill file and closing connections (at most a quarter). */
const SPILL_RESERVE_MS = 2_000;

/**
 * The buffer's part of the stop: drained into PostgreSQL until what is left of the stop's time,
 * less a spill reserve; what is still held then goes to a spill file. `drained` says afterwards
 * whether nothing was left behind.
 */
export function drainOnStop(
  config: Config,
  { flusher, log }: { flusher: Flusher; log: (line: string) => void },
): Service & { readonly drained: boolean; readonly spilled: Spilled } {
  let drained = false;
  const spilled: Spilled = { events: 0 };
  return {
    name: "buffer",
    spilled,
    async stop(deadline) {
      drained = await flusher.drain(Math.max(0, timeLeft(deadline) - Math.min(SPILL_RESERVE_MS, config.shutdownTimeoutMs / 4)));
      if (drained) return;
      const held = flusher.handOver();
      // Nothing held after all (the last batches committed as the deadline came): a clean stop.
      if (held.length === 0) drained = true;
      else spillHeld(config, held, spilled, flusher.series.lost, log);
    },
    get drained() {
      return drained;
    },
  };
}

/**
 * At stop, once the drain missed its deadline: what the flusher handed over goes to a spill file
 * (written at the next start), or, if that fails, is counted lost. Fills in `spilled`.
 */
function spillHeld(config: Config, held: readonly HeldBatch[], spilled: Spilled, lost: Counter, log: (line: string) => void): void {
  const events = held.reduce((sum, batch) => sum + batch.events, 0);
  try {
    spilled.file = writeSpill(config.dataDir, held, config.workerIndex);
    spilled.events = events;
    log(`shutdown: PostgreSQL did not take ${events} buffered events before SHUTDOWN_TIMEOUT_MS; spilled to ${spilled.file}, written at the next start`);
  } catch (error) {
    lost.inc(events); // logpond_events_lost_total, declared with the flush's series (batch.ts)
    log(`shutdown: LOST ${events} buffered events: PostgreSQL did not take them and the spill file failed (${(error as Error).message})`);
  }
}

/** writeSync may write less than asked (a full disk says so by throwing, a short write by its count). Returns the bytes. */
function writeAll(fd: number, bytes: Uint8Array): number {
  for (let at = 0; at < bytes.length; ) at += writeSync(fd, bytes, at, bytes.length - at);
  return bytes.length;
}

function syncFolder(folder: string): void {
  const fd = openSync(folder, "r");
  try {
    fsyncSync(fd);
  } finally {
    closeSync(fd);
  }
}
