// The TypeScript types are current with the schema the Rust core generates
// (the Rust side checks client/schema/threadline.schema.json itself).
import { test } from "node:test";
import assert from "node:assert/strict";
import fs from "node:fs";
import { fileURLToPath } from "node:url";
import { generate } from "../scripts/gen.mjs";

test("src/schema.gen.ts is what scripts/gen.mjs generates", async () => {
  const onDisk = fs.readFileSync(fileURLToPath(new URL("../src/schema.gen.ts", import.meta.url)), "utf8");
  assert.equal(onDisk, await generate(), "stale: run `npm run --prefix client gen`");
});
