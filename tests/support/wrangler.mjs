// Starts `wrangler dev` (the same entry point as `make dev`) on free ports with
// its own state directory, and stops it by its own process group.
import { spawn } from "node:child_process";
import fs from "node:fs";
import net from "node:net";
import path from "node:path";
import { once } from "node:events";
import { fileURLToPath } from "node:url";
import { sleep, tempDir } from "./harness.mjs";

const root = path.resolve(path.dirname(fileURLToPath(import.meta.url)), "../..");

export async function freePort() {
  const srv = net.createServer();
  srv.listen(0, "127.0.0.1");
  await once(srv, "listening");
  const { port } = srv.address();
  await new Promise((r) => srv.close(r));
  return port;
}

/**
 * wrangler.toml as it is, less [build], with its paths made absolute, and
 * `extra` (TOML, e.g. `[vars.APPROVAL_POLICY]` tables) appended.
 */
export function configWithoutBuild(extra = "") {
  const toml = fs.readFileSync(path.join(root, "wrangler.toml"), "utf8");
  const out = [];
  let skipping = false;
  for (const line of toml.split("\n")) {
    const section = line.match(/^\s*\[\[?([^\]]+)\]\]?\s*$/);
    if (section) skipping = section[1].trim() === "build";
    if (skipping) continue;
    out.push(
      line
        .replace(/^(\s*main\s*=\s*")([^"]+)"/, (_, k, v) => `${k}${path.resolve(root, v)}"`)
        .replace(/^(\s*directory\s*=\s*")([^"]+)"/, (_, k, v) => `${k}${path.resolve(root, v)}"`),
    );
  }
  const file = path.join(tempDir("threadline-wrangler-config-"), "wrangler.toml");
  // `extra` goes into [vars], the file's last section (opened if absent).
  const vars = extra && !/^\[vars\]\s*$/m.test(toml) ? "[vars]\n" : "";
  fs.writeFileSync(file, out.join("\n") + "\n" + vars + extra);
  return file;
}

/**
 * `wrangler dev` with `vars`; resolves once `GET /` answers. With
 * `build: false` it serves the Worker and page as already built (build/,
 * web/dist/) instead of running wrangler.toml's [build] (local/build.sh);
 * `toml` is appended to its configuration (only with `build: false`).
 */
export async function startWranglerDev({ vars = {}, toml = "", persist = tempDir("threadline-wrangler-"), build = true } = {}) {
  const port = await freePort();
  const inspector = await freePort();
  const args = ["wrangler", "dev", ...(build ? [] : ["-c", configWithoutBuild(toml)]), "--ip", "127.0.0.1", "--port", String(port), "--inspector-port", String(inspector), "--persist-to", persist];
  for (const [k, v] of Object.entries({ AUTH_MODE: "dev", RUNS_PER_MINUTE: "0", ...vars })) args.push("--var", `${k}:${v}`);
  const child = spawn("npx", args, {
    cwd: root,
    detached: true,
    stdio: ["ignore", "pipe", "pipe"],
    env: { ...process.env, WRANGLER_SEND_METRICS: "false", CI: "true", NO_COLOR: "1" },
  });
  let log = "";
  child.stdout.on("data", (d) => (log += d));
  child.stderr.on("data", (d) => (log += d));
  const url = `http://127.0.0.1:${port}`;
  const deadline = Date.now() + 120_000;
  for (;;) {
    if (child.exitCode !== null) throw new Error(`wrangler dev exited (${child.exitCode}):\n${log}`);
    try {
      const res = await fetch(url + "/");
      if (res.ok) break;
    } catch {}
    if (Date.now() > deadline) throw new Error(`wrangler dev did not come up:\n${log}`);
    await sleep(250);
  }
  return {
    url,
    persist,
    get log() {
      return log;
    },
    async stop() {
      if (child.exitCode !== null) return;
      try {
        process.kill(-child.pid, "SIGTERM");
      } catch {}
      await Promise.race([once(child, "exit"), sleep(5000)]);
      try {
        process.kill(-child.pid, "SIGKILL");
      } catch {}
    },
  };
}
