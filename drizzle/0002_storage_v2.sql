-- Storage v2 (hand-written: drizzle-kit cannot generate partitioning; the snapshot next to it is
-- drizzle-kit's, from src/store/schema.ts). log_events becomes PARTITION BY RANGE (dt) with a
-- DEFAULT partition that takes any dt; daily partitions are created ahead at run time
-- (src/store/partitions.ts), which also moves rows out of DEFAULT when a new day overlaps them.
-- Upgrade in place: the first version's plain table is renamed, its rows copied with ids 1..n
-- (in dt order), then dropped. Index choice: docs/storage.md (BRIN on dt, measured).
CREATE TABLE "logpond_counters" (
	"name" text PRIMARY KEY NOT NULL,
	"value" bigint NOT NULL
);
--> statement-breakpoint
ALTER TABLE "flush_batches" ADD COLUMN "seq" bigint;--> statement-breakpoint
ALTER TABLE "flush_batches" ADD COLUMN "first_id" bigint;--> statement-breakpoint
ALTER TABLE "flush_batches" ADD COLUMN "last_id" bigint;--> statement-breakpoint
ALTER TABLE "log_events" RENAME TO "log_events_v1";--> statement-breakpoint
DROP INDEX "log_events_source_id_dt_idx";--> statement-breakpoint
CREATE TABLE "log_events" (
	"id" bigint NOT NULL,
	"source_id" bigint NOT NULL,
	"dt" timestamp (6) with time zone NOT NULL,
	"raw" jsonb NOT NULL
) PARTITION BY RANGE ("dt");
--> statement-breakpoint
CREATE INDEX "log_events_dt_brin" ON "log_events" USING brin ("dt");--> statement-breakpoint
CREATE TABLE "log_events_default" PARTITION OF "log_events" DEFAULT;--> statement-breakpoint
INSERT INTO "log_events" ("id", "source_id", "dt", "raw")
	SELECT row_number() OVER (ORDER BY "dt"), "source_id", "dt", "raw" FROM "log_events_v1";--> statement-breakpoint
INSERT INTO "logpond_counters" ("name", "value")
	VALUES ('event_id', (SELECT count(*) + 1 FROM "log_events_v1")), ('commit_seq', 0);--> statement-breakpoint
DROP TABLE "log_events_v1";
