// The agent-core playground: a client of the public /api/ap/* endpoints, no build step, no dependencies.
// One renderer draws both live events (POST api/ap/query, Server-Sent Events read with fetch) and the
// replayed ones (GET api/ap/chat), so an opened chat shows the same cards as a live run. A dropped live stream is
// resumed by itself (resumeRun).
"use strict";

const $ = (id) => document.getElementById(id);
const state = { chatId: null, runId: null, running: false, agents: [] };
// Where the API is: the server that served the page, unless it named another base (AGENT_PUBLIC_BASE_URL).
const API_BASE = (document.body.dataset.apiBase || "").replace(/\/$/, "");
const endpoint = (path) => (API_BASE ? API_BASE + "/" + path : path);

function el(tag, attrs = {}, ...children) {
  const node = document.createElement(tag);
  for (const [key, value] of Object.entries(attrs)) {
    if (key === "testid") node.dataset.testid = value;
    else if (key === "class") node.className = value;
    else if (key === "text") node.textContent = value;
    else node.setAttribute(key, value);
  }
  for (const child of children) node.append(child);
  return node;
}

function pretty(value) {
  if (typeof value === "string") {
    try { return JSON.stringify(JSON.parse(value)); } catch { return value; }
  }
  return JSON.stringify(value);
}

// --- HTTP -----------------------------------------------------------------------------------------------

class ApiError extends Error {
  constructor(status, body) {
    const error = (body && body.error) || {};
    super(`${status} ${error.code || "error"}: ${error.message || "the server answered " + status}`);
    this.status = status;
    this.code = error.code;
  }
}

function headers(json) {
  const h = {};
  const token = $("token").value.trim();
  if (token) h["Authorization"] = "Bearer " + token;
  if (json) h["Content-Type"] = "application/json";
  return h;
}

async function api(method, path, body) {
  const response = await fetch(endpoint(path), { method, headers: headers(body !== undefined), body: body === undefined ? undefined : JSON.stringify(body) });
  if (response.status === 204) return null;
  const text = await response.text();
  let parsed = null;
  try { parsed = text ? JSON.parse(text) : null; } catch { parsed = { error: { message: text.slice(0, 200) } }; }
  if (!response.ok) throw new ApiError(response.status, parsed);
  return parsed;
}

// Server-Sent Events over fetch: `data:` lines form an event, comment lines (`: ping`) are skipped.
async function* sse(response) {
  const reader = response.body.getReader();
  const decoder = new TextDecoder();
  let buffer = "";
  for (;;) {
    const { value, done } = await reader.read();
    if (done) break;
    buffer += decoder.decode(value, { stream: true }).replace(/\r\n/g, "\n");
    let cut;
    while ((cut = buffer.indexOf("\n\n")) >= 0) {
      const block = buffer.slice(0, cut);
      buffer = buffer.slice(cut + 2);
      const data = block.split("\n").filter((l) => l.startsWith("data:")).map((l) => l.slice(5).replace(/^ /, "")).join("\n");
      if (data) yield JSON.parse(data);
    }
  }
}

// --- errors ---------------------------------------------------------------------------------------------

const HINTS = {
  409: "this chat is answering another message; wait for it to finish or cancel it",
  413: "the message is too large",
  502: "the model could not be reached",
  503: "the service is busy; try again",
  401: "not signed in: set a user or token at the top",
};

function showError(error) {
  let text = error instanceof Error ? error.message : String(error);
  const hint = error && HINTS[error.status];
  if (hint) text += ` (${hint})`;
  $("error-text").textContent = text;
  $("error").hidden = false;
}

// When a refused turn may be sent again: `retryAfter` seconds from now, and the local clock time.
function retryIn(seconds) {
  const at = new Date(Date.now() + seconds * 1000).toLocaleTimeString([], { hour: "2-digit", minute: "2-digit" });
  if (seconds < 60) return `try again in ${seconds} s`;
  const minutes = Math.ceil(seconds / 60);
  const span = minutes < 60 ? `${minutes} min` : `${Math.floor(minutes / 60)} h ${minutes % 60} min`;
  return `try again in ${span}, at ${at}`;
}

