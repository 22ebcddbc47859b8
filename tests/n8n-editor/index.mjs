// n8n's editor folding an Instance AI stream: a port of its thread runtime
// (n8n-editor-ui 2.41.0, the release that ships @n8n/api-types 1.41.0: the
// Instance AI store's `onSSEMessage`, `onRunSync`, `loadHistoricalMessages`,
// `buildRoutingFromMessages`, and its reducer wrapper `handleEvent`, from
// `src/features/ai/instanceAi/instanceAi.reducer.ts`), kept line for line,
// over n8n's own schema and shared reducer from the pinned package,
// unmodified. The tests drive threadline's `/instance-ai/events` stream and
// messages view through it, the way n8n's editor does, and compare what it
// holds with threadline's own views (tests/instance-ai-n8n.test.mjs).
//
// What an EventSource adds is kept too: a frame without `id:` is dispatched
// with the previous frame's id (the "last event ID buffer" is never reset
// within one EventSource), and a new EventSource starts with none.
import {
	createInitialState,
	reduceEvent,
	toAgentTree,
	stateFromAgentTree,
	findAgent,
} from '@n8n/api-types/dist/schemas/agent-run-reducer.js';
import {
	instanceAiEventSchema,
	INSTANCE_AI_EPHEMERAL_EVENT_TYPES,
	isSafeObjectKey,
} from '@n8n/api-types/dist/schemas/instance-ai.schema.js';

export { instanceAiEventSchema, INSTANCE_AI_EPHEMERAL_EVENT_TYPES };

const MAX_SEEN_EVENT_IDS = 1000; // editor constant (minified `Dt = 1e3`)

// ---------------------------------------------------------------------------
// instanceAi.reducer.ts (editor) — ported 1:1 from the n8n@2.41.0 bundle
// ---------------------------------------------------------------------------
function resolveGroupId(state, runId) {
	if (!isSafeObjectKey(runId)) return runId;
	const groupId = state.groupIdByRunId.get(runId);
	return groupId && isSafeObjectKey(groupId) ? groupId : runId;
}
function findMessageByGroupId(state, groupId) {
	if (!isSafeObjectKey(groupId)) return undefined;
	return state.messages.find((m) => m.messageGroupId === groupId || m.runId === groupId);
}
function createRunState(rootAgentId) {
	return createInitialState(rootAgentId); // editor wraps in Vue reactive(); irrelevant here
}
function createRunStateFromTree(tree) {
	return stateFromAgentTree(tree);
}
function getOrCreateGroupState(state, groupId, rootAgentId) {
	if (!isSafeObjectKey(groupId)) return createRunState(rootAgentId);
	let runState = state.runStateByGroupId.get(groupId);
	if (!runState) {
		runState = createRunState(rootAgentId);
		state.runStateByGroupId.set(groupId, runState);
	}
	return runState;
}
function registerRunId(state, runId, groupId) {
	if (!isSafeObjectKey(runId) || !isSafeObjectKey(groupId)) return;
	state.groupIdByRunId.set(runId, groupId);
}
function hasSafeEventKeys(event) {
	if (!isSafeObjectKey(event.runId) || !isSafeObjectKey(event.agentId)) return false;
	switch (event.type) {
		case 'run-start':
			return event.payload.messageGroupId ? isSafeObjectKey(event.payload.messageGroupId) : true;
		case 'agent-spawned':
			return isSafeObjectKey(event.payload.parentId);
		case 'tool-input-start':
		case 'tool-call':
		case 'tool-result':
		case 'tool-error':
		case 'tool-interrupted':
		case 'confirmation-request':
			return isSafeObjectKey(event.payload.toolCallId);
		default:
			return true;
	}
}
function resolveTarget(state, runId) {
	const groupId = resolveGroupId(state, runId);
	return {
		msg: findMessageByGroupId(state, groupId),
		runState: state.runStateByGroupId.get(groupId),
		groupId,
	};
}

