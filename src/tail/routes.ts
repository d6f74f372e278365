// GET /api/v2/query/live-tail/stream (docs/api.md, "Reading: the live tail"): Server-Sent Events of the rows of the chosen
// sources, filtered by the query. Without a resume point a client starts live; with
// Last-Event-ID (or cursor=) it first replays storage after that point, page by page at the
// client's pace, then turns live with no gap and no duplicate (tail/hub.ts says why).
import { Elysia } from "elysia";
import { AppError } from "../errors";
import { compileMatcher } from "../query/match";
import type { Authenticate } from "../http/auth";
import { checkSources, readQuery, readSourceIds, refuseUnknown } from "../query/request";
import { latestSeq, oldestSeq } from "../store/batch-log";
import type { Sql } from "../store/db";
import { TailClient, type ClientLimits } from "./client";
import type { TailHub } from "./hub";
import { readCatchUp } from "./storage";

export interface TailRoutesDeps {
  sql: Sql;
  hub: TailHub;
  authenticate: Authenticate;
  limits: ClientLimits;
  log: (line: string) => void;
}

const CATCH_UP_PAGE = 1_000;
const POSITION = /^([0-9]{1,18})-([0-9]{0,19})$/;
/**
 * What the stream takes; anything else is a 400 before it starts (query/request.ts, refuseUnknown):
 * ignored, `from=` or `batch=` would stream something other than what was asked, silently. The
 * page sends source_ids and query; EventSource adds nothing to the URL.
 */
const PARAMETERS = ["source_ids", "query", "cursor"];
/** The largest bigint: as a position's id it means "after every row of that batch". */
const AFTER_BATCH = "9223372036854775807";

export function tailRoutes({ sql, hub, authenticate, limits, log }: TailRoutesDeps) {
  return new Elysia({ name: "logpond/tail", prefix: "/api/v2/query" }).get("/live-tail/stream", async ({ request, server }) => {
    const access = await authenticate(request);
    const url = new URL(request.url);
    refuseUnknown(
      url,
      "live-tail/stream",
      PARAMETERS,
      " (rows from now on, or after Last-Event-ID / cursor; a window is the query API's /api/v2/query/live-tail)",
    );
    const { ids, malformed } = readSourceIds(url);
    const query = readQuery(url);
    const resumeText = request.headers.get("last-event-id") ?? url.searchParams.get("cursor");
    let resume: { seq: number; id: string } | undefined;
    if (resumeText !== null && resumeText !== "") {
      const match = POSITION.exec(resumeText.trim());
      if (!match) throw new AppError("bad_request", "Last-Event-ID / cursor must be the id of an event this stream sent (seq-id)");
      resume = { seq: Number(match[1]), id: match[2]! };
    }
    await checkSources(sql, ids, malformed, access);
    if (resume) {
      // A position past every batch this database committed (a restored or replaced database)
      // would wait silently until the sequence caught up: say so instead.
      const latest = await latestSeq(sql);
      if (resume.seq > latest) {
        throw new AppError(
          "bad_request",
          `Last-Event-ID / cursor ${resumeText!.trim()} is ahead of this database (its latest batch is ${latest}); reconnect without it to start live`,
        );
      }
    }

    const client = new TailClient(new Set(ids), query, query ? compileMatcher(query) : undefined, resume ?? { seq: hub.lastSeq, id: "" }, limits);
    // A read token's stream ends when the token is revoked (TailHub.tokenRevoked).
    hub.add(client, access.scope === "read" ? access.tokenId : undefined);
    if (resume)
      void catchUp(client, resume).catch((error) => {
        log(`tail: catch-up failed (${(error as Error).message}); closing the stream, the client reconnects`);
        client.note(`event: error\ndata: ${JSON.stringify({ errors: "could not read the rows after Last-Event-ID; reconnect to try again" })}\n\n`);
        client.close();
      });
    else {
      // The live start as a position (an id-only block: EventSource keeps it as its last event id
      // and dispatches nothing), so a client that disconnects or pauses before its first row
      // resumes from here instead of from "now", which lost every row sent meanwhile.
      client.note(`id: ${hub.lastSeq}-${AFTER_BATCH}\n\n`);
      hub.goLive(client, hub.lastSeq);
    }
    // A quiet stream is kept open by our heartbeat, not cut by Bun's idle timer.
    server?.timeout?.(request, 0);
    request.signal.addEventListener("abort", () => client.close(), { once: true });
    return new Response(client.stream, {
      headers: {
        "content-type": "text/event-stream; charset=utf-8",
        "cache-control": "no-cache, no-transform",
        "x-accel-buffering": "no",
      },
    });
  });

  async function catchUp(client: TailClient, from: { seq: number; id: string }): Promise<void> {
    const oldest = await oldestSeq(sql);
    // Batches are numbered from 1: only when some before `oldest` were forgotten can rows be missing.
    if (oldest !== undefined && from.seq + 1 < oldest) {
      client.note(
        `event: dropped\ndata: {"count":null,"reason":"the resume point is older than the kept batch log; rows before seq ${oldest} are not replayed"}\n\n`,
      );
    }
    for (;;) {
      const upTo = hub.lastSeq;
      const rows = await readCatchUp(sql, { seq: client.seq, id: client.id }, upTo, [...client.sourceIds], client.query, CATCH_UP_PAGE);
      for (const row of rows) {
        await client.room();
        if (client.closed) return;
        client.replay(row);
      }
      if (rows.length < CATCH_UP_PAGE && hub.goLive(client, upTo)) return;
      if (client.closed) return;
    }
  }
}
