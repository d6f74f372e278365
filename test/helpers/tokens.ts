// Read tokens for tests, made through the API as a user makes them.
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
