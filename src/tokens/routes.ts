// The management listener's /api/v1/tokens routes, for the API token only (a read token: 403):
// create (the secret is in this answer and nowhere else, ever), list (no secrets), revoke.
import { Elysia } from "elysia";
import { readJsonObject } from "../http/body";
import { notFound } from "../errors";
import { type Authenticate, requireFullAccess } from "../http/auth";
import { parseId } from "../sources/model";
import { toDocument, validateCreate } from "./model";
import type { TokenService } from "./service";

export interface TokenRoutesDeps {
  service: TokenService;
  authenticate: Authenticate;
}

const json = (body: unknown, status = 200) => new Response(JSON.stringify(body), { status, headers: { "content-type": "application/json; charset=utf-8" } });

export function tokenRoutes({ service, authenticate }: TokenRoutesDeps) {
  return new Elysia({ name: "logpond/tokens", prefix: "/api/v1" })
    .onBeforeHandle(async ({ request }) => requireFullAccess(await authenticate(request)))
    .get("/tokens", async () => json({ data: (await service.list()).map((row) => toDocument(row)) }))
    .post(
      "/tokens",
      async ({ request }) => {
        const { row, secret } = await service.create(validateCreate(await readJsonObject(request)));
        return json({ data: toDocument(row, secret) }, 201);
      },
      { parse: "none" },
    )
    .delete("/tokens/:id", async ({ params }) => {
      const id = parseId(params.id);
      if (id === undefined) throw notFound();
      await service.remove(id);
      return new Response(null, { status: 204 });
    });
}