function clearError() { $("error").hidden = true; $("error-text").textContent = ""; }

// --- rendering ------------------------------------------------------------------------------------------

// The messages box follows new content while the reader is at its end (within FOLLOW_SLACK_PX); scrolled up to
// read, they stay where they are, except for their own message and a form that waits for them.
const FOLLOW_SLACK_PX = 48;
const atEnd = (box) => box.scrollHeight - box.scrollTop - box.clientHeight <= FOLLOW_SLACK_PX;
const toEnd = (box) => { box.scrollTop = box.scrollHeight; };

class RunView {
  constructor(container, live) {
    this.container = container;
    this.live = live;
    this.assistant = null;
    this.blocks = new Map();  // reasoningId / contentId / toolId / actionId -> element parts
    this.ends = new Map();    // toolId -> timestamp of tool.end (a tool's duration is end -> result)
    this.reveal = null;       // an element the event made that the reader must see (a frontend tool's form)
  }

  bubble() {
    if (!this.assistant) {
      this.assistant = el("div", { class: "message assistant", testid: "message-assistant" });
      this.container.append(this.assistant);
    }
    return this.assistant;
  }

  meta(text, kind = "") {
    this.bubble().append(el("div", { class: "meta " + kind, text }));
  }

  text(kind, id, add, replace) {
    let block = this.blocks.get(id);
    if (!block) {
      if (kind === "reasoning") {
        const body = el("pre");
        block = { body, node: el("details", { class: "reasoning" }, el("summary", { text: "Reasoning" }), body) };
      } else {
        block = { node: el("div", { class: "content" }) };
        block.body = block.node;
      }
      this.blocks.set(id, block);
      this.bubble().append(block.node);
    }
    if (replace !== undefined) block.body.textContent = replace;
    if (add) block.body.append(document.createTextNode(add));
  }

  card(id, name, kind, type) {
    let card = this.blocks.get(id);
    if (!card) {
      const args = el("pre", { class: "args" });
      const status = el("span", { class: "status", text: "calling" });
      const duration = el("span", { class: "duration" });
      const node = el("div", { class: "card " + kind, testid: kind === "tool" ? "tool-card" : "action-card" },
        el("div", { class: "head" }, el("span", { class: "name", text: name }), el("span", { class: "kind", text: type }), status, duration),
        args);
      node.dataset.toolName = name;
      node.dataset.status = "calling";
      card = { node, args, status, duration, name, type, argText: "" };
      this.blocks.set(id, card);
      this.bubble().append(node);
    }
    return card;
  }

  setStatus(card, status) { card.node.dataset.status = status; card.status.textContent = status; }

  result(card, event, endTimestamp) {
    this.setStatus(card, event.status || "ok");
    if (endTimestamp !== undefined) card.duration.textContent = `${event.timestamp - endTimestamp} ms`;
    if (card.form) { card.form.remove(); card.form = null; }
    const shown = event.reason ? { reason: event.reason, result: event.result } : event.result;
    card.node.append(el("pre", { class: "result", text: "→ " + pretty(shown === undefined ? null : shown) }));
    const url = event.result && typeof event.result.url === "string" ? event.result.url : null;
    if (url) {
      const name = String(event.result.name || event.result.file || "file").split("/").pop();
      card.node.append(el("a", { href: url, target: "_blank", rel: "noopener", testid: "data-link", text: "Open " + name }));
    }
  }

  // Live, the box follows what the event added (see atEnd) and brings a new form into view; a replay is drawn
  // whole and scrolled once by openChat.
  handle(event) {
    if (!this.live) { this.apply(event); return; }
    const follow = event.type === "request.query" || atEnd(this.container);
    this.apply(event);
    if (follow) toEnd(this.container);
    if (this.reveal) { this.reveal.scrollIntoView({ block: "nearest", inline: "nearest" }); this.reveal = null; }
  }

