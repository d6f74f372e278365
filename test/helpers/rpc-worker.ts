// A thread for test/unit/rpc.test.ts: echoes, throws, hangs or dies on request.
import { serve } from "../../src/rpc";

export type Request = { op: "echo"; value: unknown } | { op: "throw"; message: string } | { op: "hang" } | { op: "die" } | { op: "bytes"; bytes: Uint8Array };

serve<Request, unknown, string>(
  async (request) => {
    switch (request.op) {
      case "echo":
        return request.value;
      case "throw":
        throw new Error(request.message);
      case "hang":
        return new Promise(() => {});
      case "die":
        process.exit(1);
      case "bytes":
        return new Uint8Array(request.bytes); // a buffer of its own, moved back
    }
  },
  { wire: (error) => (error as Error).message, transfer: (value) => (value instanceof Uint8Array ? [value.buffer as ArrayBuffer] : []) },
);