/** Mutates state.messages in place. Returns the new activeRunId. */
function handleEvent(state, event, nowIso) {
	if (!state.groupIdByRunId) state.groupIdByRunId = new Map();
	if (!state.runStateByGroupId) state.runStateByGroupId = new Map();
	if (!hasSafeEventKeys(event)) return state.activeRunId;
	if (event.type !== 'run-start') {
		const { msg, groupId } = resolveTarget(state, event.runId);
		if (!msg) {
			const rootAgentId = event.type === 'agent-spawned' ? event.payload.parentId : event.agentId;
			registerRunId(state, event.runId, groupId);
			const runState = getOrCreateGroupState(state, groupId, rootAgentId);
			state.messages.push({
				id: groupId,
				runId: event.runId,
				messageGroupId: groupId,
				role: 'assistant',
				createdAt: nowIso(),
				content: '',
				reasoning: '',
				isStreaming: true,
				agentTree: toAgentTree(runState),
			});
		}
	}
	switch (event.type) {
		case 'run-start': {
			const messageGroupId = event.payload.messageGroupId ?? event.runId;
			registerRunId(state, event.runId, messageGroupId);
			const existingMsg = findMessageByGroupId(state, messageGroupId);
			if (existingMsg) {
				const runState = state.runStateByGroupId.get(messageGroupId);
				if (runState) {
					reduceEvent(runState, event);
					existingMsg.agentTree = toAgentTree(runState);
				}
				existingMsg.runId = event.runId;
				existingMsg.isStreaming = true;
				return event.runId;
			}
			const runState = getOrCreateGroupState(state, messageGroupId, event.agentId);
			reduceEvent(runState, event);
			state.messages.push({
				id: event.runId,
				runId: event.runId,
				messageGroupId,
				role: 'assistant',
				createdAt: nowIso(),
				content: '',
				reasoning: '',
				isStreaming: true,
				agentTree: toAgentTree(runState),
			});
			return event.runId;
		}
		case 'text-delta':
		case 'text-block': {
			const { msg, runState } = resolveTarget(state, event.runId);
			if (runState) {
				reduceEvent(runState, event);
				if (msg && event.agentId === runState.rootAgentId)
					msg.content = findAgent(runState, event.agentId)?.textContent ?? msg.content;
			}
			return state.activeRunId;
		}
		case 'reasoning-block':
		case 'reasoning-delta': {
			const { msg, runState } = resolveTarget(state, event.runId);
			if (runState) {
				reduceEvent(runState, event);
				if (msg && event.agentId === runState.rootAgentId)
					msg.reasoning = findAgent(runState, event.agentId)?.reasoning ?? msg.reasoning;
			}
			return state.activeRunId;
		}
		case 'tool-input-start':
		case 'tool-call':
		case 'tool-result':
		case 'tool-error':
		case 'tool-interrupted':
		case 'agent-spawned':
		case 'agent-completed':
		case 'confirmation-request':
		case 'tasks-update':
		case 'setup-items':
		case 'status': {
			const { runState } = resolveTarget(state, event.runId);
			if (runState) reduceEvent(runState, event);
			return state.activeRunId;
		}
		case 'error': {
			const { msg, runState } = resolveTarget(state, event.runId);
			if (runState) {
				reduceEvent(runState, event);
				const target =
					findAgent(runState, event.agentId) ?? findAgent(runState, runState.rootAgentId);
				if (target) {
					target.status = 'error';
					target.error = event.payload.content;
					target.errorDetails = {
						...(event.payload.statusCode !== undefined ? { statusCode: event.payload.statusCode } : {}),
						...(event.payload.code ? { code: event.payload.code } : {}),
						...(event.payload.provider ? { provider: event.payload.provider } : {}),
						...(event.payload.technicalDetails
							? { technicalDetails: event.payload.technicalDetails }
							: {}),
					};
					if (msg && target.agentId === runState.rootAgentId) msg.content = target.textContent;
				}
			} else if (msg) msg.content += '\n\n*Error: ' + event.payload.content + '*';
			return state.activeRunId;
		}
		case 'filesystem-request':
		case 'thread-title-updated':
		case 'preferences-applied':
			return state.activeRunId;
		case 'run-finish': {
			const { msg, runState } = resolveTarget(state, event.runId);
			const isActiveRunFinishing = event.runId === state.activeRunId;
			if (runState) {
				reduceEvent(runState, event);
				const { status, reason } = event.payload;
				const root = findAgent(runState, runState.rootAgentId);
				if (root && status === 'error' && reason && !root.error) root.error = reason;
				if (msg && isActiveRunFinishing) msg.isStreaming = false;
			} else if (msg) {
				if (isActiveRunFinishing) msg.isStreaming = false;
				const { status, reason } = event.payload;
				if (status === 'error' && reason) msg.content += '\n\n*Error: ' + reason + '*';
			}
			return isActiveRunFinishing ? null : state.activeRunId;
		}
		default:
			return state.activeRunId;
	}
}

