// Generates src/schema.gen.ts from schema/threadline.schema.json (which the
// Rust core generates: durable/src/wire_schema.rs). `--check` fails instead
// of writing when the checked-in file is stale (CI runs it through the tests).
import { compile } from "json-schema-to-typescript";
import fs from "node:fs";
import path from "node:path";
import { fileURLToPath } from "node:url";

const here = path.dirname(fileURLToPath(import.meta.url));
const schemaPath = path.join(here, "../schema/threadline.schema.json");
const outPath = path.join(here, "../src/schema.gen.ts");

export async function generate() {
  const schema = JSON.parse(fs.readFileSync(schemaPath, "utf8"));
  return compile(schema, "Threadline", {
    bannerComment:
      "// Generated from schema/threadline.schema.json by scripts/gen.mjs: do not edit.\n" +
      "// The schema itself is generated from the Rust core (durable/src/wire_schema.rs).",
    additionalProperties: false,
    unreachableDefinitions: true,
    strictIndexSignatures: true,
    format: true,
  });
}

if (process.argv[1] === fileURLToPath(import.meta.url)) {
  const ts = await generate();
  if (process.argv.includes("--check")) {
    const onDisk = fs.existsSync(outPath) ? fs.readFileSync(outPath, "utf8") : "";
    if (onDisk !== ts) {
      console.error(`${outPath} is stale: run \`npm run --prefix client gen\``);
      process.exit(1);
    }
  } else {
    fs.writeFileSync(outPath, ts);
  }
}
