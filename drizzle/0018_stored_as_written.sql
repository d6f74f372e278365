-- Every variable-length column of a block and of a hot chunk is stored as logpond wrote it: no pglz
-- on any of them (issue 32: PostgreSQL keeps finished bytes). The payload, filters and field
-- summaries were EXTERNAL already (drizzle/0006, 0010, 0012, 0015); the per-minute counts were
-- left at the default (EXTENDED), so a block spanning hours (a sparse source) had its hist_* arrays
-- pglz'd on every write. Now they go out of line as they are when the row is too big. The v3
-- columns (ids, dts, body) are written by nobody since v4; set too, so the rule has no exception.
-- SET STORAGE recurses to the day partitions; new ones copy it (store/partitions.ts, rebuild.ts).
ALTER TABLE "log_blocks" ALTER COLUMN "hist_minutes" SET STORAGE EXTERNAL;--> statement-breakpoint
ALTER TABLE "log_blocks" ALTER COLUMN "hist_levels" SET STORAGE EXTERNAL;--> statement-breakpoint
ALTER TABLE "log_blocks" ALTER COLUMN "hist_counts" SET STORAGE EXTERNAL;--> statement-breakpoint
ALTER TABLE "log_blocks" ALTER COLUMN "ids" SET STORAGE EXTERNAL;--> statement-breakpoint
ALTER TABLE "log_blocks" ALTER COLUMN "dts" SET STORAGE EXTERNAL;--> statement-breakpoint
ALTER TABLE "log_blocks" ALTER COLUMN "body" SET STORAGE EXTERNAL;--> statement-breakpoint
ALTER TABLE "log_chunks" ALTER COLUMN "hist_minutes" SET STORAGE EXTERNAL;--> statement-breakpoint
ALTER TABLE "log_chunks" ALTER COLUMN "hist_levels" SET STORAGE EXTERNAL;--> statement-breakpoint
ALTER TABLE "log_chunks" ALTER COLUMN "hist_counts" SET STORAGE EXTERNAL;
