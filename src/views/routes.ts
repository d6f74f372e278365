// The management listener's /api/v2/views routes: list, create, get, update, delete the page's
// saved views. Authenticated as /api/v1/sources: the API token may do everything; a read token
// may list and get the views whose sources it may all see (others are absent: 404), and no write
// (403).
import { Elysia } from "elysia";
import { notFound } from "../errors";
import { type Access, type Authenticate, maySee, requireFullAccess } from "../http/auth";
import { readJsonObject } from "../http/body";
import { parseId } from "../sources/model";
import { toViewDocument, validateView, type ViewChanges, type ViewRow } from "./model";
import type { ViewService } from "./service";

export interface ViewRoutesDeps {
  service: ViewService;
  authenticate: Authenticate;
}

const json = (body: unknown, status = 200, headers: Record<string, string> = {}) =>
  new Response(JSON.stringify(body), { status, headers: { "content-type": "application/json; charset=utf-8", ...headers } });

const visible = (access: Access, row: ViewRow) => row.sourceIds.every((id) => maySee(access, id));

export function viewRoutes({ service, authenticate }: ViewRoutesDeps) {
  const idOf = (raw: string) =>
    parseId(raw) ??
    (() => {
      throw notFound();
    })();
  return new Elysia({ name: "logpond/views", prefix: "/api/v2" })
    .resolve(async ({ request }) => ({ access: await authenticate(request) }))
    .get("/views", async ({ access }) => json({ data: (await service.list()).filter((row) => visible(access, row)).map(toViewDocument) }))
    .get("/views/:id", async ({ params, access }) => {
      const row = await service.get(idOf(params.id));
      if (!visible(access, row)) throw notFound();
      return json({ data: toViewDocument(row) });
    })
    .post(
      "/views",
      async ({ request, access }) => {
        requireFullAccess(access);
        const row = await service.create(validateView(await readJsonObject(request), true) as Required<ViewChanges>);
        return json({ data: toViewDocument(row) }, 201, { location: new URL(`/api/v2/views/${row.id}`, request.url).toString() });
      },
      { parse: "none" },
    )
    .patch(
      "/views/:id",
      async ({ params, request, access }) => {
        requireFullAccess(access);
        const id = idOf(params.id);
        return json({ data: toViewDocument(await service.update(id, validateView(await readJsonObject(request), false))) });
      },
      { parse: "none" },
    )
    .delete("/views/:id", async ({ params, access }) => {
      requireFullAccess(access);
      await service.remove(idOf(params.id));
      return new Response(null, { status: 204 });
    });
}
