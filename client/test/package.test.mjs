// The package as an app gets it: `npm pack`, the tarball installed into a
// scratch project, an import of it type-checked by the repository's
// TypeScript (strict, under Node's and bundlers' module resolution) and
// imported by Node. Needs client/dist (`make build`).
import { test, before, after } from "node:test";
import assert from "node:assert/strict";
import fs from "node:fs";
import os from "node:os";
import path from "node:path";
import { spawnSync } from "node:child_process";
import { fileURLToPath } from "node:url";

const client = fileURLToPath(new URL("..", import.meta.url));
const tsc = path.join(client, "../node_modules/typescript/bin/tsc");
const pkg = JSON.parse(fs.readFileSync(path.join(client, "package.json"), "utf8"));

// Children get no npm_* variables: under `npm test` they would point npm at
// this package instead of the scratch project.
const env = Object.fromEntries(Object.entries(process.env).filter(([k]) => !k.toLowerCase().startsWith("npm_")));
function run(cmd, args, cwd) {
  const r = spawnSync(cmd, args, { cwd, env, encoding: "utf8", timeout: 120_000 });
  if (r.error) throw r.error;
  return { status: r.status, stdout: r.stdout, out: `${r.stdout}${r.stderr}` };
}
/** `cmd`'s standard output; fails unless it exits with 0. */
function ok(cmd, args, cwd) {
  const r = run(cmd, args, cwd);
  assert.equal(r.status, 0, `${cmd} ${args.join(" ")} (in ${cwd}) failed:\n${r.out}`);
  return r.stdout;
}

const RESOLUTIONS = {
  nodenext: ["--module", "nodenext", "--moduleResolution", "nodenext"],
  bundler: ["--module", "esnext", "--moduleResolution", "bundler"],
};
/** tsc on one file of `dir`, strict, the declarations checked too (no skipLibCheck). */
function typecheck(dir, file, resolution) {
  const args = [tsc, "--noEmit", "--strict", "--skipLibCheck", "false", "--target", "es2022", "--lib", "es2022,dom,dom.iterable"];
  return run(process.execPath, [...args, ...RESOLUTIONS[resolution], "--listFiles", file], dir);
}

let tmp, tarball, packed, app;

before(() => {
  for (const f of ["dist/index.js", "dist/index.d.ts"]) {
    if (!fs.existsSync(path.join(client, f))) throw new Error(`client/${f} is missing: run \`make build\` first (it builds client/dist)`);
  }
  tmp = fs.mkdtempSync(path.join(os.tmpdir(), "threadline-client-pack-"));
  const [info] = JSON.parse(ok("npm", ["pack", "--json", "--pack-destination", tmp, "--loglevel=error"], client));
  tarball = path.join(tmp, info.filename);
  packed = info.files.map((f) => f.path);
  app = path.join(tmp, "app");
  fs.mkdirSync(app);
  fs.writeFileSync(path.join(app, "package.json"), JSON.stringify({ name: "scratch-app", private: true, type: "module" }));
  // The package has no dependencies, so installing the tarball needs no registry.
  ok("npm", ["install", "--offline", "--no-audit", "--no-fund", "--loglevel=error", tarball], app);
});

after(() => {
  if (tmp) fs.rmSync(tmp, { recursive: true, force: true });
});

