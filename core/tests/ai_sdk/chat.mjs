// Drives one `ai` major's own client code against the dex_agents.web chat endpoint; test_web_ai_sdk.py runs
// it and reads the JSON report it prints. Usage: node chat.mjs <5|6|7> <scenario> <endpoint URL>
//   approval: useChat's logic (AbstractChat + DefaultChatTransport) sends a message, approves the call the
//             turn waits for (the version's own way), and lets sendAutomaticallyWhen continue the turn; then
//             a fresh chat resumes nothing (204).
//   rejection: the same, but the user rejects the call.
//   resume:   sends a message that stops at an approval, then a fresh chat rebuilds it with resumeStream.
//   stream:   POSTs one message and rebuilds the reply with readUIMessageStream (the Worker may be killed).
// Every response body is also parsed with the version's parseJsonEventStream + uiMessageChunkSchema, and
// each chunk that fails validation is reported.

const [major, scenario, api] = process.argv.slice(2);
const ai = await import(`ai${major}`);
const headers = { "x-dex-ai-sdk": major };
const chunks = [];
const invalid = [];
const requests = [];
const pendingChecks = [];

async function validate(body) {
  const parsed = ai.parseJsonEventStream({ stream: body, schema: ai.uiMessageChunkSchema });
  const reader = parsed.getReader();
  for (;;) {
    const { done, value } = await reader.read();
    if (done) return;
    if (value.success) chunks.push(value.value);
    else invalid.push(String(value.error?.message ?? value.error).slice(0, 500));
  }
}

async function recordingFetch(url, init) {
  requests.push({ method: init?.method ?? "GET", url: String(url) });
  const response = await fetch(url, init);
  if (!response.body || response.status !== 200) return response;
  const [mine, theirs] = response.body.tee();
  pendingChecks.push(validate(mine));
  return new Response(theirs, { status: response.status, headers: response.headers });
}

class MemoryState {
  constructor(messages = []) {
    this.messages = messages;
    this.status = "ready";
    this.error = undefined;
    this.experimental_queuedMessages = [];
  }
  pushMessage = (message) => {
    this.messages = this.messages.concat(message);
  };
  popMessage = () => {
    this.messages = this.messages.slice(0, -1);
  };
  replaceMessage = (index, message) => {
    this.messages = [...this.messages.slice(0, index), message, ...this.messages.slice(index + 1)];
  };
  snapshot = (value) => structuredClone(value);
}

class Chat extends ai.AbstractChat {
  constructor(options) {
    super({ ...options, state: options.state ?? new MemoryState() });
  }
}

const errors = [];

function newChat(extra = {}) {
  const transport = new ai.DefaultChatTransport({ api, headers, fetch: recordingFetch });
  return new Chat({
    id: "chat-1",
    transport,
    onError: (error) => errors.push(String(error?.message ?? error)),
    ...extra,
  });
}

async function settled(chat, requestCount) {
  const deadline = Date.now() + 60_000;
  while (Date.now() < deadline) {
    if (requests.length >= requestCount && chat.status !== "submitted" && chat.status !== "streaming") {
      return;
    }
    await new Promise((resolve) => setTimeout(resolve, 50));
  }
  throw new Error(`the chat did not settle: ${chat.status}, ${requests.length} requests`);
}

function lastMessage(chat) {
  const message = chat.messages.at(-1);
  return { role: message.role, metadata: message.metadata, parts: message.parts };
}

const report = { major: Number(major), version: (await import(`ai${major}/package.json`, { with: { type: "json" } })).default.version };

const approves = scenario === "approval";
if (scenario === "approval" || scenario === "rejection") {
  const chat = newChat({
    sendAutomaticallyWhen:
      ai.lastAssistantMessageIsCompleteWithApprovalResponses ?? ai.lastAssistantMessageIsCompleteWithToolCalls,
  });
  await chat.sendMessage({ text: "Refund A-1" });
  await settled(chat, 1);
  report.asked = lastMessage(chat);
  const waiting = chat.messages.at(-1).parts.find((part) => part.toolCallId === "refund-1");
  if (waiting?.approval) {
    await chat.addToolApprovalResponse({ id: waiting.approval.id, approved: approves, reason: "not today" });
  } else if (waiting) {
    const output = { approved: approves, reason: "not today" };
    await chat.addToolResult({ tool: waiting.toolName, toolCallId: "refund-1", output });
  }
  await settled(chat, 2);
  report.answered = lastMessage(chat);
  report.validUIMessages = (await ai.safeValidateUIMessages({ messages: chat.messages })).success;
  const fresh = newChat();
  await fresh.resumeStream();
  report.resumeAfterTheTurn = { requests: requests.length, messages: fresh.messages.length };
} else if (scenario === "resume") {
  const chat = newChat();
  await chat.sendMessage({ text: "Refund A-1" });
  await settled(chat, 1);
  report.asked = lastMessage(chat);
  const fresh = newChat({ state: new MemoryState([structuredClone(chat.messages[0])]) });
  await fresh.resumeStream();
  await settled(fresh, 2);
  report.resumed = lastMessage(fresh);
  report.resumeRequest = requests.at(-1);
} else if (scenario === "stream") {
  const response = await recordingFetch(api, {
    method: "POST",
    headers: { ...headers, "content-type": "application/json" },
    body: JSON.stringify({ id: "chat-1", messages: [{ id: "u1", role: "user", parts: [{ type: "text", text: "Where is A-1?" }] }] }),
  });
  const stream = new ai.DefaultChatTransport({ api }).processResponseStream(response.body);
  let message;
  for await (const snapshot of ai.readUIMessageStream({ stream, onError: (error) => errors.push(String(error)) })) {
    message = snapshot;
  }
  report.streamed = { role: message.role, parts: message.parts };
  report.validUIMessages = (await ai.safeValidateUIMessages({ messages: [message] })).success;
} else {
  throw new Error(`unknown scenario ${scenario}`);
}

await Promise.all(pendingChecks);
report.chunkTypes = chunks.map((chunk) => chunk.type);
report.invalidChunks = invalid;
report.errors = errors;
report.requests = requests;
console.log(JSON.stringify(report));
