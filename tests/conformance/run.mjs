// `make test-conformance`: the Durable Streams conformance suite
// (@durable-streams/server-conformance-tests, through conformance.spec.js)
// against `wrangler dev` on a free port with fresh state, started and stopped
// by the same launcher as the browser tests. STREAMS_AUTH=none opens
// /v1/stream/* (the suite sends no credentials); STREAMS_LONG_POLL_MS=1000
// holds long-polls well under the suite's timeouts. Extra arguments go to vitest.
import { spawn } from "node:child_process";
import { once } from "node:events";
import path from "node:path";
import { fileURLToPath } from "node:url";
import { startWranglerDev } from "../support/wrangler.mjs";

const here = path.dirname(fileURLToPath(import.meta.url));
const root = path.resolve(here, "../..");
const worker = await startWranglerDev({ vars: { STREAMS_AUTH: "none", STREAMS_LONG_POLL_MS: "1000" } });
let code = 1;
try {
  const vitest = spawn(path.join(root, "node_modules/.bin/vitest"), ["run", path.join(here, "conformance.spec.js"), "--dir", here, ...process.argv.slice(2)], {
    cwd: root,
    stdio: "inherit",
    env: { ...process.env, CONFORMANCE_TEST_URL: worker.url },
  });
  [code] = await once(vitest, "exit");
} finally {
  await worker.stop();
}
process.exit(code ?? 1);
