// Memory given back when the code is done with it, not when the collector gets to it: a big
// body, or rows copied elsewhere, freed at once, so what a request holds is what it was charged
// for (gate.ts) and not what the collector has yet to find. Only for a buffer nothing reads after.

/** Whether a view is the whole of an ArrayBuffer of its own (not a slice of a pool, not shared memory). */
export function owns(view: Uint8Array): boolean {
  return view.byteOffset === 0 && view.buffer.byteLength === view.byteLength && view.buffer instanceof ArrayBuffer;
}

/** Frees the memory of a buffer that owns it (detached: every view of it reads as empty from now on). */
export function freeNow(view: Uint8Array): void {
  if (owns(view) && view.byteLength > 0) (view.buffer as ArrayBuffer).transfer(0);
}
