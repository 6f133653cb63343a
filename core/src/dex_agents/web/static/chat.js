// The chat page of one durable agent session. No build step: plain browser JavaScript.
//
// Committed state comes from the snapshot; live text comes from the events. The page groups live text by
// (turn, Step execution, attempt): within one Step execution only the highest attempt's text is kept,
// because a retried model call starts its answer again. When a turn ends, the stored messages replace the
// turn's live text. After a reload or a dropped connection the page rebuilds from the snapshot and reads
// the events from the snapshot's resume token (EventSource resumes through Last-Event-ID by itself).
// While a turn that accepts steering runs, the page lists the queued messages (steer now, delete), offers
// a steer box and a Stop button; a turn that ended steered or cancelled gets a marker, and the calls it
// abandoned show as cancelled. Questions get their choices, an answer box when free text is allowed, and
// Decline; a refused answer shows the server's reason on its card. The plan shows with its tasks and an
// approve button, and the composer offers plan mode when the Flow type has it.
"use strict";

(() => {
  const segments = location.pathname.split("/").filter(Boolean);
  const sessionId = decodeURIComponent(segments[segments.length - 1] || "");
  const api = `../api/sessions/${encodeURIComponent(sessionId)}`;
  const TURN_ENDS = new Set(["turn_completed", "turn_failed", "turn_steered", "turn_cancelled"]);
  const EVENT_TYPES = [
    "turn_started", "text_delta", "reasoning_delta", "tool_call_deferred", "tool_call_started",
    "tool_call_finished", "interrupt_raised", "interrupt_resolved", "usage_recorded", "timer_started",
    "tool_task_started", "plan_updated", "plan_execution_started", "web.turn_ended", ...TURN_ENDS,
  ];
  const FINAL = new Set(["succeeded", "failed", "rejected", "outcome_unknown"]);
  // The structured result of a call that steering or cancel_turn abandoned, by its reason.
  const CANCELLED_RESULTS = { superseded_by_steered_user_message: "steered", turn_cancelled_by_user: "turn_cancelled" };
  const CANCELLED_LABELS = { steered: "cancelled: the user steered", turn_cancelled: "cancelled: turn stopped" };
  const TURN_END_LABELS = {
    turn_steered: "You steered: this turn ended at its next step, and your message started the next one.",
    turn_cancelled: "You stopped this turn.",
  };
  const WAITING_LABELS = { awaiting_approval: "waiting for approval", awaiting_answer: "waiting for your answer", waiting_for_task: "task running" };
  // The user message the session starts an approved plan's turn with (dex_agents' build_plan_approval_message).
  const PLAN_APPROVAL_MESSAGE = /^\[Dex\] The user approved plan revision (\d+)\./;
  const APPROVABLE_PLANS = new Set(["draft", "active"]);
  const TASK_MARKS = { pending: "○", in_progress: "◐", completed: "●" };

  const page = {
    snapshot: null,
    live: new Map(), // "turn|step execution" -> {turnId, stepId, attempt, text, reasoning}
    toolStep: new Map(), // tool call ID -> the model Step execution that asked for it
    endedTurns: new Set(),
    // turn ID -> "turn_steered" or "turn_cancelled", from the events: committed state does not keep it.
    turnEnds: new Map(),
    stopping: null, // the turn whose cancellation this page asked for
    // The plan approval this page sent: {revision, sending, accepted, error}; accepted holds the button
    // until the approved turn starts.
    planApproval: null,
    pendingNodes: new Map(), // "queued|<message ID>" or "steered|<message ID>" -> {node, steerNow}
    source: null,
    cards: new Map(), // interrupt ID -> its card, kept across renders so typed text survives
    waits: [], // predicates on the next snapshots: an event's committed state, not shown yet
    snapshotReads: 0, // snapshot reads started
    appliedRead: 0, // the number of the read the page shows
    refreshing: false,
    wakeRefresh: null, // ends the refresh loop's current backoff
  };

  const $ = (id) => document.getElementById(id);
  function el(tag, attrs, ...children) {
    const node = document.createElement(tag);
    for (const [key, value] of Object.entries(attrs || {})) {
      if (value === undefined || value === null || value === false) continue;
      if (key === "text") node.textContent = value;
      else if (key.startsWith("on")) node.addEventListener(key.slice(2), value);
      else node.setAttribute(key, value === true ? "" : String(value));
    }
    for (const child of children) if (child) node.append(child);
    return node;
  }
  function notice(text) { $("notice").textContent = text || ""; }
  function setConnection(state) { $("connection").dataset.state = state; $("connection").textContent = state; }
  const sleep = (ms) => new Promise((resolve) => setTimeout(resolve, ms));

  async function request(path, options) {
    const response = await fetch(`${api}${path}`, options);
    const body = await response.json().catch(() => ({}));
    if (!response.ok) throw Object.assign(new Error(body.error || response.statusText), { status: response.status });
    return body;
  }
  function post(path, body) {
    return request(path, {
      method: "POST", headers: { "content-type": "application/json" }, body: JSON.stringify(body || {}),
    });
  }

  // Snapshot: the truth about committed state. A 503 (no Worker answers, say while one restarts) is retried.
  // Reads are numbered as they start, so a read that answers after a later one never replaces it.
  async function fetchSnapshot() {
    const read = ++page.snapshotReads;
    for (let delay = 250; ; delay = Math.min(delay * 2, 4000)) {
      try {
        const snap = await request("/snapshot", { cache: "no-store" });
        // A failed read said "reconnecting"; the events never stopped if their stream is still open.
        if (page.source && page.source.readyState === EventSource.OPEN) setConnection("live");
        return { snap, read };
      } catch (error) {
        if (error.status && error.status < 500) throw error;
        setConnection("reconnecting");
        await sleep(delay);
      }
    }
  }

  function turnHasEnded(turnId) {
    const snap = page.snapshot;
    if (!turnId || page.endedTurns.has(turnId)) return !!turnId;
    if (!snap || !snap.state) return false;
    return snap.state.active_turn_id !== turnId && snap.messages.some((m) => m.turn_id === turnId);
  }

  function applySnapshot(snap, read) {
    if (read < page.appliedRead) return;
    page.appliedRead = read;
    page.snapshot = snap;
    for (const key of [...page.live.keys()]) {
      if (turnHasEnded(page.live.get(key).turnId)) page.live.delete(key);
    }
    const pendingIds = new Set(snap.pending_interrupts.map((item) => item.interrupt_id));
    for (const id of [...page.cards.keys()]) if (!pendingIds.has(id)) page.cards.delete(id);
    const approval = page.planApproval;
    if (approval && approval.accepted && ((snap.state && snap.state.active_turn_id) || !snap.plan || snap.plan.revision !== approval.revision)) {
      page.planApproval = null;
    }
    render();
  }

  // Rebuild everything: a fresh snapshot, then the events from its token.
  async function rebuild() {
    if (page.source) page.source.close();
    setConnection("connecting");
    let fetched;
    try {
      fetched = await fetchSnapshot();
    } catch (error) {
      notice(error.message);
      return;
    }
    page.live.clear();
    page.toolStep.clear();
    page.endedTurns.clear();
    applySnapshot(fetched.snap, fetched.read);
    openEvents(fetched.snap.resume_token);
  }

  // Refresh the snapshot until it shows what the waiting events announced (a Step writes its events just
  // before its result commits), or the turn they belong to has ended. Only a read that started after a wait
  // was registered can satisfy it: a read already under way may answer from before the event (a turn end
  // arriving mid-read would otherwise be "satisfied" by a snapshot that still shows the turn running).
  // A new wait cuts short the loop's backoff, so a new event is not shown late.
  function refreshUntil(turnId, shows) {
    page.waits.push({ turnId, shows, after: page.snapshotReads });
    if (page.wakeRefresh) page.wakeRefresh();
    else if (!page.refreshing) refreshLoop();
  }
  async function refreshLoop() {
    page.refreshing = true;
    try {
      let delay = 100;
      while (page.waits.length) {
        const { snap, read } = await fetchSnapshot();
        applySnapshot(snap, read);
        page.waits = page.waits.filter((wait) => wait.after >= read || !(turnHasEnded(wait.turnId) || wait.shows(snap)));
        if (!page.waits.length) break;
        const woken = await new Promise((resolve) => {
          page.wakeRefresh = () => resolve(true);
          setTimeout(() => resolve(false), delay);
        });
        page.wakeRefresh = null;
        delay = woken ? 100 : Math.min(delay * 2, 2000);
      }
    } finally {
      page.refreshing = false;
      page.wakeRefresh = null;
    }
  }
  const record = (snap, id) => snap.tool_calls.find((call) => call.tool_call_id === id);
  const pending = (snap, id) => snap.pending_interrupts.some((item) => item.interrupt_id === id);

  function openEvents(token) {
    const source = new EventSource(`${api}/events?after=${encodeURIComponent(token)}`);
    page.source = source;
    let dropped = false;
    source.onopen = () => {
      setConnection("live");
      notice("");
      // Events resume exactly after the last one seen; committed state may have moved meanwhile.
      if (dropped) refreshUntil(null, () => true);
      dropped = false;
    };
    source.onerror = () => {
      dropped = true;
      if (source.readyState === EventSource.CLOSED) {
        // The server refused the stream (such as a resume token it no longer has): start over.
        setConnection("reconnecting");
        setTimeout(() => { if (page.source === source) rebuild(); }, 1000);
      } else {
        setConnection("reconnecting");
      }
    };
    for (const type of EVENT_TYPES) {
      source.addEventListener(type, (message) => onEvent(type, JSON.parse(message.data)));
    }
  }

  function onEvent(type, event) {
    const turnId = event.turn_id;
    if (TURN_ENDS.has(type) || type === "web.turn_ended") {
      if (type === "turn_steered" || type === "turn_cancelled") page.turnEnds.set(turnId, type);
      page.endedTurns.add(turnId);
      refreshUntil(null, () => true);
      return;
    }
    if (turnHasEnded(turnId)) return;
    const payload = event.payload || {};
    switch (type) {
      case "text_delta":
      case "reasoning_delta":
        addLiveText(event, type === "text_delta" ? "text" : "reasoning", payload.text || "");
        return;
      case "usage_recorded":
        if (page.snapshot && payload.session) { page.snapshot.usage = payload.session; renderFacts(); }
        return;
      case "turn_started":
        refreshUntil(turnId, (snap) => snap.state && snap.state.active_turn_id === turnId);
        return;
      case "tool_call_deferred":
        page.toolStep.set(payload.tool_call_id, event.step_execution_id);
        refreshUntil(turnId, (snap) => !!record(snap, payload.tool_call_id));
        return;
      case "interrupt_raised":
        refreshUntil(turnId, (snap) => pending(snap, payload.interrupt_id)
          || (record(snap, payload.tool_call_id) || {}).status !== "awaiting_approval");
        return;
      case "interrupt_resolved":
        refreshUntil(turnId, (snap) => !pending(snap, payload.interrupt_id));
        return;
      case "tool_call_finished":
        refreshUntil(turnId, (snap) => FINAL.has((record(snap, payload.tool_call_id) || {}).status));
        return;
      case "timer_started":
        refreshUntil(turnId, (snap) => !!(record(snap, payload.tool_call_id) || {}).wait_until);
        return;
      case "tool_task_started":
        refreshUntil(turnId, (snap) => !!(record(snap, payload.tool_call_id) || {}).task_id);
        return;
      case "plan_updated":
        // The plan of this revision and status, or a later one.
        refreshUntil(turnId, (snap) => !!snap.plan && (snap.plan.revision > payload.revision
          || (snap.plan.revision === payload.revision && snap.plan.status === payload.status)));
        return;
      default:
        refreshUntil(turnId, () => true);
    }
  }

  function addLiveText(event, kind, text) {
    const key = `${event.turn_id}|${event.step_execution_id}`;
    let group = page.live.get(key);
    if (!group || event.attempt > group.attempt) {
      // A higher attempt replaces the partial text of the one before it.
      group = { turnId: event.turn_id, stepId: event.step_execution_id, attempt: event.attempt, text: "", reasoning: "", order: group ? group.order : page.live.size };
      page.live.set(key, group);
    } else if (event.attempt < group.attempt) {
      return;
    }
    group[kind] += text;
    render();
  }

  // Rendering.
  function render() {
    renderFacts();
    const main = $("conversation");
    const nearBottom = window.innerHeight + window.scrollY >= document.body.scrollHeight - 80;
    // Cards are kept across renders, but moving a node out of the document drops its focus: give the
    // field being typed in its focus and selection back, or the next keystrokes would go nowhere.
    const focused = main.contains(document.activeElement) ? document.activeElement : null;
    const selection = focused && typeof focused.selectionStart === "number" ? [focused.selectionStart, focused.selectionEnd] : null;
    main.replaceChildren(...storedMessages(), ...activeTurn(), ...pendingMessages());
    if (focused && focused.isConnected && document.activeElement !== focused) {
      focused.focus({ preventScroll: true });
      if (selection) focused.setSelectionRange(...selection);
    }
    renderTurnControls();
    renderPlan();
    if (nearBottom) window.scrollTo(0, document.body.scrollHeight);
  }

  function renderFacts() {
    const snap = page.snapshot;
    $("session-id").textContent = sessionId;
    const status = snap && snap.state ? snap.state.status : "not started";
    $("status").dataset.status = status;
    $("status").textContent = status.replaceAll("_", " ");
    // A planning turn may only write the plan; an executing one carries out an approved plan.
    const mode = snap && snap.state && snap.state.active_turn_id ? snap.state.interaction_mode : "chat";
    $("mode").hidden = !mode || mode === "chat";
    $("mode").dataset.mode = mode || "chat";
    $("mode").textContent = mode || "";
    if (snap) {
      const usage = snap.usage;
      $("usage").textContent = `${usage.model_calls} model calls · ${usage.input_tokens} in / ${usage.output_tokens} out tokens`;
    }
  }

  function storedMessages() {
    const snap = page.snapshot;
    if (!snap) return [];
    const nodes = [];
    const tools = new Map();
    for (const message of snap.messages) {
      if (message.tool_call_id) {
        let card = tools.get(message.tool_call_id);
        if (!card) {
          card = { tool_call_id: message.tool_call_id, tool_name: message.tool_name, arguments: message.tool_arguments, turn_id: message.turn_id };
          tools.set(message.tool_call_id, card);
          nodes.push(card);
        }
        if (message.role === "tool") card.output = message.tool_output;
        if (message.text && message.role === "assistant") nodes.splice(nodes.indexOf(card), 0, { role: "assistant", text: message.text, sequence: message.sequence, turn_id: message.turn_id });
      } else if (message.text) {
        nodes.push(message);
      }
    }
    const rendered = [];
    nodes.forEach((item, index) => {
      const approved = !item.tool_call_id && item.role === "user" && PLAN_APPROVAL_MESSAGE.exec(item.text);
      if (approved) rendered.push(el("div", { class: "plan-note", "data-plan-approval": approved[1], text: `You approved plan revision ${approved[1]}.` }));
      else rendered.push(item.tool_call_id ? toolCard(item, null) : bubble(item.role, item.text, { "data-sequence": item.sequence }));
      const end = page.turnEnds.get(item.turn_id);
      const next = nodes[index + 1];
      if (end && (!next || next.turn_id !== item.turn_id)) rendered.push(turnEndMarker(item.turn_id, end));
    });
    const state = snap.state;
    if (state && state.last_turn_error && !state.active_turn_id) {
      rendered.push(el("div", { class: "turn-error", "data-turn-error": true, text: `The last turn failed: ${state.last_turn_error}` }));
    }
    return rendered;
  }

  function activeTurn() {
    const snap = page.snapshot;
    if (!snap || !snap.state || !snap.state.active_turn_id) return [];
    const turnId = snap.state.active_turn_id;
    const groups = [...page.live.values()].filter((g) => g.turnId === turnId).sort((a, b) => a.order - b.order);
    const records = snap.tool_calls.filter((call) => call.turn_id === turnId);
    const shown = new Set();
    const nodes = [];
    for (const group of groups) {
      nodes.push(liveBubble(group));
      for (const call of records) {
        if (page.toolStep.get(call.tool_call_id) === group.stepId) { nodes.push(toolCard(call, snap)); shown.add(call.tool_call_id); }
      }
    }
    for (const call of records) if (!shown.has(call.tool_call_id)) nodes.push(toolCard(call, snap));
    return nodes;
  }

  function turnEndMarker(turnId, type) {
    const kind = type === "turn_cancelled" ? "cancelled" : "steered";
    return el("div", { class: "turn-end", "data-turn-end": kind, "data-turn-id": turnId, text: TURN_END_LABELS[type] });
  }

  const acceptsTurnControl = (snap) => !!(snap && snap.state && snap.state.active_turn_id && snap.state.accepts_turn_control);

  // Messages waiting for the turn: steered ones (applied at the turn's next step), then queued ones (the
  // next turn's), each with buttons while the turn accepts steering. Nodes are kept across renders.
  function pendingMessages() {
    const snap = page.snapshot;
    if (!snap) return [];
    const canSteer = acceptsTurnControl(snap);
    const shown = new Set();
    const nodes = [];
    for (const item of snap.steered_messages || []) nodes.push(pendingMessage(item, "steered", false, shown));
    for (const item of snap.queued_messages || []) nodes.push(pendingMessage(item, "queued", canSteer, shown));
    for (const key of [...page.pendingNodes.keys()]) if (!shown.has(key)) page.pendingNodes.delete(key);
    return nodes;
  }

  function pendingMessage(item, kind, canSteer, shown) {
    const key = `${kind}|${item.message_id}`;
    shown.add(key);
    let entry = page.pendingNodes.get(key);
    if (!entry) {
      const id = item.message_id;
      const gone = (snap) => !snap.queued_messages.some((queued) => queued.message_id === id);
      const buttons = [];
      const act = (path, body) => async () => {
        for (const button of buttons) button.disabled = true;
        try {
          await post(path, body);
          notice("");
          refreshUntil(null, gone);
        } catch (error) {
          notice(error.message);
          for (const button of buttons) button.disabled = false;
          refreshUntil(null, () => true);
        }
      };
      const actions = el("div", { class: "pending-actions" },
        el("span", { class: "label", text: kind === "steered" ? "steering: applies at the turn's next step" : "queued for the next turn" }));
      if (kind === "queued") {
        buttons.push(el("button", { type: "button", "data-action": "steer-now", text: "Steer now", title: "End the running turn at its next step and start one with this message", onclick: act("/steer", { message_id: id }) }));
        buttons.push(el("button", { type: "button", "data-action": "delete", text: "Delete", onclick: act(`/queued/${encodeURIComponent(id)}/delete`, {}) }));
        actions.append(...buttons);
      }
      const node = el("div", { class: "pending", "data-kind": kind, "data-message-id": id },
        el("div", { class: "bubble", text: item.message.text }), actions);
      entry = { node, steerNow: buttons[0] };
      page.pendingNodes.set(key, entry);
    }
    if (entry.steerNow) entry.steerNow.hidden = !canSteer;
    return entry.node;
  }

  function bubble(role, text, attrs) {
    return el("div", { class: "msg", "data-role": role, ...attrs }, el("div", { class: "bubble", text }));
  }

  function liveBubble(group) {
    const box = el("div", { class: "bubble" });
    if (group.attempt > 1) box.append(el("span", { class: "attempt", text: `retry: attempt ${group.attempt}` }));
    if (group.reasoning) box.append(el("div", { class: "reasoning", text: group.reasoning }));
    box.append(el("span", { class: "text", text: group.text }));
    return el("div", { class: "msg", "data-role": "assistant", "data-live": true, "data-attempt": group.attempt }, box);
  }

  // Why steering or cancel_turn abandoned a call: its record says so while the turn runs; once the turn
  // ended, its stored result is the structured cancellation text.
  function cancellationOf(call) {
    if (call.cancellation_reason) return call.cancellation_reason;
    if (call.status || typeof call.output !== "string") return null;
    try {
      const result = JSON.parse(call.output);
      return result && result.status === "cancelled" ? CANCELLED_RESULTS[result.reason] || null : null;
    } catch {
      return null;
    }
  }

  function toolCard(call, snap) {
    const cancelled = cancellationOf(call);
    const recorded = call.status || (call.output !== undefined ? "done" : "requested");
    const status = cancelled && (recorded === "rejected" || !call.status) ? "cancelled" : recorded;
    const card = el("div", { class: "tool", "data-tool-call-id": call.tool_call_id, "data-status": status, "data-cancellation-reason": cancelled, "data-wait-until": status === "waiting_for_timer" && call.wait_until, "data-task-id": call.task_id },
      el("div", { class: "head" },
        el("span", { class: "name", text: call.tool_name || "tool" }),
        call.effect ? el("span", { class: "effect", text: call.effect.replaceAll("_", " ") }) : null,
        el("span", { class: "state", text: statusLabel(status, call, cancelled) })),
      el("div", { class: "args", text: call.arguments || "" }));
    if (status === "waiting_for_task") card.append(el("div", { class: "result", "data-task": true, text: `task ${call.task_id}: polled every ${call.task_poll_interval_seconds || "?"} s until it ends` }));
    const result = call.output ?? null;
    if (cancelled && status === "cancelled") {
      card.append(el("div", { class: "result", "data-output": true, text: "not run" }));
    } else {
      if (result !== null) card.append(el("div", { class: "result", "data-output": true, text: `→ ${result}` }));
      if (call.rejection_message) card.append(el("div", { class: "result error", text: `rejected: ${call.rejection_message}` }));
    }
    if (call.error) card.append(el("div", { class: "result error", text: call.error }));
    if (snap) {
      for (const interrupt of snap.pending_interrupts) {
        if (interrupt.tool_call_id === call.tool_call_id) card.append(interruptCard(interrupt));
      }
    }
    return card;
  }

  // Durable waits hold no Worker: the card says until when. A started task runs remotely until it ends.
  function statusLabel(status, call, cancelled) {
    if (status === "cancelled") return CANCELLED_LABELS[cancelled] || "cancelled";
    if (status === "waiting_for_timer") return call.wait_until ? `waiting until ${when(call.wait_until)}` : "waiting";
    return WAITING_LABELS[status] || status.replaceAll("_", " ");
  }

  function when(iso) {
    const date = new Date(iso);
    if (Number.isNaN(date.getTime())) return iso;
    const sameDay = date.toDateString() === new Date().toDateString();
    return sameDay ? date.toLocaleTimeString() : date.toLocaleString();
  }

  function interruptCard(interrupt) {
    const cached = page.cards.get(interrupt.interrupt_id);
    if (cached) return cached;
    const question = interrupt.kind === "question";
    const input = el("input", {
      "data-field": question ? "answer" : "rejection-message",
      placeholder: question ? "Your answer" : "Why not? (optional, the model reads it)",
    });
    const buttons = [];
    const refusal = el("div", { class: "ask-error", role: "alert", "data-error": true, hidden: true });
    const act = (path, body) => async () => {
      for (const button of buttons) button.disabled = true;
      refusal.hidden = true;
      try {
        await post(`/interrupts/${encodeURIComponent(interrupt.interrupt_id)}/${path}`, body());
        page.cards.delete(interrupt.interrupt_id);
        refreshUntil(null, (snap) => !pending(snap, interrupt.interrupt_id));
      } catch (error) {
        // The card stays, with what was typed: the server says why it refused (a blank answer, one that is
        // not among the choices, a question no longer pending). A refresh drops it if it is gone.
        refusal.textContent = error.message;
        refusal.hidden = false;
        for (const button of buttons) button.disabled = false;
        refreshUntil(null, () => true);
      }
    };
    const deadline = interrupt.deadline ? el("div", { class: "deadline", text: `${question ? "answer" : "decide"} by ${when(interrupt.deadline)}` }) : null;
    let box;
    if (question) {
      const choices = (interrupt.choices || []).map((choice) => el("button", { type: "button", "data-action": "choose", text: choice, onclick: act("answer", () => ({ answer: choice })) }));
      buttons.push(...choices);
      if (interrupt.allows_free_text) buttons.push(el("button", { type: "button", class: "primary", "data-action": "answer", text: "Answer", onclick: act("answer", () => ({ answer: input.value })) }));
      buttons.push(el("button", { type: "button", "data-action": "decline", text: "Decline", onclick: act("reject", () => ({})) }));
      input.addEventListener("keydown", (event) => {
        if (event.key === "Enter") { event.preventDefault(); buttons.find((b) => b.dataset.action === "answer").click(); }
      });
      box = el("div", { class: "ask", "data-interrupt-id": interrupt.interrupt_id, "data-kind": "question" },
        el("div", { class: "question", text: interrupt.question || "" }), deadline, interrupt.allows_free_text ? input : null, ...buttons, refusal);
    } else {
      buttons.push(el("button", { type: "button", "data-action": "approve", text: "Approve", onclick: act("approve", () => ({})) }));
      buttons.push(el("button", { type: "button", "data-action": "reject", text: "Reject", onclick: act("reject", () => ({ rejection_message: input.value || null })) }));
      box = el("div", { class: "ask", "data-interrupt-id": interrupt.interrupt_id, "data-kind": "tool_approval" },
        el("div", { class: "question", text: "This call needs your approval." }), deadline, input, ...buttons, refusal);
    }
    page.cards.set(interrupt.interrupt_id, box);
    return box;
  }

  // The steer box and Stop show only while the running turn accepts them: a turn that a Worker without
  // steering started refuses both.
  function renderTurnControls() {
    const snap = page.snapshot;
    const show = acceptsTurnControl(snap);
    const active = snap && snap.state ? snap.state.active_turn_id : null;
    $("turn-controls").hidden = !show;
    const stopping = show && page.stopping === active;
    $("stop").disabled = stopping;
    $("stop").textContent = stopping ? "Stopping…" : "Stop";
    $("message").placeholder = active ? "Message the agent (queued for the next turn)" : "Message the agent";
  }

  // Why the session would refuse to execute the plan now (execute_plan's conditions the snapshot shows).
  function planBlocker(snap) {
    const state = snap.state;
    if (!state) return "the session has not started";
    if (state.active_turn_id && state.interaction_mode === "executing") return "the running turn carries it out";
    if (state.active_turn_id || state.status !== "waiting_for_user_message") return "approve it once the turn has ended";
    if (snap.queued_messages.length || snap.steered_messages.length) return "messages wait for the next turn";
    if (snap.pending_interrupts.length) return "the session waits for an answer";
    const approval = page.planApproval;
    if (approval && approval.revision === snap.plan.revision && (approval.sending || approval.accepted)) return "approved; its turn is starting";
    return null;
  }

  function renderPlan() {
    const snap = page.snapshot;
    const section = $("plan");
    const plan = snap && snap.plan;
    $("plan-mode-label").hidden = !(snap && snap.plan_mode_enabled);
    if (!plan || plan.status === "cleared") {
      section.hidden = true;
      section.replaceChildren();
      return;
    }
    section.hidden = false;
    section.dataset.revision = plan.revision;
    section.dataset.status = plan.status;
    const tasks = el("ol", { class: "tasks" }, ...plan.tasks.map((task) => el("li", { "data-status": task.status },
      el("span", { class: "mark", "aria-hidden": "true", text: TASK_MARKS[task.status] || "·" }),
      el("span", { class: "content", text: task.content }),
      el("span", { class: "task-status", text: task.status.replaceAll("_", " ") }))));
    const head = el("div", { class: "plan-head" },
      el("span", { class: "plan-title", text: "Plan" }),
      el("span", { class: "pill", "data-plan-status": plan.status, text: plan.status }),
      el("span", { class: "revision", text: `revision ${plan.revision}` }));
    const children = [head, tasks];
    if (APPROVABLE_PLANS.has(plan.status)) {
      const blocker = planBlocker(snap);
      const approval = page.planApproval && page.planApproval.revision === plan.revision ? page.planApproval : null;
      const button = el("button", {
        type: "button", class: "primary", "data-action": "execute-plan", disabled: !!blocker,
        text: plan.status === "draft" ? "Approve plan" : "Execute plan", title: blocker || `Start a turn that carries out revision ${plan.revision}`,
        onclick: () => approvePlan(plan.revision),
      });
      children.push(el("div", { class: "plan-actions" }, button,
        blocker ? el("span", { class: "hint", "data-plan-blocker": true, text: blocker }) : null,
        approval && approval.error ? el("span", { class: "ask-error", role: "alert", "data-plan-error": true, text: approval.error }) : null));
    }
    section.replaceChildren(...children);
  }

  async function approvePlan(revision) {
    page.planApproval = { revision, sending: true };
    renderPlan();
    try {
      await post("/plan/execute", { revision });
      page.planApproval = { revision, accepted: true };
      refreshUntil(null, (snap) => !!(snap.state && snap.state.active_turn_id));
    } catch (error) {
      // The session refused: the server names why (a stale revision, a turn or a message in the way).
      page.planApproval = { revision, error: error.message };
      refreshUntil(null, () => true);
    }
    renderPlan();
  }

  // A form that posts its text box: sending queues a message, steering hands it to the running turn.
  function textForm(formId, inputId, buttonId, path, extra) {
    $(formId).addEventListener("submit", async (event) => {
      event.preventDefault();
      const text = $(inputId).value;
      if (!text.trim()) return;
      $(buttonId).disabled = true;
      try {
        await post(path, { text, ...(extra ? extra() : {}) });
        // Clear only what was sent: the user may have typed the next message meanwhile.
        if ($(inputId).value === text) $(inputId).value = "";
        if (formId === "send-form") $("plan-mode").checked = false;
        notice("");
      } catch (error) {
        notice(error.message);
      } finally {
        $(buttonId).disabled = false;
        refreshUntil(null, () => true);
      }
    });
  }
  // Plan mode: the message starts a planning turn, which may only write the plan for the user to approve.
  textForm("send-form", "message", "send", "/messages", () => ($("plan-mode-label").hidden ? {} : { plan_mode: $("plan-mode").checked }));
  textForm("steer-form", "steer-text", "steer", "/steer");
  $("stop").addEventListener("click", async () => {
    const snap = page.snapshot;
    const turnId = snap && snap.state ? snap.state.active_turn_id : null;
    if (!turnId) return;
    page.stopping = turnId;
    renderTurnControls();
    try {
      // Naming the turn: a click that arrives after it ended must not stop the next one.
      await post("/cancel", { turn_id: turnId });
      notice("");
    } catch (error) {
      page.stopping = null;
      notice(error.message);
    }
    refreshUntil(null, () => true);
  });
  $("message").addEventListener("keydown", (event) => {
    if (event.key === "Enter" && !event.shiftKey) { event.preventDefault(); $("send-form").requestSubmit(); }
  });

  rebuild();
})();
