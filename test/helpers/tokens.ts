// Read tokens for tests, made through the API as a user makes them, and a wait on a condition
// with a deadline (for what happens after an answer: a revocation reaching another instance).
import type { TestLogpond } from "./logpond";

export interface TestToken {
  id: string;
  secret: string;
  attributes: Record<string, any>;
}

export async function createReadToken(lp: TestLogpond, sourceIds?: (string | number)[]): Promise<TestToken> {
  const body = { name: `test ${crypto.randomUUID()}`, scope: "read", ...(sourceIds === undefined ? {} : { source_ids: sourceIds }) };
  const response = await lp.api("POST", "/api/v1/tokens", body);
  if (response.status !== 201) throw new Error(`createReadToken: ${response.status} ${await response.text()}`);
  const { data } = (await response.json()) as { data: { id: string; attributes: Record<string, any> } };
  return { id: data.id, secret: data.attributes.token, attributes: data.attributes };
}

export const bearer = (token: string) => ({ authorization: `Bearer ${token}` });

export async function until(condition: () => boolean | Promise<boolean>, what: string, timeoutMs = 20_000): Promise<void> {
  const deadline = Date.now() + timeoutMs;
  while (!(await condition())) {
    if (Date.now() > deadline) throw new Error(`timed out waiting for ${what}`);
    await new Promise((resolve) => setTimeout(resolve, 20));
  }
}
