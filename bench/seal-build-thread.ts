// bench/seal-build.ts's worker: runs the build when asked, answers its µs per event.
import { buildFrom } from "./seal-build-work";

declare const self: Worker;
self.onmessage = (event: MessageEvent) => postMessage(buildFrom(event.data as boolean));
