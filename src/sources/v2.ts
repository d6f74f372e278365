// What /api/v2/sources has beyond /api/v1/sources: the attributes Better Stack's v2 source carries
// and its Terraform provider reads back after every create and refresh (logtail_source), none of
// which logpond has — no teams, regions, source groups, metrics, scrapers, VRL, custom buckets or
// error tracking. A source answers each with the value that means "none"; a request may send each
// with that value (the provider sends what its configuration names), and any other value is a 422
// that says logpond lacks the feature, rather than a setting stored and then ignored. Pure.

/** Each extra attribute as every v2 document shows it. */
export const V2_ATTRIBUTES = {
  team_id: null,
  data_region: null,
  source_group_id: null,
  metrics_retention: null,
  scrape_urls: null,
  scrape_frequency_secs: null,
  scrape_request_headers: null,
  scrape_request_basic_auth_user: null,
  scrape_request_basic_auth_password: null,
  skip_ssl_verify: false,
  vrl_transformation_logs: null,
  vrl_transformation_spans: null,
  blocked_metrics: null,
  code_mapping_stack_root: null,
  code_mapping_source_root: null,
  custom_bucket: null,
} as const;

interface Extra {
  /** Whether a sent value asks for nothing logpond lacks. */
  accepts(value: unknown): boolean;
  /** The 422's message otherwise. */
  why: string;
  /** Taken on create only: on update it is read-only, as in Better Stack. */
  createOnly?: true;
}

const nothing = (value: unknown) => value === null || value === "" || value === false || value === 0 || (Array.isArray(value) && value.length === 0);
const SCRAPE = "is not supported: logpond does not scrape; events are sent to it";

/** Request attributes of v2 beyond v1's; `team_name` and `team_id` name the caller's team (logpond has one). */
const EXTRAS: Record<string, Extra> = {
  team_name: { accepts: (value) => value === null || typeof value === "string", why: "must be a string" },
  team_id: { accepts: (value) => value === null || typeof value === "string" || typeof value === "number", why: "must be a string or a number" },
  // A region names where Better Stack keeps the data; logpond keeps it where it runs, whatever the name.
  data_region: { accepts: (value) => value === null || typeof value === "string", why: "must be a string", createOnly: true },
  source_group_id: { accepts: nothing, why: "is not supported: logpond has no source groups (leave it unset or 0)" },
  metrics_retention: { accepts: (value) => value === null, why: "is not supported: logpond stores no metrics (leave it unset)" },
  scrape_urls: { accepts: nothing, why: SCRAPE },
  scrape_frequency_secs: { accepts: nothing, why: SCRAPE },
  scrape_request_headers: { accepts: nothing, why: SCRAPE },
  scrape_request_basic_auth_user: { accepts: nothing, why: SCRAPE },
  scrape_request_basic_auth_password: { accepts: nothing, why: SCRAPE },
  skip_ssl_verify: { accepts: nothing, why: SCRAPE },
  vrl_transformation_logs: { accepts: nothing, why: "is not supported: logpond runs no VRL transformations (leave it unset or empty)" },
  vrl_transformation_spans: { accepts: nothing, why: "is not supported: logpond runs no VRL transformations (leave it unset or empty)" },
  blocked_metrics: { accepts: nothing, why: "is not supported: logpond stores no metrics (leave it unset or empty)" },
  code_mapping_stack_root: { accepts: nothing, why: "is not supported: logpond has no error tracking (leave it unset or empty)" },
  code_mapping_source_root: { accepts: nothing, why: "is not supported: logpond has no error tracking (leave it unset or empty)" },
  custom_bucket: { accepts: (value) => value === null, why: "is not supported: logpond keeps events in its own PostgreSQL" },
};

/** `body` without v2's extra attributes, each checked: problems go into `problems` by attribute name. */
export function withoutV2(body: Record<string, unknown>, verb: "create" | "update", problems: Record<string, string[]>): Record<string, unknown> {
  const rest: Record<string, unknown> = {};
  for (const [key, value] of Object.entries(body)) {
    const extra = Object.hasOwn(EXTRAS, key) ? EXTRAS[key] : undefined;
    if (extra === undefined) rest[key] = value;
    else if (verb === "update" && extra.createOnly) (problems[key] ??= []).push("can only be set when the source is created");
    else if (!extra.accepts(value)) (problems[key] ??= []).push(extra.why);
  }
  return rest;
}
