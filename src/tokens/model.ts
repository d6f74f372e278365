// A token made through /api/v1/tokens: how a request body becomes validated attributes, how a row
// becomes the JSON:API document, and the secret's shape. Pure: no HTTP, no database.
import { AppError } from "../errors";
import { generateToken } from "../http/auth";
import { MAX_SOURCE_IDS } from "../query/request";

/** The scopes a token may be given; the API token alone manages sources and tokens. */
export const SCOPES = ["read"] as const;
export type Scope = (typeof SCOPES)[number];

export const NAME_MAX_CHARS = 255;

/**
 * A read token's secret: a prefix, so a leaked one is recognisable (secret scanners, logs), and
 * 48 base62 characters (285 bits). Only a bearer of this shape is looked up in the database: any
 * other wrong token is refused without a query.
 */
const PREFIX = "lpr_";
const SHAPE = /^lpr_[0-9A-Za-z]{48}$/;

export function generateSecret(): string {
  return PREFIX + generateToken() + generateToken();
}

export function isSecretShaped(token: string): boolean {
  return SHAPE.test(token);
}

export interface TokenRow {
  id: number;
  name: string;
  scope: string;
  /** null: every source. */
  sourceIds: number[] | null;
  createdAt: Date;
  lastUsedAt: Date | null;
}

export interface TokenAttributes {
  name: string;
  scope: Scope;
  sourceIds: number[] | null;
}

const WRITABLE = ["name", "scope", "source_ids"];
const READ_ONLY = ["id", "type", "token", "created_at", "last_used_at"];

export function validateCreate(body: Record<string, unknown>): TokenAttributes {
  const problems: Record<string, string[]> = {};
  const add = (key: string, message: string) => (problems[key] ??= []).push(message);
  for (const key of Object.keys(body)) {
    if (!WRITABLE.includes(key)) add(key, READ_ONLY.includes(key) ? "is read-only" : "is not a permitted attribute");
  }
  let name = "";
  if (typeof body.name !== "string" || body.name.trim() === "")
    add("name", body.name === undefined || body.name === null ? "can't be blank" : "must be a string");
  else if (body.name.trim().length > NAME_MAX_CHARS) add("name", `is too long (maximum is ${NAME_MAX_CHARS} characters)`);
  else name = body.name.trim();
  if (body.scope === undefined || body.scope === null) add("scope", `can't be blank (one of: ${SCOPES.join(", ")})`);
  else if (!(SCOPES as readonly unknown[]).includes(body.scope)) add("scope", `must be one of: ${SCOPES.join(", ")}`);
  const sourceIds = readSourceIds(body.source_ids, (message) => add("source_ids", message));
  if (Object.keys(problems).length > 0) throw new AppError("validation", "Validation errors", { invalidAttributes: problems });
  return { name, scope: body.scope as Scope, sourceIds };
}

/** Absent or null: every source. Else a list of 1 to MAX_SOURCE_IDS ids, as numbers or numeric strings. */
function readSourceIds(raw: unknown, problem: (message: string) => void): number[] | null {
  if (raw === undefined || raw === null) return null;
  if (!Array.isArray(raw)) {
    problem("must be a list of source ids, or left out for every source");
    return null;
  }
  if (raw.length === 0) problem("must list at least one source id, or be left out for every source");
  if (raw.length > MAX_SOURCE_IDS) problem(`lists ${raw.length} sources; at most ${MAX_SOURCE_IDS}`);
  const ids: number[] = [];
  for (const item of raw) {
    const text = typeof item === "number" || typeof item === "string" ? String(item).trim() : "";
    const id = /^[0-9]{1,15}$/.test(text) ? Number(text) : 0;
    if (id >= 1 && Number.isSafeInteger(id)) ids.push(id);
    else problem(`${JSON.stringify(item)?.slice(0, 40)} is not a source id`);
  }
  return [...new Set(ids)].sort((a, b) => a - b);
}

/** The JSON:API document; `secret` only in the answer that creates the token. */
export function toDocument(row: TokenRow, secret?: string) {
  return {
    id: String(row.id),
    type: "token" as const,
    attributes: {
      name: row.name,
      scope: row.scope,
      source_ids: row.sourceIds === null ? null : row.sourceIds.map(String),
      ...(secret === undefined ? {} : { token: secret }),
      created_at: row.createdAt.toISOString(),
      last_used_at: row.lastUsedAt === null ? null : row.lastUsedAt.toISOString(),
    },
  };
}
