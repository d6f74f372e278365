// Tokens: generating them (source and API tokens), reading a bearer header, comparing in constant
// time; shared by both listeners and the sources service.
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

/** 401 unless the request carries the API token whose digest is `digest`. */
export function requireApiToken(request: Request, digest: Buffer): void {
  if (!tokenMatches(bearerToken(request.headers.get("authorization")), digest)) {
    throw new AppError("unauthorized", "Invalid authentication");
  }
}
