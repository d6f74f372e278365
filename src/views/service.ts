// The verbs on saved views. No HTTP types: routes.ts translates. A view's sources must exist when
// it is written (422 naming those that do not); one deleted later stays named in the view.
import { asc, eq, inArray, sql as sqlExpr } from "drizzle-orm";
import { AppError, notFound } from "../errors";
import type { Db } from "../store/db";
import { savedViews, sources } from "../store/schema";
import type { ViewChanges, ViewRow } from "./model";

export interface ViewService {
  list(): Promise<ViewRow[]>;
  get(id: number): Promise<ViewRow>;
  create(changes: Required<ViewChanges>): Promise<ViewRow>;
  update(id: number, changes: ViewChanges): Promise<ViewRow>;
  remove(id: number): Promise<void>;
}

export function createViewService(db: Db): ViewService {
  async function get(id: number): Promise<ViewRow> {
    const [row] = await db.select().from(savedViews).where(eq(savedViews.id, id));
    if (!row) throw notFound();
    return row;
  }

  async function requireSources(ids: number[] | undefined): Promise<void> {
    if (!ids) return;
    const found = new Set((await db.select({ id: sources.id }).from(sources).where(inArray(sources.id, ids))).map((row) => row.id));
    const missing = ids.filter((id) => !found.has(id));
    if (missing.length) {
      throw new AppError("validation", "Validation errors", { invalidAttributes: { source_ids: [`names sources that do not exist: ${missing.join(", ")}`] } });
    }
  }

  const values = (changes: ViewChanges) => ({
    ...(changes.name !== undefined && { name: changes.name }),
    ...(changes.sourceIds !== undefined && { sourceIds: changes.sourceIds }),
    ...(changes.query !== undefined && { query: changes.query }),
    ...(changes.rangeFrom !== undefined && { rangeFrom: changes.rangeFrom, rangeTo: changes.rangeTo ?? null }),
    ...(changes.columns !== undefined && { columns: changes.columns }),
  });

  return {
    list: () => db.select().from(savedViews).orderBy(asc(savedViews.name), asc(savedViews.id)),
    get,
    async create(changes) {
      await requireSources(changes.sourceIds);
      const [row] = await db
        .insert(savedViews)
        .values({ ...values(changes), name: changes.name, sourceIds: changes.sourceIds, rangeFrom: changes.rangeFrom })
        .returning();
      return row!;
    },
    async update(id, changes) {
      await get(id);
      await requireSources(changes.sourceIds);
      const [row] = await db
        .update(savedViews)
        .set({ ...values(changes), updatedAt: sqlExpr`now()` })
        .where(eq(savedViews.id, id))
        .returning();
      if (!row) throw notFound();
      return row;
    },
    async remove(id) {
      const deleted = await db.delete(savedViews).where(eq(savedViews.id, id)).returning({ id: savedViews.id });
      if (!deleted.length) throw notFound();
    },
  };
}
