// The verbs on tokens made through /api/v1/tokens, and the one check every management request
// passes: which token it carries, and what that token may do. No HTTP types: routes.ts translates.
// Secrets are kept as SHA-256 digests only. Nothing is cached: each request with a read token
// reads its row (one lookup on a unique index), so a revocation holds at once on every instance.
// Live-tail streams already open are ended by the revocation itself: through the
// `logpond_tokens` NOTIFY (delivered at commit) on other instances, at once on this one.
import { asc, eq, inArray, sql as sqlExpr } from "drizzle-orm";
import type { Config } from "../config";
import { AppError, notFound } from "../errors";
import { type ApiToken, loadApiToken } from "../http/apitoken";
import { type Access, type Authenticate, bearerToken, digest, FULL_ACCESS, tokenMatches, unauthorized } from "../http/auth";
import { closing, type Service } from "../service";
import type { Db, Sql } from "../store/db";
import { apiTokens, sources } from "../store/schema";
import { generateSecret, isSecretShaped, type TokenAttributes, type TokenRow } from "./model";

export const TOKENS_CHANNEL = "logpond_tokens";

/** last_used_at is written at most this often per token, so reads do not each cost a write. */
const LAST_USED_EVERY_MS = 60_000;

export interface TokenService {
  create(attributes: TokenAttributes): Promise<{ row: TokenRow; secret: string }>;
  list(): Promise<TokenRow[]>;
  remove(id: number): Promise<void>;
}

/** What a revocation ends: the live-tail streams opened with a token (tail/hub.ts). */
export interface TokenHolders {
  tokenRevoked(id: number): void;
  /** Read tokens of the streams open now. */
  tokenIds(): number[];
}

const COLUMNS = {
  id: apiTokens.id,
  name: apiTokens.name,
  scope: apiTokens.scope,
  sourceIds: apiTokens.sourceIds,
  createdAt: apiTokens.createdAt,
  lastUsedAt: apiTokens.lastUsedAt,
};

/**
 * The API token (API_TOKEN, or the one kept under DATA_DIR), the verbs, the authenticator, and the
 * revocations of other instances followed until the stop (waited for 1 s at most); `tail` holds
 * the streams a revocation ends.
 */
export async function startTokens(
  config: Config,
  { store, tail: holders, log }: { store: { sql: Sql; db: Db }; tail: TokenHolders; log: (line: string) => void },
): Promise<Service & { apiToken: ApiToken; service: TokenService; authenticate: Authenticate }> {
  const { db, sql } = store;
  const apiToken = loadApiToken(config);
  const apiTokenDigest = digest(apiToken.token);
  const revoked = (id: number) => holders.tokenRevoked(id);
  // A (re)connected listener may have missed revocations: end the streams whose token is gone.
  const recheck = async () => {
    const open = holders.tokenIds();
    if (open.length === 0) return;
    const kept = new Set((await db.select({ id: apiTokens.id }).from(apiTokens).where(inArray(apiTokens.id, open))).map((row) => row.id));
    for (const id of open) if (!kept.has(id)) revoked(id);
  };
  const listening = await sql.listen(
    TOKENS_CHANNEL,
    (payload) => {
      const id = Number(payload);
      if (Number.isSafeInteger(id)) revoked(id);
    },
    () => void recheck().catch((error) => log(`tokens: could not recheck the streams' tokens: ${(error as Error).message}`)),
  );

  const service: TokenService = {
    async create(attributes) {
      const secret = generateSecret();
      const row = await db.transaction(async (tx) => {
        if (attributes.sourceIds !== null) {
          const found = new Set((await tx.select({ id: sources.id }).from(sources).where(inArray(sources.id, attributes.sourceIds))).map((r) => r.id));
          const unknown = attributes.sourceIds.filter((id) => !found.has(id));
          if (unknown.length > 0) {
            throw new AppError("validation", "Validation errors", {
              invalidAttributes: { source_ids: unknown.map((id) => `${id} is not a source`) },
            });
          }
        }
        const [inserted] = await tx
          .insert(apiTokens)
          .values({ ...attributes, digest: digest(secret) })
          .returning(COLUMNS);
        return inserted!;
      });
      return { row, secret };
    },

    list: () => db.select(COLUMNS).from(apiTokens).orderBy(asc(apiTokens.id)),

    async remove(id) {
      const deleted = await db.transaction(async (tx) => {
        const [row] = await tx.delete(apiTokens).where(eq(apiTokens.id, id)).returning({ id: apiTokens.id });
        if (row) await tx.execute(sqlExpr`select pg_notify(${TOKENS_CHANNEL}, ${String(id)})`);
        return row !== undefined;
      });
      if (!deleted) throw notFound();
      revoked(id);
    },
  };

  const authenticate: Authenticate = async (request) => {
    const token = bearerToken(request.headers.get("authorization"));
    if (tokenMatches(token, apiTokenDigest)) return FULL_ACCESS;
    if (token === undefined || !isSecretShaped(token)) throw unauthorized();
    // Looked up by its digest: the index's timing can only tell about the digest, which gives
    // nothing of a secret that is not already known.
    const [row] = await db
      .select({ id: apiTokens.id, sourceIds: apiTokens.sourceIds, lastUsedAt: apiTokens.lastUsedAt })
      .from(apiTokens)
      .where(eq(apiTokens.digest, digest(token)));
    if (!row) throw unauthorized();
    if (row.lastUsedAt === null || Date.now() - row.lastUsedAt.getTime() > LAST_USED_EVERY_MS) {
      db.update(apiTokens)
        .set({ lastUsedAt: sqlExpr`now()` })
        .where(eq(apiTokens.id, row.id))
        .catch((error: Error) => log(`tokens: could not record the use of token ${row.id}: ${error.message}`));
    }
    const access: Access = { scope: "read", tokenId: row.id, sourceIds: row.sourceIds === null ? undefined : new Set(row.sourceIds.map(Number)) };
    return access;
  };

  return { ...closing("tokens' notifications", () => listening.unlisten().catch(() => {}), 1_000), apiToken, service, authenticate };
}
