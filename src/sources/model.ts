// The Source: its attributes, how a request body becomes validated attributes, and how a row
// becomes the JSON:API document of the contract. Pure: no HTTP, no database.
import { AppError } from "../errors";
import { V2_ATTRIBUTES, withoutV2 } from "./v2";

/** Better Stack's platform list (its "Create a source" reference). */
export const PLATFORMS = [
  "apache2",
  "aws_cloudwatch",
  "aws_ecs",
  "aws_elb",
  "aws_fargate",
  "cloudflare_logpush",
  "cloudflare_worker",
  "datadog_agent",
  "digitalocean",
  "docker",
  "dokku",
  "dotnet",
  "elasticsearch",
  "erlang",
  "filebeat",
  "flights",
  "fluentbit",
  "fluentd",
  "fly_io",
  "go",
  "haproxy",
  "heroku",
  "http",
  "java",
  "javascript",
  "kubernetes",
  "logstash",
  "minio",
  "mongodb",
  "mysql",
  "nginx",
  "open_telemetry",
  "php",
  "postgresql",
  "prometheus",
  "prometheus_scrape",
  "python",
  "rabbitmq",
  "redis",
  "render",
  "rsyslog",
  "ruby",
  "syslog-ng",
  "traefik",
  "ubuntu",
  "vector",
  "vercel_integration",
] as const;

export const LIMITS = {
  nameMaxChars: 255,
  liveTailPatternMaxChars: 1024,
  logsRetentionMinDays: 1,
  logsRetentionMaxDays: 3652,
} as const;

export const DEFAULT_ATTRIBUTES = {
  platform: "http",
  ingesting_paused: false,
  logs_retention: 30,
  live_tail_pattern: "{level} {message}",
} as const;

export interface SourceRow {
  id: number;
  name: string;
  platform: string;
  tableName: string;
  token: string;
  ingestingPaused: boolean;
  logsRetention: number;
  liveTailPattern: string;
  createdAt: Date;
  updatedAt: Date;
}

export interface SourceChanges {
  name?: string;
  platform?: string;
  ingestingPaused?: boolean;
  logsRetention?: number;
  liveTailPattern?: string;
}

/** The API version a request came through: /api/v2/sources adds V2_ATTRIBUTES (v2.ts). */
export type ApiVersion = 1 | 2;

const WRITABLE_ON_CREATE = ["name", "platform", "ingesting_paused", "logs_retention", "live_tail_pattern"];
const WRITABLE_ON_UPDATE = ["name", "ingesting_paused", "logs_retention", "live_tail_pattern"];
const READ_ONLY = ["id", "type", "platform", "token", "table_name", "ingesting_host", "created_at", "updated_at"];

export function validateCreate(body: Record<string, unknown>, version: ApiVersion = 1): Required<SourceChanges> {
  const problems: Record<string, string[]> = {};
  rejectUnknown(version === 2 ? withoutV2(body, "create", problems) : body, WRITABLE_ON_CREATE, problems);
  if (body.name === undefined) add(problems, "name", "can't be blank"); // null: readAttributes says so
  const changes = readAttributes(body, problems);
  if (body.platform !== undefined) {
    if (typeof body.platform !== "string" || !(PLATFORMS as readonly string[]).includes(body.platform)) {
      add(problems, "platform", `must be one of: ${PLATFORMS.join(", ")}`);
    } else {
      changes.platform = body.platform;
    }
  }
  fail(problems);
  return {
    name: changes.name!,
    platform: changes.platform ?? DEFAULT_ATTRIBUTES.platform,
    ingestingPaused: changes.ingestingPaused ?? DEFAULT_ATTRIBUTES.ingesting_paused,
    logsRetention: changes.logsRetention ?? DEFAULT_ATTRIBUTES.logs_retention,
    liveTailPattern: changes.liveTailPattern ?? DEFAULT_ATTRIBUTES.live_tail_pattern,
  };
}

export function validateUpdate(body: Record<string, unknown>, version: ApiVersion = 1): SourceChanges {
  const problems: Record<string, string[]> = {};
  rejectUnknown(version === 2 ? withoutV2(body, "update", problems) : body, WRITABLE_ON_UPDATE, problems);
  const changes = readAttributes(body, problems);
  fail(problems);
  return changes;
}