  apply(event) {
    switch (event.type) {
      case "request.query":
        this.container.append(el("div", { class: "message user", testid: "message-user", text: event.message }));
        this.runId = event.runId;
        break;
      case "run.route":
        this.meta(`route: ${event.mode}${event.matchedTools ? " (" + event.matchedTools.join(", ") + ")" : ""}`);
        break;
      case "reasoning.start": this.text("reasoning", event.reasoningId); break;
      case "reasoning.delta": this.text("reasoning", event.reasoningId, event.delta); break;
      case "reasoning.snapshot": this.text("reasoning", event.reasoningId, undefined, event.text); break;
      case "content.start": this.text("content", event.contentId); break;
      case "content.delta": this.text("content", event.contentId, event.delta); break;
      case "content.snapshot": this.text("content", event.contentId, undefined, event.text); break;
      case "tool.start": this.card(event.toolId, event.toolName, "tool", event.toolType); break;
      case "tool.args": {
        const card = this.blocks.get(event.toolId);
        if (card) { card.argText += event.delta; card.args.textContent = card.argText; }
        break;
      }
      case "tool.snapshot": {
        const card = this.card(event.toolId, event.toolName, "tool", event.toolType);
        card.argText = typeof event.args === "string" ? event.args : JSON.stringify(event.args);
        card.args.textContent = pretty(card.argText);
        this.ended(event, card);
        break;
      }
      case "tool.end": this.ended(event, this.blocks.get(event.toolId)); break;
      case "tool.approval": approvalCard(this, event); break;
      case "request.submit": {
        const card = this.blocks.get(event.toolId);
        if (card) card.node.append(el("pre", { class: "submitted", text: "answered: " + pretty(event.params) }));
        break;
      }
      case "tool.result": {
        const card = this.blocks.get(event.toolId);
        if (card) this.result(card, event, this.ends.get(event.toolId));
        break;
      }
      case "action.start": this.card(event.actionId, event.actionName, "action", "ui action"); break;
      case "action.args": {
        const card = this.blocks.get(event.actionId);
        if (card) { card.argText += event.delta; card.args.textContent = card.argText; }
        break;
      }
      case "action.snapshot": {
        const card = this.card(event.actionId, event.actionName, "action", "ui action");
        card.args.textContent = pretty(event.args);
        break;
      }
      case "action.end": {
        const card = this.blocks.get(event.actionId);
        if (card) { card.args.textContent = pretty(card.argText); this.setStatus(card, "sent"); }
        break;
      }
      case "action.result": {
        const card = this.blocks.get(event.actionId);
        if (card) this.setStatus(card, "handed to the page");
        break;
      }
      case "react.step": this.meta(`step ${event.step}: ${event.thought || ""} → ${event.action}`); break;
      case "run.warning": this.meta(`warning ${event.code}: ${event.message}`, "warning"); break;
      case "run.complete": {
        const usage = event.usage ? `, ${event.usage.promptTokens} + ${event.usage.completionTokens} tokens` : "";
        this.meta(`done (${event.finishReason}${usage})`);
        this.closeForms();
        break;
      }
      case "run.error":
        if (event.retryAfter != null) {  // a budget or rate limit refused the turn: nothing of it was stored
          const refusal = `${event.code}: ${event.message} (${retryIn(event.retryAfter)})`;
          this.meta(`refused: ${refusal}`, "failed");
          if (this.live) showError(refusal);
          break;
        }
        this.meta(`failed: ${event.code}: ${event.message}`, "failed");
        this.closeForms();
        if (this.live) showError(new ApiError(event.code === "llm_unavailable" ? 502 : 500, { error: event }));
        break;
      case "run.cancel":
        this.meta(`cancelled${event.reason ? " (" + event.reason + ")" : ""}`, "warning");
        this.closeForms();
        break;
    }
  }

