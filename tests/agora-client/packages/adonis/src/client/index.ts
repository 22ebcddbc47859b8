export {
  type AgentChatClient,
  type AgentChatClientOptions,
  AgentChatDisconnectedError,
  type AgentChatHandlers,
  AgentChatHttpError,
  type AgentChatRequestBody,
  type AgentChatResult,
  type AgentChatResumeOptions,
  type AgentChatSendOptions,
  AgentChatStreamError,
  createAgentChatClient,
} from './chat-client.js';
export {
  type ChatFrame,
  type ChatPart,
  decodeFrame,
  foldPart,
  parseSseEvent,
  readSseStream,
  type SseEvent,
} from './sse.js';