function readAttributes(body: Record<string, unknown>, problems: Record<string, string[]>): SourceChanges {
  const changes: SourceChanges = {};
  if (body.name !== undefined && body.name !== null) {
    if (typeof body.name !== "string") add(problems, "name", "must be a string");
    else {
      const name = body.name.trim();
      if (name.length === 0) add(problems, "name", "can't be blank");
      else if (name.length > LIMITS.nameMaxChars) add(problems, "name", `is too long (maximum is ${LIMITS.nameMaxChars} characters)`);
      else changes.name = name;
    }
  } else if (body.name === null) {
    add(problems, "name", "can't be blank");
  }
  if (body.ingesting_paused !== undefined) {
    if (typeof body.ingesting_paused !== "boolean") add(problems, "ingesting_paused", "must be true or false");
    else changes.ingestingPaused = body.ingesting_paused;
  }
  if (body.logs_retention !== undefined) {
    const days = body.logs_retention;
    if (typeof days !== "number" || !Number.isInteger(days)) add(problems, "logs_retention", "must be a whole number of days");
    else if (days < LIMITS.logsRetentionMinDays || days > LIMITS.logsRetentionMaxDays) {
      add(problems, "logs_retention", `must be from ${LIMITS.logsRetentionMinDays} to ${LIMITS.logsRetentionMaxDays} days`);
    } else changes.logsRetention = days;
  }
  if (body.live_tail_pattern !== undefined) {
    const pattern = body.live_tail_pattern;
    if (typeof pattern !== "string") add(problems, "live_tail_pattern", "must be a string");
    else if (pattern.length > LIMITS.liveTailPatternMaxChars) {
      add(problems, "live_tail_pattern", `is too long (maximum is ${LIMITS.liveTailPatternMaxChars} characters)`);
    } else changes.liveTailPattern = pattern;
  }
  return changes;
}

function rejectUnknown(body: Record<string, unknown>, allowed: string[], problems: Record<string, string[]>): void {
  for (const key of Object.keys(body)) {
    if (allowed.includes(key)) continue;
    add(problems, key, READ_ONLY.includes(key) ? "is read-only" : "is not a permitted attribute");
  }
}

function add(problems: Record<string, string[]>, key: string, message: string): void {
  (problems[key] ??= []).push(message);
}

function fail(problems: Record<string, string[]>): void {
  if (Object.keys(problems).length > 0) {
    throw new AppError("validation", "Validation errors", { invalidAttributes: problems });
  }
}

/** `nginx production!` → `nginx_production`; the service adds a numeric suffix when taken. */
export function tableNameFor(name: string): string {
  const base = name
    .toLowerCase()
    .normalize("NFKD")
    .replace(/[^a-z0-9_]+/g, "_")
    .replace(/_+/g, "_")
    .replace(/^_|_$/g, "")
    .slice(0, 50);
  return base.length > 0 ? base : "source";
}

/** Parses a path id: digits only and within bigint, else the resource cannot exist (404). */
export function parseId(raw: string): number | undefined {
  if (!/^[0-9]{1,15}$/.test(raw)) return undefined;
  const id = Number(raw);
  return id >= 1 && Number.isSafeInteger(id) ? id : undefined;
}

/**
 * `withToken` false: without `token`, for a read token (the ingest token would let it write).
 * Version 2 adds V2_ATTRIBUTES, each with the value that means "none".
 */
export function toDocument(row: SourceRow, ingestingHost: string, withToken = true, version: ApiVersion = 1) {
  const document = {
    id: String(row.id),
    type: "source" as const,
    attributes: {
      name: row.name,
      platform: row.platform,
      table_name: row.tableName,
      ...(withToken ? { token: row.token } : {}),
      ingesting_host: ingestingHost,
      ingesting_paused: row.ingestingPaused,
      logs_retention: row.logsRetention,
      live_tail_pattern: row.liveTailPattern,
      created_at: row.createdAt.toISOString(),
      updated_at: row.updatedAt.toISOString(),
    },
  };
  if (version === 2) Object.assign(document.attributes, V2_ATTRIBUTES);
  return document;
}