  ended(event, card) {
    if (!card) return;
    this.ends.set(event.toolId, event.timestamp);
    card.args.textContent = pretty(card.argText);
    if (card.node.dataset.status !== "calling") return;  // a replayed card whose result came first
    if (card.type === "frontend") {
      this.setStatus(card, "waiting");
      if (this.live) this.reveal = card.form = frontendForm(this.runId, event.toolId, card, event.schema);
    } else {
      this.setStatus(card, "running");
    }
  }

  closeForms() {
    for (const block of this.blocks.values()) {
      if (block.form) { block.form.remove(); block.form = null; }
      if (block.node && block.node.dataset.status === "waiting") this.setStatus(block, "not answered");
    }
  }
}

// A frontend tool as a form. `ask_user` shows its question with its choices; any other frontend tool shows
// one field per property of its parameters schema when the event carries one, else its arguments as JSON
// to edit. Whatever is submitted is the tool's result.
function frontendForm(runId, toolId, card, schema) {
  let args = {};
  try { args = JSON.parse(card.argText || "{}"); } catch { args = {}; }
  const form = el("form", { class: "frontend-form", testid: "frontend-tool-form" });
  form.dataset.toolId = toolId;
  let collect;
  if (card.name === "ask_user") {
    form.append(el("div", { class: "question", text: args.question || "The agent asks:" }));
    const answer = el("input", { name: "answer", placeholder: "your answer", "aria-label": "answer" });
    const choices = el("div", { class: "choices" });
    for (const choice of args.choices || []) {
      const button = el("button", { type: "button", class: "choice", text: choice });
      button.addEventListener("click", () => { answer.value = choice; form.requestSubmit(); });
      choices.append(button);
    }
    form.append(choices, answer);
    collect = () => ({ answer: answer.value });
  } else if (schema && schema.properties) {
    const fields = {};
    for (const [key, spec] of Object.entries(schema.properties)) {
      let input;
      if (Array.isArray(spec.enum)) {
        input = el("select");
        for (const option of spec.enum) input.append(el("option", { value: String(option), text: String(option) }));
      } else if (spec.type === "boolean") {
        input = el("input", { type: "checkbox" });
        input.checked = Boolean(args[key]);
      } else {
        input = el("input", { type: spec.type === "number" || spec.type === "integer" ? "number" : "text" });
      }
      if (spec.type !== "boolean" && args[key] !== undefined) input.value = typeof args[key] === "string" ? args[key] : JSON.stringify(args[key]);
      input.name = key;
      fields[key] = [input, spec];
      form.append(el("label", { text: spec.description || spec.title || key }, input));
    }
    collect = () => Object.fromEntries(Object.entries(fields).map(([key, [input, spec]]) => {
      if (spec.type === "boolean") return [key, input.checked];
      if (spec.type === "number" || spec.type === "integer") return [key, Number(input.value)];
      if (spec.type === "object" || spec.type === "array") { try { return [key, JSON.parse(input.value)]; } catch { return [key, input.value]; } }
      return [key, input.value];
    }));
  } else {
    const editor = el("textarea", { rows: "4", name: "params", "aria-label": "answer as JSON" });
    editor.value = JSON.stringify(args, null, 2);
    form.append(el("label", { text: "Answer (a JSON object)" }, editor));
    collect = () => JSON.parse(editor.value || "{}");
  }
  form.append(el("button", { type: "submit", text: "Submit" }));
  form.addEventListener("submit", async (e) => {
    e.preventDefault();
    try {
      const answer = await api("POST", "api/ap/submit", { runId, toolId, params: collect() });
      if (!answer.accepted) showError(`The answer was not taken: the run is ${answer.status}`);
      else form.querySelectorAll("button, input, textarea, select").forEach((n) => { n.disabled = true; });
    } catch (error) { showError(error); }
  });
  card.node.append(form);
  return form;
}

