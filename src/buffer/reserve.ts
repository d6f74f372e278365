// The spill reserve: a file of DATA_DIR/spill kept as large as a spill of everything the buffer can
// hold, so that a stop while the disk is full (the embedded PostgreSQL filled it, and stopped) still
// has room for its spill file: the spill is written into the reserve's blocks (spill.ts takes it),
// never into space it would have to find. Kept only where logpond runs its own PostgreSQL in
// DATA_DIR: with DATABASE_URL nothing of logpond's grows beside the spill files.
// Filled with bytes that do not compress: a file of zeros could be stored as a hole. On a
// copy-on-write filesystem (btrfs, ZFS) an overwrite takes new blocks: there it is no guarantee.
import { randomBytes } from "node:crypto";
import { closeSync, existsSync, fstatSync, fsyncSync, ftruncateSync, mkdirSync, openSync, renameSync, statfsSync, writeSync } from "node:fs";
import * as path from "node:path";
import type { Config } from "../config";
import type { Registry } from "../metrics";
import { ringMaxBytes } from "../memory/costs";

const NAME = "reserve";
/** Bytes a spill entry's head line takes at most (batch id, counts, ids as JSON). */
const ENTRY_HEAD_BYTES = 200;
/** Left free on the filesystem after the reserve is made: PostgreSQL needs room to start. */
const LEAVE_FREE_BYTES = 64 * 1024 * 1024;
const WRITE_BYTES = 1024 * 1024;

/**
 * What a spill of a full buffer takes: its rows (at most the ring's bytes) and a head line per
 * entry (a flusher's batch of at most FLUSH_MAX_EVENTS, two per batch at worst where chunks do not
 * add up to a batch, and the parts of a batch being split to isolate a refused event).
 */
export function spillReserveBytes(config: Config): number {
  const entries = 2 * Math.ceil(config.bufferMaxEvents / config.flushMaxEvents) + 64 * config.flushStreams;
  return ringMaxBytes(config.bufferMaxBytes) + entries * ENTRY_HEAD_BYTES;
}

/**
 * At start, after the spill files are replayed: the reserve made (or resized) for the embedded
 * PostgreSQL's DATA_DIR; its size shown as logpond_spill_reserve_bytes. A filesystem without room
 * for it is logged, not fatal: the stop's spill then needs free space, as it did without one.
 */
export function keepSpillReserve(config: Config, spillFolder: string, metrics: Registry, log: (line: string) => void): void {
  let reserved = 0;
  metrics.gauge("logpond_spill_reserve_bytes", "Disk space kept in DATA_DIR/spill for a spill file while the disk is full.", () => reserved);
  if (!config.spillReserve) return;
  const want = spillReserveBytes(config);
  try {
    reserved = keepReserve(spillFolder, want);
  } catch (error) {
    reserved = 0;
    log(`spill: no reserve of ${want} bytes kept (${(error as Error).message}); a stop while the disk is full may not be able to write its spill file`);
  }
}

/** Makes the folder's reserve `bytes` long; returns its size. Throws when the filesystem has no room for it. */
export function keepReserve(folder: string, bytes: number): number {
  mkdirSync(folder, { recursive: true });
  const file = path.join(folder, NAME);
  const fd = openSync(file, existsSync(file) ? "r+" : "w", 0o600);
  try {
    const size = fstatSync(fd).size;
    if (size > bytes) ftruncateSync(fd, bytes);
    if (size >= bytes) return bytes;
    const { bavail, bsize } = statfsSync(folder);
    if (bavail * bsize < bytes - size + LEAVE_FREE_BYTES) {
      throw new Error(`the filesystem of ${folder} has ${Math.floor((bavail * bsize) / 1048576)} MiB free`);
    }
    const filler = randomBytes(WRITE_BYTES);
    for (let at = size; at < bytes; ) {
      const n = Math.min(WRITE_BYTES, bytes - at);
      at += writeSync(fd, filler, 0, n, at);
    }
    fsyncSync(fd);
    return bytes;
  } finally {
    closeSync(fd);
  }
}

/** Renames the reserve to `to` for a spill to be written over; false when there is none. */
export function takeReserve(folder: string, to: string): boolean {
  try {
    renameSync(path.join(folder, NAME), to);
    return true;
  } catch {
    return false;
  }
}
