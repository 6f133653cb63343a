// Drives @ag-ui/client's HttpAgent against the dex_agents.web AG-UI endpoint; test_web_ag_ui.py runs it and
// reads the JSON report it prints last. Usage: node agent.mjs <scenario> <endpoint URL> <session ID> [answers]
//   approval: sends a message, gets the approval interrupt, resumes it approved; the turn continues.
//   answers:  sends a message, gets the question interrupts, and resumes each with the payload that the
//             JSON object in the fourth argument names by interrupt ID.
//   restart:  the same as approval, but after the interrupt it prints {"phase": "interrupted"} and waits for a line on
//             stdin (the test kills the Worker meanwhile); then a fresh agent, which knows nothing, runs with
//             no message, is shown the same interrupt, and resumes it approved.
// Every response body is also parsed with @ag-ui/core's own EventSchemas; each event that fails is reported,
// and so is every warning the client prints (its enforcement stage warns about fields it strips).

import { createInterface } from "node:readline";
import { HttpAgent } from "@ag-ui/client";
import { EventSchemas } from "@ag-ui/core/schemas";

const [scenario, url, threadId] = process.argv.slice(2);
const events = [];
const invalid = [];
const warnings = [];
const errors = [];
const pendingChecks = [];

const warn = console.warn;
console.warn = (...args) => {
  warnings.push(args.map(String).join(" ").slice(0, 500));
  warn(...args);
};

async function validate(body, run) {
  const reader = body.pipeThrough(new TextDecoderStream()).getReader();
  let buffer = "";
  for (;;) {
    const { done, value } = await reader.read();
    if (done) break;
    buffer += value;
    const blocks = buffer.split("\n\n");
    buffer = blocks.pop();
    for (const block of blocks) {
      const data = block
        .split("\n")
        .filter((line) => line.startsWith("data:"))
        .map((line) => line.slice(5).trimStart())
        .join("\n");
      if (!data) continue;
      const parsed = EventSchemas.safeParse(JSON.parse(data));
      if (parsed.success) events.push({ run, ...parsed.data });
      else invalid.push(`${data.slice(0, 200)}: ${parsed.error.message.slice(0, 300)}`);
    }
  }
}

let runCount = 0;
async function recordingFetch(input, init) {
  const run = runCount;
  const response = await fetch(input, init);
  if (!response.body || response.status !== 200) return response;
  const [mine, theirs] = response.body.tee();
  pendingChecks.push(validate(mine, run));
  return new Response(theirs, { status: response.status, headers: response.headers });
}

function newAgent() {
  return new HttpAgent({ url, threadId, fetch: recordingFetch });
}

async function run(agent, parameters = {}) {
  runCount += 1;
  const seen = { outcome: null, interrupts: [] };
  try {
    await agent.runAgent(parameters, {
      onRunFinishedEvent: (params) => {
        seen.outcome = params.outcome;
        if (params.outcome === "interrupt") seen.interrupts = params.interrupts;
      },
      onRunErrorEvent: ({ event }) => {
        seen.outcome = "error";
        errors.push(`RUN_ERROR: ${event.message}`);
      },
    });
  } catch (error) {
    errors.push(String(error?.message ?? error).slice(0, 500));
  }
  return seen;
}

function messages(agent) {
  return agent.messages.map((message) => ({
    role: message.role,
    content: message.content,
    toolCalls: message.toolCalls?.map((call) => ({ id: call.id, name: call.function.name, arguments: call.function.arguments })),
    toolCallId: message.toolCallId,
  }));
}

function approve(interrupts) {
  return interrupts.map((interrupt) => ({ interruptId: interrupt.id, status: "resolved", payload: { approved: true } }));
}

const report = { version: (await import("@ag-ui/client/package.json", { with: { type: "json" } })).default.version };

if (scenario === "approval" || scenario === "restart") {
  let agent = newAgent();
  agent.addMessage({ id: "user-1", role: "user", content: "Refund A-1" });
  const asked = await run(agent);
  report.asked = { outcome: asked.outcome, interrupts: asked.interrupts, pending: agent.pendingInterrupts, messages: messages(agent) };
  if (scenario === "restart") {
    console.log(JSON.stringify({ phase: "interrupted" }));
    const lines = createInterface({ input: process.stdin });
    for await (const line of lines) {
      if (line.trim() === "continue") break;
    }
    lines.close();
    agent = newAgent();
    const shown = await run(agent);
    report.shownAgain = { outcome: shown.outcome, interrupts: shown.interrupts, messages: messages(agent) };
  }
  const resumed = await run(agent, { resume: approve(agent.pendingInterrupts) });
  report.resumed = { outcome: resumed.outcome, pending: agent.pendingInterrupts, messages: messages(agent) };
} else if (scenario === "answers") {
  const payloads = JSON.parse(process.argv[5]);
  const agent = newAgent();
  agent.addMessage({ id: "user-1", role: "user", content: "Return A-1" });
  const asked = await run(agent);
  report.asked = { outcome: asked.outcome, interrupts: asked.interrupts, messages: messages(agent) };
  const resume = agent.pendingInterrupts.map((interrupt) => ({
    interruptId: interrupt.id,
    status: "resolved",
    payload: payloads[interrupt.id],
  }));
  const resumed = await run(agent, { resume });
  report.resumed = { outcome: resumed.outcome, pending: agent.pendingInterrupts, messages: messages(agent) };
} else {
  throw new Error(`unknown scenario ${scenario}`);
}

await Promise.all(pendingChecks);
report.events = events.map((event) => `${event.run}:${event.type}`);
report.runFinished = events.filter((event) => event.type === "RUN_FINISHED");
report.invalidEvents = invalid;
report.warnings = warnings;
report.errors = errors;
console.log(JSON.stringify(report));