test("the tarball holds the bundle, its source map, the declarations, the schema and the README; no sources", () => {
  assert.equal(path.basename(tarball), `threadline-client-${pkg.version}.tgz`);
  for (const f of ["package.json", "README.md", "dist/index.js", "dist/index.js.map", "dist/index.d.ts", "dist/api.d.ts", "dist/schema.gen.d.ts", "schema/threadline.schema.json"]) {
    assert.ok(packed.includes(f), `${f} packed (${packed.join(", ")})`);
  }
  assert.deepEqual(packed.filter((f) => /^(src|test|scripts)\//.test(f) || f.startsWith("tsconfig")), []);
  const declared = [pkg.types, pkg.exports["."].types, pkg.exports["."].default, pkg.exports["./schema"]];
  for (const f of declared) assert.ok(packed.includes(f.replace(/^\.\//, "")), `${f} (named in package.json) packed`);
});

// The README's usage, with what it leaves to the app declared, and a few
// misuses that only real types reject (with `any` types each
// @ts-expect-error would itself be an error).
const README_PRELUDE = `
declare const jwt: string;
declare const threadId: string;
declare const picker: HTMLInputElement;
declare function render(...parts: unknown[]): void;
declare function progress(fraction: number): void;
declare function show(url: string): void;
`;
const CHECKS = `
import { SseParser, fold, TreeBuilder, INLINE_IMAGE_TYPES, type SseMessage, type StreamEvent, type Turn, type AgentNode, type ConnectionState } from "@threadline/client";
const messages: SseMessage[] = new SseParser().push("id: 1\\ndata: {}\\n\\n");
const tree: AgentNode | null = fold([] as StreamEvent[]);
const builder: TreeBuilder = new TreeBuilder();
const state: ConnectionState = "reconnecting";
const firstTurn = (turns: Turn[]): string | undefined => turns[0]?.runId;
// @ts-expect-error: push takes text
new SseParser().push(42);
// @ts-expect-error: not a connection state
const notAState: ConnectionState = "sleeping";
// @ts-expect-error: read-only
INLINE_IMAGE_TYPES.add("image/svg+xml");
export { messages, tree, builder, state, firstTurn, notAState };
`;

function readmeUsage() {
  const readme = fs.readFileSync(path.join(app, "node_modules/@threadline/client/README.md"), "utf8");
  const block = readme.match(/```ts\n([\s\S]*?)```/);
  assert.ok(block, "the installed README has a ts usage block");
  return block[1];
}

for (const resolution of Object.keys(RESOLUTIONS)) {
  test(`an app's import type-checks from the installed tarball (moduleResolution ${resolution})`, () => {
    fs.writeFileSync(path.join(app, "main.ts"), readmeUsage() + README_PRELUDE + CHECKS);
    const r = typecheck(app, "main.ts", resolution);
    assert.equal(r.status, 0, `tsc failed:\n${r.out}`);
    const files = r.out.split("\n").map((l) => l.trim().replaceAll("\\", "/"));
    assert.ok(files.some((f) => f.endsWith("/node_modules/@threadline/client/dist/index.d.ts")), `the types are dist/index.d.ts:\n${r.out}`);
    assert.ok(!files.some((f) => f.includes("/@threadline/client/src/")), "no TypeScript sources");
  });
}

test("the check fails when it should: a name the package does not export", () => {
  fs.writeFileSync(path.join(app, "wrong.ts"), `import { ThreadlineClient, NoSuchExport } from "@threadline/client";\nexport const x = [ThreadlineClient, NoSuchExport];\n`);
  const r = typecheck(app, "wrong.ts", "nodenext");
  assert.notEqual(r.status, 0, "tsc accepted an import of NoSuchExport");
  assert.match(r.out, /error TS2305: Module '"@threadline\/client"' has no exported member 'NoSuchExport'/);
});

test("the check fails when it should: a package without its declarations", () => {
  const other = path.join(tmp, "app-no-declarations");
  fs.cpSync(app, other, { recursive: true });
  const dist = path.join(other, "node_modules/@threadline/client/dist");
  for (const f of fs.readdirSync(dist)) if (f.endsWith(".d.ts")) fs.rmSync(path.join(dist, f));
  fs.writeFileSync(path.join(other, "main.ts"), CHECKS);
  for (const resolution of Object.keys(RESOLUTIONS)) {
    const r = typecheck(other, "main.ts", resolution);
    assert.notEqual(r.status, 0, `tsc accepted a package without declarations (${resolution})`);
    assert.match(r.out, /error TS7016: Could not find a declaration file for module '@threadline\/client'/);
  }
});

test("Node imports the installed package: the bundle, the schema and package.json", () => {
  const script = `
    import { SseParser, ThreadlineClient, fold, isInlineImage } from "@threadline/client";
    import schema from "@threadline/client/schema" with { type: "json" };
    import { createRequire } from "node:module";
    const { version } = createRequire(process.cwd() + "/")("@threadline/client/package.json");
    console.log(JSON.stringify({
      parsed: new SseParser().push("id: 7\\ndata: hi\\n\\n"),
      client: typeof ThreadlineClient,
      folded: fold([]),
      png: isInlineImage({ mediaType: "image/png" }),
      schema: typeof schema === "object" && schema !== null,
      version,
    }));
  `;
  const out = ok(process.execPath, ["--input-type=module", "-e", script], app);
  assert.deepEqual(JSON.parse(out), {
    parsed: [{ event: "message", data: "hi", id: "7" }],
    client: "function",
    folded: null,
    png: true,
    schema: true,
    version: pkg.version,
  });
});