// ---------------------------------------------------------------------------
// Thread runtime (store) — SSE handlers
// ---------------------------------------------------------------------------
/** buildRoutingFromMessages (minified `Vt`): rebuild group states from hydrated history. */
function buildRoutingFromMessages(messages) {
	const runStateByGroupId = new Map();
	const groupIdByRunId = new Map();
	for (const msg of messages) {
		if (msg.role !== 'assistant' || !msg.agentTree) continue;
		const groupId = msg.messageGroupId ?? msg.runId;
		if (!groupId || !isSafeObjectKey(groupId)) continue;
		const rs = createRunStateFromTree(msg.agentTree);
		if (!rs) continue;
		runStateByGroupId.set(groupId, rs);
		if (msg.runIds) for (const rid of msg.runIds) if (isSafeObjectKey(rid)) groupIdByRunId.set(rid, groupId);
		if (msg.runId && isSafeObjectKey(msg.runId)) groupIdByRunId.set(msg.runId, groupId);
	}
	return { runStateByGroupId, groupIdByRunId };
}


/** One thread as n8n's editor holds it, fed frame by frame. */
export class EditorThread {
	constructor({ now = () => new Date().toISOString() } = {}) {
		this.now = now;
		this.messages = [];
		this.runStateByGroupId = new Map();
		this.groupIdByRunId = new Map();
		this.seenEventIds = new Set();
		this.lastEventId = undefined;
		this.activeRunId = null;
		this.idBuffer = '';
		/** What each frame did: applied, skipped by the schema, dropped as a duplicate. */
		this.log = [];
	}

	/** `loadHistoricalMessages`: the messages view, before the stream opens. */
	loadHistory(page) {
		if (this.messages.length > 0) return 'skipped';
		if (page.messages?.length > 0) {
			this.messages = structuredClone(page.messages);
			const r = buildRoutingFromMessages(this.messages);
			this.runStateByGroupId = r.runStateByGroupId;
			this.groupIdByRunId = r.groupIdByRunId;
		}
		if (page.nextEventId !== null && page.nextEventId !== undefined) {
			this.lastEventId = Math.max(this.lastEventId ?? 0, page.nextEventId - 1);
		}
		return 'loaded';
	}

	/** A new EventSource (`connectSSE`): its `?lastEventId=` (none to start). */
	connect() {
		this.idBuffer = '';
		return this.lastEventId;
	}

	/** One SSE frame `{id?, event?, data}` as the EventSource dispatches it. */
	receive(frame) {
		if (frame.id !== undefined && frame.id !== null && !String(frame.id).includes('\0')) this.idBuffer = String(frame.id);
		const raw = frame.data;
		if (raw === undefined || raw === '') return;
		const name = frame.event ?? 'message';
		if (name === 'run-sync') return this.onRunSync(raw);
		if (name !== 'message') return this.log.push({ action: `ignored (no listener for "${name}")` });
		this.onSSEMessage(raw, this.idBuffer);
	}

