// The public Durable Streams conformance suite against our /v1/stream/*.
// Run by tests/conformance/run.mjs (make test-conformance), which starts
// `wrangler dev` and sets CONFORMANCE_TEST_URL. Called from a test file
// because the package's CLI is broken under vitest 4.
import { runConformanceTests } from "@durable-streams/server-conformance-tests";

runConformanceTests({ baseUrl: process.env.CONFORMANCE_TEST_URL, longPollTimeoutMs: 1500 });
