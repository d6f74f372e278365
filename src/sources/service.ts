// The management verbs on sources. No HTTP types: routes.ts translates. Every change is written
// together with a NOTIFY (delivered at commit) so other instances' caches follow, and applied to
// this process's cache at once.
import { and, asc, count, eq, ilike, inArray, sql as sqlExpr } from "drizzle-orm";
import { generateToken } from "../http/auth";
import { notFound } from "../errors";
import type { Db } from "../store/db";
import { sourceDeletions, sources } from "../store/schema";
import type { SourceCache } from "./cache";
import { SOURCES_CHANNEL } from "./cache";
import { tableNameFor, type SourceChanges, type SourceRow } from "./model";

const UNIQUE_VIOLATION = "23505";

export interface SourceService {
  /** `only`: the sources a read token may see (all when absent). */
  list(query: { page: number; perPage: number; name?: string; only?: number[] }): Promise<{ rows: SourceRow[]; total: number }>;
  get(id: number): Promise<SourceRow>;
  create(attributes: Required<SourceChanges>): Promise<SourceRow>;
  update(id: number, changes: SourceChanges): Promise<SourceRow>;
  remove(id: number): Promise<void>;
  rotateToken(id: number): Promise<SourceRow>;
}

export function createSourceService(db: Db, cache: SourceCache, onDeleted: (id: number) => void): SourceService {
  const notify = (tx: Pick<Db, "execute">, id: number) => tx.execute(sqlExpr`select pg_notify(${SOURCES_CHANNEL}, ${String(id)})`);

  async function get(id: number): Promise<SourceRow> {
    const [row] = await db.select().from(sources).where(eq(sources.id, id));
    if (!row) throw notFound();
    return row;
  }

  async function change(id: number, values: Partial<typeof sources.$inferInsert>): Promise<SourceRow> {
    const row = await db.transaction(async (tx) => {
      const [updated] = await tx
        .update(sources)
        .set({ ...values, updatedAt: sqlExpr`now()` })
        .where(eq(sources.id, id))
        .returning();
      if (updated) await notify(tx, id);
      return updated;
    });
    if (!row) throw notFound();
    cache.put(row);
    return row;
  }

  return {
    async list({ page, perPage, name, only }) {
      const where = and(name ? ilike(sources.name, `%${name.replace(/[\\%_]/g, "\\$&")}%`) : undefined, only ? inArray(sources.id, only) : undefined);
      const [rows, counted] = await Promise.all([
        db
          .select()
          .from(sources)
          .where(where)
          .orderBy(asc(sources.id))
          .limit(perPage)
          .offset((page - 1) * perPage),
        db.select({ total: count() }).from(sources).where(where),
      ]);
      return { rows, total: counted[0]?.total ?? 0 };
    },

    get,

    async create(attributes) {
      const base = tableNameFor(attributes.name);
      // Two creates with the same name may race for the same suffix: the unique index decides, we retry.
      for (let attempt = 0; ; attempt++) {
        const taken = await db
          .select({ tableName: sources.tableName })
          .from(sources)
          .where(sqlExpr`${sources.tableName} = ${base} or ${sources.tableName} ~ ${`^${base}_[0-9]+$`}`);
        const used = new Set(taken.map((r) => r.tableName));
        let tableName = base;
        for (let n = 2; used.has(tableName); n++) tableName = `${base}_${n}`;
        try {
          const row = await db.transaction(async (tx) => {
            const [inserted] = await tx
              .insert(sources)
              .values({ ...attributes, tableName, token: generateToken() })
              .returning();
            await notify(tx, inserted!.id);
            return inserted!;
          });
          cache.put(row);
          return row;
        } catch (error) {
          if (attempt < 5 && (error as { code?: string }).code === UNIQUE_VIOLATION) continue;
          throw error;
        }
      }
    },

    update: (id, changes) => change(id, changes),

    rotateToken: (id) => change(id, { token: generateToken() }),

    async remove(id) {
      const deleted = await db.transaction(async (tx) => {
        const [row] = await tx.delete(sources).where(eq(sources.id, id)).returning({ id: sources.id });
        if (!row) return false;
        await tx.insert(sourceDeletions).values({ sourceId: id }).onConflictDoNothing();
        await notify(tx, id);
        return true;
      });
      if (!deleted) throw notFound();
      cache.drop(id);
      onDeleted(id);
    },
  };
}
