// Tokens: generating them (source and API tokens), reading a bearer header, comparing in constant
// time, and what a management request's token may do (Access); shared by both listeners, the
// sources service and tokens/.
// Tokens are compared as SHA-256 digests, so neither their content nor their length leaks
// through timing.
import { createHash, randomInt, timingSafeEqual } from "node:crypto";
import { AppError } from "../errors";

const TOKEN_ALPHABET = "0123456789ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz";
const TOKEN_LENGTH = 24;

/** 24 base62 characters from the CSPRNG (randomInt rejects biased draws). */
export function generateToken(): string {
  let token = "";
  for (let i = 0; i < TOKEN_LENGTH; i++) token += TOKEN_ALPHABET[randomInt(TOKEN_ALPHABET.length)];
  return token;
}

/** The token of an `Authorization: Bearer <token>` header; the scheme is case-insensitive. */
export function bearerToken(authorization: string | null | undefined): string | undefined {
  if (!authorization) return undefined;
  const space = authorization.indexOf(" ");
  if (space !== 6 || authorization.slice(0, 6).toLowerCase() !== "bearer") return undefined;
  const token = authorization.slice(7).trim();
  return token.length > 0 ? token : undefined;
}

/**
 * The token of `Authorization: Bearer <token>`, or of `Basic <base64(user:password)>`: the password,
 * or the user when the password is empty. Shippers that can only send basic auth (pino-loki, Grafana
 * Alloy's basic_auth, the OpenTelemetry Collector's basicauth) carry the source token that way.
 */
export function bearerOrBasicToken(authorization: string | null | undefined): string | undefined {
  if (!authorization || authorization.indexOf(" ") !== 5 || authorization.slice(0, 5).toLowerCase() !== "basic") return bearerToken(authorization);
  const decoded = Buffer.from(authorization.slice(6).trim(), "base64").toString("utf8");
  const colon = decoded.indexOf(":");
  const token = (colon < 0 ? decoded : decoded.slice(colon + 1) || decoded.slice(0, colon)).trim();
  return token.length > 0 ? token : undefined;
}

export function digest(token: string): Buffer {
  return createHash("sha256").update(token).digest();
}

/** True when `token` matches the token whose digest is `expected`. */
export function tokenMatches(token: string | undefined, expected: Buffer): boolean {
  return token !== undefined && timingSafeEqual(digest(token), expected);
}

export const unauthorized = () => new AppError("unauthorized", "Invalid authentication");

/**
 * What a management request may do: everything (the API token), or read (a token made through
 * /api/v1/tokens), of every source or only of `sourceIds`; `tokenId` names the read token, so its
 * revocation can end the live-tail streams it opened.
 */
export type Access = { readonly scope: "all" } | { readonly scope: "read"; readonly tokenId: number; readonly sourceIds: ReadonlySet<number> | undefined };

export const FULL_ACCESS: Access = Object.freeze({ scope: "all" });

/** The access of a management request's token; 401 when it has none. */
export type Authenticate = (request: Request) => Promise<Access>;

/** 403 unless `access` is the API token's: management writes (sources, tokens) need it. */
export function requireFullAccess(access: Access): void {
  if (access.scope !== "all") throw new AppError("forbidden", "This token may only read: managing sources and tokens needs the API token");
}

/** Whether `access` may see source `id` (a source it may not see is answered as absent: 404). */
export function maySee(access: Access, id: number): boolean {
  return access.scope === "all" || access.sourceIds === undefined || access.sourceIds.has(id);
}
