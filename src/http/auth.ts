// Bearer-token reading and constant-time comparison, shared by both listeners.
// Tokens are compared as SHA-256 digests, so neither their content nor their length leaks
// through timing.
import { createHash, timingSafeEqual } from "node:crypto";

/** The token of an `Authorization: Bearer <token>` header; the scheme is case-insensitive. */
export function bearerToken(authorization: string | null | undefined): string | undefined {
  if (!authorization) return undefined;
  const space = authorization.indexOf(" ");
  if (space !== 6 || authorization.slice(0, 6).toLowerCase() !== "bearer") return undefined;
  const token = authorization.slice(7).trim();
  return token.length > 0 ? token : undefined;
}

export function digest(token: string): Buffer {
  return createHash("sha256").update(token).digest();
}

/** True when `token` matches the token whose digest is `expected`. */
export function tokenMatches(token: string | undefined, expected: Buffer): boolean {
  return token !== undefined && timingSafeEqual(digest(token), expected);
}
