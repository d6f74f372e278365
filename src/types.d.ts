// Declarations the installed type packages lack.

declare module "msgpackr/unpack-no-eval" {
  export { Unpackr, addExtension } from "msgpackr";
}

// JSON.parse source text access and JSON.rawJSON (TC39 stage 3, shipped by Bun's JavaScriptCore).
interface JSON {
  rawJSON(text: string): object;
  isRawJSON(value: unknown): boolean;
}
