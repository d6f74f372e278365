// Preloaded into a spawned logpond (`bun --preload`) by test/integration/uncaught.test.ts: each
// SIGUSR2 raises an error nothing handles, of the kind LOGPOND_TEST_UNCAUGHT names ("rejection", the
// default, or "exception"), at a moment the test chooses.
process.on("SIGUSR2", () => {
  if (process.env.LOGPOND_TEST_UNCAUGHT === "exception") throw new Error("injected exception");
  void Promise.reject(new Error("injected rejection"));
});
