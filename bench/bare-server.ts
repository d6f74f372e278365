// The HTTP ceiling: a bare Bun.serve that reads the whole body and answers 202, nothing else.
// Prints its URL; stops on SIGTERM. PORT (default: any free one) and REUSE_PORT=1 let several of
// them share one port (bench/workers.ts).
const server = Bun.serve({
  hostname: "127.0.0.1",
  port: Number(process.env.PORT ?? 0),
  reusePort: process.env.REUSE_PORT === "1",
  maxRequestBodySize: 1 << 30,
  async fetch(request) {
    await request.arrayBuffer();
    return new Response(null, { status: 202 });
  },
});
console.log(`http://127.0.0.1:${server.port}/`);
process.on("SIGTERM", () => {
  server.stop(true);
  process.exit(0);
});
