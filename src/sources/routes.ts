// The management listener's /api/v1/sources and /api/v2/sources routes: read the request, call
// the service, shape the JSON:API answer. Validation lives in model.ts, storage in service.ts. The
// API token may do everything; a read token may list and get the sources it may see (others are
// absent: 404), without their ingest tokens (a read token must not be able to write), and no write
// (403). Both versions are the same routes on the same sources; v2's documents carry the
// attributes Better Stack's Terraform provider reads there (v2.ts).
import { Elysia } from "elysia";
import { readJsonObject } from "../http/body";
import { AppError, notFound } from "../errors";
import { type Access, type Authenticate, FULL_ACCESS, maySee, requireFullAccess } from "../http/auth";
import { type ApiVersion, parseId, toDocument, validateCreate, validateUpdate } from "./model";
import type { SourceService } from "./service";

export const PER_PAGE_DEFAULT = 50;
export const PER_PAGE_MAX = 250;

export interface SourceRoutesDeps {
  service: SourceService;
  authenticate: Authenticate;
  /** host:port of the ingestion listener, known once it listens. */
  ingestingHost: () => string;
}

const JSON_HEADERS = { "content-type": "application/json; charset=utf-8" };
const json = (body: unknown, status = 200, headers: Record<string, string> = {}) =>
  new Response(JSON.stringify(body), { status, headers: { ...JSON_HEADERS, ...headers } });

export function sourceRoutes(deps: SourceRoutesDeps) {
  return new Elysia({ name: "logpond/sources" }).use(versionRoutes(deps, 1)).use(versionRoutes(deps, 2));
}

function versionRoutes({ service, authenticate, ingestingHost }: SourceRoutesDeps, version: ApiVersion) {
  const doc = (row: Parameters<typeof toDocument>[0], access: Access = FULL_ACCESS) => ({
    data: toDocument(row, ingestingHost(), access.scope === "all", version),
  });
  const idOf = (raw: string) =>
    parseId(raw) ??
    (() => {
      throw notFound();
    })();

  return new Elysia({ name: `logpond/sources/v${version}`, prefix: `/api/v${version}` })
    .resolve(async ({ request }) => ({ access: await authenticate(request) }))
    .get("/sources", async ({ request, access }) => {
      const url = new URL(request.url);
      const page = readPositive(url, "page", 1);
      const perPage = readPositive(url, "per_page", PER_PAGE_DEFAULT, PER_PAGE_MAX);
      const name = url.searchParams.get("name")?.trim() || undefined;
      // PostgreSQL refuses a NUL in text, and no name holds one (bodies are refused with it: http/body.ts).
      if (name?.includes("\u0000")) throw new AppError("bad_request", "name must not contain a NUL character (\\u0000)");
      const only = access.scope === "read" && access.sourceIds !== undefined ? [...access.sourceIds] : undefined;
      const { rows, total } = await service.list({ page, perPage, name, only });
      const last = Math.max(1, Math.ceil(total / perPage));
      const link = (p: number) => {
        const target = new URL(url.pathname, url.origin);
        target.searchParams.set("page", String(p));
        target.searchParams.set("per_page", String(perPage));
        if (name) target.searchParams.set("name", name);
        return target.toString();
      };
      return json({
        data: rows.map((row) => toDocument(row, ingestingHost(), access.scope === "all", version)),
        pagination: {
          first: link(1),
          last: link(last),
          prev: page > 1 ? link(Math.min(page - 1, last)) : null,
          next: page < last ? link(page + 1) : null,
        },
      });
    })
    .get("/sources/:id", async ({ params, access }) => {
      const id = idOf(params.id);
      if (!maySee(access, id)) throw notFound();
      return json(doc(await service.get(id), access));
    })
    .post(
      "/sources",
      async ({ request, access }) => {
        requireFullAccess(access);
        const row = await service.create(validateCreate(await readJsonObject(request), version));
        return json(doc(row), 201, { location: new URL(`/api/v${version}/sources/${row.id}`, request.url).toString() });
      },
      { parse: "none" },
    )
    .patch(
      "/sources/:id",
      async ({ params, request, access }) => {
        requireFullAccess(access);
        const id = idOf(params.id);
        const changes = validateUpdate(await readJsonObject(request), version);
        return json(doc(await service.update(id, changes)));
      },
      { parse: "none" },
    )
    .delete("/sources/:id", async ({ params, access }) => {
      requireFullAccess(access);
      await service.remove(idOf(params.id));
      return new Response(null, { status: 204 });
    })
    .post(
      "/sources/:id/regenerate-token",
      async ({ params, access }) => {
        requireFullAccess(access);
        return json(doc(await service.rotateToken(idOf(params.id))));
      },
      { parse: "none" },
    );
}

/**
 * A whole number from 1. With `max` (per_page), any larger number is clamped to it, however many
 * digits it has; without (page), more than 9 digits is refused, so an offset stays a bigint.
 */
function readPositive(url: URL, name: string, fallback: number, max?: number): number {
  const raw = url.searchParams.get(name);
  if (raw === null || raw === "") return fallback;
  if (!(max === undefined ? /^[0-9]{1,9}$/ : /^[0-9]+$/).test(raw) || Number(raw) < 1) {
    throw new AppError("validation", "Validation errors", {
      invalidAttributes: { [name]: [`must be a whole number from 1 (got ${JSON.stringify(raw.slice(0, 32))})`] },
    });
  }
  return Math.min(Number(raw), max ?? Number.MAX_SAFE_INTEGER);
}
