// The management API token: API_TOKEN, or one generated on first start and kept in
// DATA_DIR/api-token (mode 0600) so restarts keep it.
import * as fs from "node:fs";
import * as path from "node:path";
import type { Config } from "../config";
import { generateToken } from "../sources/service";

export function loadApiToken(config: Config): { token: string; origin: string } {
  if (config.apiToken !== undefined) return { token: config.apiToken, origin: "the API_TOKEN environment variable" };
  const file = path.resolve(config.dataDir, "api-token");
  if (fs.existsSync(file)) {
    const token = fs.readFileSync(file, "utf8").trim();
    if (token.length >= 16) return { token, origin: file };
  }
  fs.mkdirSync(path.dirname(file), { recursive: true, mode: 0o700 });
  const token = generateToken() + generateToken();
  fs.writeFileSync(file, `${token}\n`, { mode: 0o600 });
  return { token, origin: `${file} (generated now)` };
}
