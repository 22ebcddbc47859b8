// The bundle's entry (not part of the vendored copy): what the tests drive.
export { AgentChatTransport } from './packages/adonis/src/react/core/agent-chat-transport.js';
export { AgentClient, AgentHttpError } from './packages/adonis/src/react/core/client.js';
export { storedThreadToUiMessages } from './packages/adonis/src/react/core/stored-thread-to-ui-messages.js';
export { createAgentChatClient } from './packages/adonis/src/client/index.js';