// A call that needs a person's approval (`tool.approval`): its card shows the tool, its arguments and why it
// asks, with Approve / Deny (and an optional reason) posted to /api/ap/submit; the outcome stays on the card
// (the call's tool.result follows: its output, or the denial). A replay shows the question only.
function approvalCard(view, event) {
  const card = view.card(event.toolId, event.toolName, "tool", "backend");
  card.node.append(el("div", { class: "approval-reason", testid: "approval-reason", text: "Needs approval: " + (event.reason || "") }));
  if (!view.live || card.node.dataset.status !== "running") return;  // replayed, or its result already came
  view.setStatus(card, "waiting");
  const form = el("form", { class: "frontend-form approval-form", testid: "approval-form" });
  form.append(el("div", { class: "question", text: `Approve ${event.toolName}?` }),
    el("pre", { class: "approval-args", text: pretty(event.args === undefined ? null : event.args) }));
  const reason = el("input", { name: "reason", placeholder: "reason (optional)", "aria-label": "reason" });
  const approve = el("button", { type: "button", class: "approve", text: "Approve" });
  const deny = el("button", { type: "button", class: "deny", text: "Deny" });
  form.append(reason, el("div", { class: "choices" }, approve, deny));
  const decide = async (yes) => {
    const body = { runId: view.runId, toolId: event.toolId, approve: yes };
    if (reason.value.trim()) body.reason = reason.value.trim();
    form.querySelectorAll("button, input").forEach((n) => { n.disabled = true; });
    try {
      const answer = await api("POST", "api/ap/submit", body);
      const outcome = answer.accepted ? (yes ? "approved" : "denied") : `not taken (${answer.status})`;
      card.node.append(el("div", { class: "approval-outcome", testid: "approval-outcome", text: outcome }));
      if (!answer.accepted) showError(`The decision was not taken: ${answer.status}`);
    } catch (error) {
      form.querySelectorAll("button, input").forEach((n) => { n.disabled = false; });
      showError(error);
    }
  };
  approve.addEventListener("click", () => decide(true));
  deny.addEventListener("click", () => decide(false));
  form.addEventListener("submit", (e) => e.preventDefault());
  card.node.append(form);
  card.form = form;
  view.reveal = form;
}

// --- turns ----------------------------------------------------------------------------------------------

function setRunning(running) {
  state.running = running;
  $("send").disabled = running;
  $("cancel").disabled = !running;
}

// The composer is emptied when a message is sent and given the message back if the server never took it
// (no request.query came: 409, 413, 401, a network error), in front of anything typed since.
function restoreComposer(message) {
  const composer = $("composer");
  composer.value = composer.value ? message + "\n" + composer.value : message;
}

async function send(message) {
  clearError();
  let taken = false;
  const body = { message };
  if (state.chatId) body.chatId = state.chatId;
  if ($("agent").value) body.agentKey = $("agent").value;
  setRunning(true);
  try {
    const response = await fetch(endpoint("api/ap/query"), { method: "POST", headers: headers(true), body: JSON.stringify(body) });
    if (!response.ok) {
      let parsed = null;
      try { parsed = await response.json(); } catch { parsed = null; }
      throw new ApiError(response.status, parsed);
    }
    const view = new RunView($("messages"), true);
    const followed = { seq: 0, terminal: false };
    const show = (event) => {
      if (event.type === "request.query") {
        taken = true;
        state.runId = event.runId;
        if (!state.chatId) openedChat(event.chatId);
      }
      view.handle(event);
      if (event.type === "chat.start") refreshChats();
      noteEvent(followed, event);
    };
    try {
      for await (const event of sse(response)) show(event);
    } catch (error) {
      if (!taken) throw error;  // the server never took the message: nothing to resume
    }
    if (!followed.terminal && taken) await resumeRun(state.runId, followed, show);
    if (!followed.terminal) showError(followed.error || "The connection closed before the run ended; reopen the chat to see what was stored.");
    refreshChats();
  } catch (error) {
    showError(error);
  } finally {
    if (!taken) restoreComposer(message);
    state.runId = null;
    setRunning(false);
  }
}

// --- resume ---------------------------------------------------------------------------------------------

