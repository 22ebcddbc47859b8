/**
 * The wire events of a thread, typed from the Rust core's schema
 * (`schema.gen.ts` is generated; see `scripts/gen.mjs`).
 */
import type { ThreadEvent } from "./schema.gen.js";

export type * from "./schema.gen.js";

/** The `type` of every event the protocol defines. */
export type EventType = ThreadEvent["type"];

/** One event as a stream delivers it: the envelope plus its SSE `id`. */
export type StreamEvent = ThreadEvent & {
  /** The thread-wide sequence number of a durable event; absent on ephemeral ones. */
  id?: number;
};

/** The event of type `T`. */
export type EventOf<T extends EventType> = Extract<ThreadEvent, { type: T }>;

/**
 * Events sent live without an `id:` and never replayed. A durable event
 * always carries an id; these never do (see docs/architecture.md, "How the log works").
 */
export const EPHEMERAL_TYPES: ReadonlySet<EventType> = new Set<EventType>([
  "text-delta",
  "reasoning-delta",
  "status",
  "filesystem-request",
]);

export function isDurable(ev: StreamEvent): boolean {
  return ev.id !== undefined;
}
