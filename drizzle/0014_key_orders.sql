-- Key orders (generated from src/store/schema.ts, comments added by hand like 0010's): the order each
-- event's keys were sent in, kept beside the jsonb text every tier stores (src/store/key-orders.ts,
-- src/codec/key-order.ts). One row per committed write of events, written in that write's own
-- transaction; read only where events are shown. first_id is the primary key: a reader finds the row
-- covering an id as the last one starting at or before it.
CREATE TABLE "log_key_orders" (
	"first_id" bigint PRIMARY KEY NOT NULL,
	"last_id" bigint NOT NULL,
	"orders" jsonb NOT NULL,
	"slots" "bytea" NOT NULL,
	"committed_at" timestamp (3) with time zone DEFAULT now() NOT NULL
);
--> statement-breakpoint
-- A reader takes one event's slot as a slice: uncompressed, a slice reads one TOAST chunk (pglz would
-- make it decompress the write's whole array).
ALTER TABLE "log_key_orders" ALTER COLUMN "slots" SET STORAGE EXTERNAL;
