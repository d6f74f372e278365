// The management listener's /api/v2/views routes: list, create, get, update, delete the page's
// saved views. Authenticated as /api/v1/sources: the API token may do everything; a read token
// may list and get the views whose sources it may all see (others are absent: 404), and no write
// (403, saying so, as http/auth.ts's refusal of source and token writes does).
import { Elysia } from "elysia";
import { AppError, notFound } from "../errors";
import { type Access, type Authenticate, maySee } from "../http/auth";
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

/** 403 unless `access` is the API token's; before the id or the body is read. */
function requireWrite(access: Access): void {
  if (access.scope !== "all") throw new AppError("forbidden", "This token may only read: saving, changing and deleting views needs the API token");
}

export function viewRoutes({ service, authenticate }: ViewRoutesDeps) {
  const idOf = (raw: string) =>
    parseId(raw) ??
    (() => {
      throw notFound();
    })();
  return new Elysia({ name: "logpond/views", prefix: "/api/v2" })
    .resolve(async ({ request }) => ({ access: await authenticate(request) }))
    .get("/views", async ({ request, access }) => {
      // The list is every view the token may see: a filter or a page asked for would be silently ignored.
      const names = [...new Set(new URL(request.url).searchParams.keys())].map((name) => JSON.stringify(name.slice(0, 40)));
      if (names.length)
        throw new AppError("bad_request", `/api/v2/views takes no parameters (got ${names.join(", ")}): it lists every view this token may see`);
      return json({ data: (await service.list()).filter((row) => visible(access, row)).map(toViewDocument) });
    })
    .get("/views/:id", async ({ params, access }) => {
      const row = await service.get(idOf(params.id));
      if (!visible(access, row)) throw notFound();
      return json({ data: toViewDocument(row) });
    })
    .post(
      "/views",
      async ({ request, access }) => {
        requireWrite(access);
        const row = await service.create(validateView(await readJsonObject(request), true) as Required<ViewChanges>);
        return json({ data: toViewDocument(row) }, 201, { location: new URL(`/api/v2/views/${row.id}`, request.url).toString() });
      },
      { parse: "none" },
    )
    .patch(
      "/views/:id",
      async ({ params, request, access }) => {
        requireWrite(access);
        const id = idOf(params.id);
        return json({ data: toViewDocument(await service.update(id, validateView(await readJsonObject(request), false))) });
      },
      { parse: "none" },
    )
    .delete("/views/:id", async ({ params, access }) => {
      requireWrite(access);
      await service.remove(idOf(params.id));
      return new Response(null, { status: 204 });
    });
}