// A run goes on on the server when the page's connection drops (a network change, a sleeping laptop): the page
// asks for the events after the last one it showed (GET api/ap/runs/{runId}/events, Last-Event-ID: its seq),
// on any server instance, and shows each event once. Reconnects back off over about half a minute (a server
// that crashed and restarts is back by then; a run that waited on an answer goes on from its checkpoint); a
// few in a row that bring nothing (or a 404/410: the run or its log is gone) end the attempt.
const TERMINAL_TYPES = ["run.complete", "run.error", "run.cancel"];
const RESUME_BACKOFF_MS = [200, 500, 1000, 2000, 4000, 8000, 8000, 8000];
const RESUME_TRIES = RESUME_BACKOFF_MS.length;

function noteEvent(followed, event) {
  if (event.seq) followed.seq = Math.max(followed.seq, event.seq);
  if (TERMINAL_TYPES.includes(event.type)) followed.terminal = true;
}

async function resumeRun(runId, followed, show) {
  let failures = 0;
  while (!followed.terminal && failures < RESUME_TRIES) {
    if (failures) await new Promise((done) => setTimeout(done, RESUME_BACKOFF_MS[failures - 1]));
    const before = followed.seq;
    try {
      const path = `api/ap/runs/${encodeURIComponent(runId)}/events`;
      const response = await fetch(endpoint(path), { headers: { ...headers(false), "Last-Event-ID": String(followed.seq) } });
      if (!response.ok) {
        let parsed = null;
        try { parsed = await response.json(); } catch { parsed = null; }
        throw new ApiError(response.status, parsed);
      }
      for await (const event of sse(response)) {
        if (event.type === "stream.error") throw new ApiError(410, { error: event });
        if (event.seq && event.seq <= followed.seq) continue;  // already shown
        show(event);
        if (followed.terminal) return;
      }
    } catch (error) {
      if (error instanceof ApiError) { followed.error = error; return; }  // the run or its log is gone
    }
    failures = followed.seq > before ? 0 : failures + 1;
  }
}

async function cancel() {
  if (!state.runId) return;
  try { await api("POST", "api/ap/cancel", { runId: state.runId }); } catch (error) { showError(error); }
}

// --- chats ----------------------------------------------------------------------------------------------

// Under the narrow layout's breakpoint the chat list folds behind the "Chats" button (CSS: nav.open).
function foldChats(open) {
  $("chats-nav").classList.toggle("open", open);
  $("chats-toggle").setAttribute("aria-expanded", String(open));
}

function openedChat(chatId) {
  state.chatId = chatId;
  history.replaceState(null, "", chatId ? "#chat=" + encodeURIComponent(chatId) : location.pathname);
  for (const li of $("chats").children) li.classList.toggle("current", li.dataset.chatId === chatId);
}

async function refreshChats() {
  try {
    const page = await api("GET", "api/ap/chats?limit=50");
    $("chats").replaceChildren(...page.items.map((chat) => {
      const button = el("button", { type: "button", text: chat.chatName || chat.chatId, title: chat.updatedAt || "" });
      button.addEventListener("click", () => openChat(chat.chatId));
      const li = el("li", {}, button);
      li.dataset.chatId = chat.chatId;
      li.classList.toggle("current", chat.chatId === state.chatId);
      return li;
    }));
    $("chats-toggle").textContent = `Chats (${page.items.length})`;
  } catch (error) { showError(error); }
}

async function openChat(chatId) {
  if (state.running) return;
  clearError();
  try {
    let cursor = null;
    const events = [];
    do {
      const query = `api/ap/chat?chatId=${encodeURIComponent(chatId)}&includeRawMessages=true` + (cursor ? "&cursor=" + encodeURIComponent(cursor) : "");
      const page = await api("GET", query);
      events.push(...page.events);
      cursor = page.nextCursor;
    } while (cursor);
    $("messages").replaceChildren();
    let view = null;
    for (const event of events) {
      if (event.type === "request.query") view = new RunView($("messages"), false);
      if (view) view.handle(event);
    }
    toEnd($("messages"));
    openedChat(chatId);
    foldChats(false);
  } catch (error) {
    showError(error);
    if (error.status === 404) openedChat(null);
  }
}

