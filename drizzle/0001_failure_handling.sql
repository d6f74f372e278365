CREATE TABLE "dead_letters" (
	"id" bigint PRIMARY KEY GENERATED ALWAYS AS IDENTITY (sequence name "dead_letters_id_seq" INCREMENT BY 1 MINVALUE 1 MAXVALUE 9223372036854775807 START WITH 1 CACHE 1),
	"source_id" bigint NOT NULL,
	"dt" text NOT NULL,
	"raw" text NOT NULL,
	"sqlstate" text NOT NULL,
	"error" text NOT NULL,
	"failed_at" timestamp (3) with time zone DEFAULT now() NOT NULL
);
--> statement-breakpoint
CREATE TABLE "flush_batches" (
	"id" uuid PRIMARY KEY NOT NULL,
	"committed_at" timestamp (3) with time zone DEFAULT now() NOT NULL
);
