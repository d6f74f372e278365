// Server-Sent Events read with fetch (so the API token travels in the Authorization header, never
// in a URL as EventSource would need): blocks split on blank lines, fields per the SSE rules.

/** Calls onBlock({ id, event, data }) for each block until the stream ends or fails. */
export async function readEvents(response, onBlock) {
  const reader = response.body.pipeThrough(new TextDecoderStream()).getReader();
  let buffer = "";
  for (;;) {
    const { value, done } = await reader.read();
    if (done) return;
    buffer += value;
    let end;
    while ((end = buffer.indexOf("\n\n")) >= 0) {
      onBlock(parseBlock(buffer.slice(0, end)));
      buffer = buffer.slice(end + 2);
    }
  }
}

function parseBlock(block) {
  let id = "",
    event = "message",
    data = "";
  for (const line of block.split("\n")) {
    if (line.startsWith(":")) continue;
    const colon = line.indexOf(":");
    const field = colon < 0 ? line : line.slice(0, colon);
    const value = colon < 0 ? "" : line.slice(colon + 1).replace(/^ /, "");
    if (field === "id") id = value;
    else if (field === "event") event = value;
    else if (field === "data") data += data ? `\n${value}` : value;
  }
  return { id, event, data };
}