function newChat() {
  if (state.running) return;
  clearError();
  $("messages").replaceChildren();
  openedChat(null);
  foldChats(false);
  $("composer").focus();
}

// --- agents and profile ---------------------------------------------------------------------------------

async function loadAgents() {
  try {
    const page = await api("GET", "api/ap/agents");
    state.agents = page.items;
    $("agent").replaceChildren(...page.items.map((a) => el("option", { value: a.key, text: a.name || a.key, title: a.description || "" })));
    const saved = localStorage.getItem("agent-core.agent");
    if (saved && page.items.some((a) => a.key === saved)) $("agent").value = saved;
  } catch (error) { showError(error); }
}

function showProfile(profile) {
  $("profile-user").textContent = profile.userId;
  if (document.activeElement !== $("timezone")) $("timezone").value = profile.timezone || "";  // not while typed in
  $("facts").replaceChildren(...(profile.facts.length
    ? profile.facts.map((f) => el("li", { text: `${f.aspect} · ${f.key}: ${f.value}` + (f.sourceDate ? ` (${f.sourceDate})` : "") }))
    : [el("li", { class: "meta", text: "nothing yet" })]));
}

async function loadProfile() {
  try { showProfile(await api("GET", "api/ap/profile")); } catch (error) { showError(error); }
}

async function setTimezone(e) {
  e.preventDefault();
  clearError();
  try {
    $("timezone").blur();
    showProfile(await api("PATCH", "api/ap/profile", { timezone: $("timezone").value.trim() }));
  } catch (error) { showError(error); }
}

async function eraseProfile() {
  if (!confirm("Erase everything remembered about you (profile and time zone)?")) return;
  try { await api("DELETE", "api/ap/profile"); await loadProfile(); } catch (error) { showError(error); }
}

// --- wiring ---------------------------------------------------------------------------------------------

function start() {
  $("token").value = localStorage.getItem("agent-core.token") || "";
  $("token").addEventListener("change", () => {
    localStorage.setItem("agent-core.token", $("token").value.trim());
    newChat(); refreshChats();
    if (!$("profile").hidden) loadProfile();
  });
  $("identity").addEventListener("submit", (e) => { e.preventDefault(); $("token").dispatchEvent(new Event("change")); });
  $("agent").addEventListener("change", () => localStorage.setItem("agent-core.agent", $("agent").value));
  $("composer-form").addEventListener("submit", (e) => {
    e.preventDefault();
    const message = $("composer").value;
    if (!message.trim() || state.running) return;
    $("composer").value = "";
    send(message);
  });
  $("composer").addEventListener("keydown", (e) => {
    if (e.key === "Enter" && !e.shiftKey && !e.isComposing) { e.preventDefault(); $("composer-form").requestSubmit(); }
  });
  $("cancel").addEventListener("click", cancel);
  $("new-chat").addEventListener("click", newChat);
  $("error-close").addEventListener("click", clearError);
  $("chats-toggle").addEventListener("click", () => foldChats(!$("chats-nav").classList.contains("open")));
  $("profile-toggle").addEventListener("click", () => {
    $("profile").hidden = !$("profile").hidden;
    $("profile-toggle").setAttribute("aria-expanded", String(!$("profile").hidden));
    if (!$("profile").hidden) loadProfile();
  });
  $("timezone-form").addEventListener("submit", setTimezone);
  $("profile-erase").addEventListener("click", eraseProfile);
  if (Intl.supportedValuesOf) $("zones").replaceChildren(...Intl.supportedValuesOf("timeZone").map((z) => el("option", { value: z })));
  loadAgents();
  refreshChats();
  const match = /^#chat=(.+)$/.exec(location.hash);
  if (match) openChat(decodeURIComponent(match[1]));
}

start();
