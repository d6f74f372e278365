// The HTTP ceiling: a bare Bun.serve that reads the whole body and answers 202, nothing else.
// Prints its URL; stops on SIGTERM.
const server = Bun.serve({
  hostname: "127.0.0.1",
  port: 0,
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
