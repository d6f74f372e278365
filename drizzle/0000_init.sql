CREATE TABLE "log_events" (
	"source_id" bigint NOT NULL,
	"dt" timestamp (6) with time zone NOT NULL,
	"raw" jsonb NOT NULL
);
--> statement-breakpoint
CREATE TABLE "source_deletions" (
	"source_id" bigint PRIMARY KEY NOT NULL,
	"deleted_at" timestamp (3) with time zone DEFAULT now() NOT NULL
);
--> statement-breakpoint
CREATE TABLE "sources" (
	"id" bigint PRIMARY KEY GENERATED ALWAYS AS IDENTITY (sequence name "sources_id_seq" INCREMENT BY 1 MINVALUE 1 MAXVALUE 9223372036854775807 START WITH 1 CACHE 1),
	"name" text NOT NULL,
	"platform" text NOT NULL,
	"table_name" text NOT NULL,
	"token" text NOT NULL,
	"ingesting_paused" boolean DEFAULT false NOT NULL,
	"logs_retention" integer DEFAULT 30 NOT NULL,
	"live_tail_pattern" text NOT NULL,
	"created_at" timestamp (3) with time zone DEFAULT now() NOT NULL,
	"updated_at" timestamp (3) with time zone DEFAULT now() NOT NULL,
	CONSTRAINT "sources_table_name_unique" UNIQUE("table_name"),
	CONSTRAINT "sources_token_unique" UNIQUE("token")
);
--> statement-breakpoint
CREATE INDEX "log_events_source_id_dt_idx" ON "log_events" USING btree ("source_id","dt" DESC NULLS LAST);