	onSSEMessage(raw, msgLastEventId) {
		const parsed = instanceAiEventSchema.safeParse(JSON.parse(raw));
		if (!parsed.success) {
			this.log.push({ action: 'skipped (schema)', data: raw, error: parsed.error.issues.map((i) => `${i.path.join('.')}: ${i.message}`).join('; ') });
			return;
		}
		const event = parsed.data;
		const eventId = msgLastEventId ? Number(msgLastEventId) : undefined;
		if (eventId !== undefined && Number.isFinite(eventId)) {
			if (INSTANCE_AI_EPHEMERAL_EVENT_TYPES.has(event.type)) {
				this.lastEventId = Math.max(this.lastEventId ?? 0, eventId);
			} else {
				if (eventId === 1 && this.seenEventIds.has(1)) {
					this.seenEventIds.clear();
					this.lastEventId = undefined;
				}
				if (this.seenEventIds.has(eventId)) {
					this.log.push({ action: `dropped (duplicate id ${eventId})`, type: event.type });
					return;
				}
				this.seenEventIds.add(eventId);
				if (this.seenEventIds.size > MAX_SEEN_EVENT_IDS) this.seenEventIds.delete(this.seenEventIds.values().next().value);
				this.lastEventId = Math.max(this.lastEventId ?? 0, eventId);
			}
		}
		const state = { messages: this.messages, activeRunId: this.activeRunId, runStateByGroupId: this.runStateByGroupId, groupIdByRunId: this.groupIdByRunId };
		this.activeRunId = handleEvent(state, event, this.now);
		this.log.push({ action: 'applied', type: event.type });
	}

	onRunSync(raw) {
		const data = JSON.parse(raw);
		const groupId = data.messageGroupId ?? data.runId;
		if (!isSafeObjectKey(data.runId) || !isSafeObjectKey(groupId)) return;
		const rebuilt = createRunStateFromTree(data.agentTree);
		if (!rebuilt) return this.log.push({ action: 'run-sync skipped (tree not adoptable)' });
		let msg;
		if (data.messageGroupId) msg = this.messages.find((m) => m.messageGroupId === data.messageGroupId && m.role === 'assistant');
		msg ||= this.messages.find((m) => m.runId === data.runId);
		if (!msg) {
			msg = { id: groupId, runId: data.runId, messageGroupId: groupId, runIds: data.runIds, role: 'assistant', createdAt: this.now(), content: data.agentTree.textContent, reasoning: data.agentTree.reasoning, isStreaming: false, agentTree: data.agentTree };
			this.messages.push(msg);
		}
		msg.agentTree = data.agentTree;
		msg.runId = data.runId;
		msg.messageGroupId = groupId;
		msg.runIds = data.runIds;
		msg.content = data.agentTree.textContent;
		msg.reasoning = data.agentTree.reasoning;
		const live = data.status === 'active' || data.status === 'suspended';
		msg.isStreaming = live;
		if (live) this.activeRunId = data.runId;
		this.runStateByGroupId.set(groupId, rebuilt);
		if (data.runIds) for (const rid of data.runIds) if (isSafeObjectKey(rid)) this.groupIdByRunId.set(rid, groupId);
		this.groupIdByRunId.set(data.runId, groupId);
		this.log.push({ action: 'run-sync applied', groupId });
	}

	/** The message a run's events land on, as the editor routes them. */
	messageOf(runId) {
		const groupId = this.groupIdByRunId.get(runId) ?? runId;
		return this.messages.find((m) => m.messageGroupId === groupId || m.runId === groupId);
	}

	/** The agent tree the editor shows for `runId`, as plain JSON. */
	treeOf(runId) {
		const m = this.messageOf(runId);
		return m?.agentTree === undefined ? undefined : JSON.parse(JSON.stringify(m.agentTree));
	}
}
