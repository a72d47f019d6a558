// The a2a-handoff console: draws the snapshots the server pushes (SSE), answers escalations.
"use strict";

const BOX_W = 156, BOX_H = 66, GAP = 130, TOP = 44, PAD = 8;
const SVG = "http://www.w3.org/2000/svg";
let selected = null;     // {agentUrl, taskId} of the box whose detail is open
let inboxKey = "";       // the inbox's item ids last drawn (a reply being typed survives)
// The per-run token the console printed at start, in the URL the operator opened: every
// call of the page carries it (the server answers nothing without it).
const TOKEN = new URLSearchParams(location.search).get("token") || "";
const AUTH = {"X-Console-Token": TOKEN};

function el(tag, attrs = {}, text) {
  const node = tag.startsWith("svg:") ? document.createElementNS(SVG, tag.slice(4))
                                      : document.createElement(tag);
  for (const [k, v] of Object.entries(attrs)) node.setAttribute(k, v);
  if (text !== undefined) node.textContent = text;
  return node;
}

function clock(stamp) {
  if (!stamp) return "";
  const d = new Date(stamp);
  return isNaN(d) ? stamp : d.toLocaleTimeString([], {hour12: false});
}

function short(text, n) {
  text = text || "";
  return text.length > n ? text.slice(0, n - 1) + "…" : text;
}

function stateColor(state) {
  return getComputedStyle(document.documentElement).getPropertyValue("--" + state).trim() || "#ccc";
}

// The boxes of a chain, in order: its tasks, and after a task transferred to an agent this
// console does not watch, a stand-in box for the task there (so the arrow has a target).
function slotsOf(hops) {
  const ids = new Set(hops.map(h => h.taskId));
  const slots = [];
  for (const hop of hops) {
    slots.push(hop);
    if (hop.to && hop.to.taskId && !ids.has(hop.to.taskId)) {
      ids.add(hop.to.taskId);
      slots.push({ghost: true, agent: hop.to.agent, taskId: hop.to.taskId, state: "unwatched",
        from: {agent: hop.agent, taskId: hop.taskId, kind: "transfer", reason: hop.to.reason}});
    }
  }
  return slots;
}

function drawArrow(svg, slots, index, i, x) {
  const hop = slots[i];
  const kind = hop.from.kind || "handoff";
  const g = el("svg:g", {class: `arrow ${kind}`, "data-kind": kind, "data-to": hop.taskId});
  const src = index.get(hop.from.taskId);
  const y = TOP + BOX_H / 2, x2 = x(i) - 2;
  let path, lx, ly;
  if (src === undefined) {            // its source is not on a watched agent
    path = `M${x(i) - GAP + 6},${y} L${x2},${y}`; lx = x(i) - GAP / 2; ly = y - 8;
    g.append(el("svg:text", {x: x(i) - GAP + 4, y: y + 16}, `from ${hop.from.agent}`));
  } else if (src === i - 1) {
    path = `M${x(src) + BOX_W},${y} L${x2},${y}`; lx = x(src) + BOX_W + GAP / 2; ly = y - 8;
  } else {
    const x1 = x(src) + BOX_W / 2, xe = x(i) + BOX_W / 2;
    path = `M${x1},${TOP} C${x1},${TOP - 40} ${xe},${TOP - 40} ${xe},${TOP - 2}`;
    lx = (x1 + xe) / 2; ly = TOP - 30;
  }
  g.append(el("svg:path", {d: path, "marker-end": `url(#head-${kind})`}));
  const label = el("svg:text", {x: lx, y: ly, "text-anchor": "middle"}, kind);
  const user = hop.from.onBehalfOf ? ` (for ${hop.from.onBehalfOf})` : "";
  const title = el("svg:title", {}, `${kind}${user}: ${hop.from.reason}`);
  g.append(label, title);
  if (hop.from.reason) {
    g.append(el("svg:text", {x: lx, y: ly + 34, "text-anchor": "middle"},
      short(hop.from.reason, 22)));
  }
  svg.append(g);
}

function drawBox(svg, hop, i, x) {
  const isSel = selected && selected.taskId === hop.taskId;
  const g = el("svg:g", {class: "box" + (hop.ghost ? " ghost" : "") + (isSel ? " selected" : ""),
    "data-agent": hop.agent, "data-state": hop.state, "data-task": hop.taskId});
  if (hop.ghost) {  // the console cannot open it: its agent is not one it watches
    g.append(el("svg:rect", {x: x(i), y: TOP, width: BOX_W, height: BOX_H}));
    g.append(el("svg:text", {x: x(i) + 8, y: TOP + 17, class: "agent"}, hop.agent));
    const why = unread[hop.agent];  // watched, but its tasks are not the console's to read
    g.append(el("svg:text", {x: x(i) + 8, y: TOP + 34}, why ? "not readable here" : "not watched here"));
    g.append(el("svg:text", {x: x(i) + 8, y: TOP + 51}, `task ${hop.taskId.slice(-6)}`));
    g.append(el("svg:title", {}, `${hop.agent} task ${hop.taskId}: `
      + (why || `add --agent for ${hop.agent} to see it`)));
    svg.append(g);
    return;
  }
  g.setAttribute("tabindex", 0);
  g.append(el("svg:rect", {x: x(i), y: TOP, width: BOX_W, height: BOX_H,
    fill: stateColor(hop.state)}));
  const ink = ["working", "failed", "rejected", "completed", "return"].includes(hop.state)
    ? "#fff" : "#1d2430";
  g.append(el("svg:text", {x: x(i) + 8, y: TOP + 17, class: "agent", fill: ink}, hop.agent));
  g.append(el("svg:text", {x: x(i) + 8, y: TOP + 34, fill: ink}, hop.state.replace("_", " ")));
  g.append(el("svg:text", {x: x(i) + 8, y: TOP + 51, fill: ink},
    `${clock(hop.at)} · ${hop.taskId.slice(-6)}`));
  g.append(el("svg:title", {}, hop.text || hop.state));
  g.addEventListener("click", () => openTask(hop));
  svg.append(g);
}

function drawChain(chain) {
  const hops = chain.hops;
  const wrap = el("div", {class: "chain", "data-context": chain.contextId});
  const last = hops[hops.length - 1];
  wrap.append(el("div", {class: "chain-head"},
    `conversation ${chain.contextId} · ${hops.length} task(s) · last change ${clock(last.at)}`));
  const row = el("div", {class: "chain-row"});  // a long chain scrolls in its own row
  wrap.append(row);
  const slots = slotsOf(hops);
  const index = new Map(slots.map((h, i) => [h.taskId, i]));
  // Room on the left only for an arrow from an agent not watched into the first box.
  const lead = slots[0].from && !index.has(slots[0].from.taskId) ? GAP : 0;
  const x = i => PAD + lead + i * (BOX_W + GAP);
  const width = PAD * 2 + lead + slots.length * BOX_W + (slots.length - 1) * GAP;
  const svg = el("svg:svg", {width, height: TOP + BOX_H + 34, role: "img"});
  const defs = el("svg:defs");
  for (const kind of ["handoff", "escalation", "return", "notice", "transfer"]) {
    const marker = el("svg:marker", {id: `head-${kind}`, viewBox: "0 0 10 10", refX: 9, refY: 5,
      markerWidth: 7, markerHeight: 7, orient: "auto-start-reverse"});
    marker.append(el("svg:path", {d: "M0,0 L10,5 L0,10 z",
      fill: getComputedStyle(document.documentElement).getPropertyValue("--" + kind).trim()}));
    defs.append(marker);
  }
  svg.append(defs);
  slots.forEach((hop, i) => { if (hop.from) drawArrow(svg, slots, index, i, x); });
  slots.forEach((hop, i) => drawBox(svg, hop, i, x));
  row.append(svg);
  return wrap;
}

// Where the operator left each chain's row (by conversation): null, at its newest end —
// where a row starts, and stays as the chain grows or the window narrows.
const scrolled = new Map();

function pin(row) {
  // The scroll event of a scroll made here arrives late (after a resize, even): only the
  // operator's own scrolling moves the pin.
  if (Math.abs(row.scrollLeft - (row.placed ?? -1)) < 1) return;
  const atEnd = row.scrollLeft + row.clientWidth >= row.scrollWidth - 2;
  scrolled.set(row.parentNode.dataset.context, atEnd ? null : row.scrollLeft);
}

function toPin(row) {
  const left = scrolled.get(row.parentNode.dataset.context);
  row.scrollLeft = left == null ? row.scrollWidth : left;
  row.placed = row.scrollLeft;
}

// A row that changes size (the window narrows or widens) keeps its place: its newest end.
const resized = new ResizeObserver(entries => entries.forEach(e => toPin(e.target)));

function drawChains(conversations) {
  const root = document.getElementById("chains");
  resized.disconnect();
  root.replaceChildren();
  if (!conversations.length) root.append(el("p", {class: "empty"}, "No conversation yet."));
  for (const chain of conversations) {
    const wrap = drawChain(chain);
    root.append(wrap);
    const row = wrap.querySelector(".chain-row");
    toPin(row);
    row.addEventListener("scroll", () => pin(row));
    resized.observe(row);
  }
}

function describeAction(item) {
  const a = item.action;
  return `${a.name} ${JSON.stringify(a.params || {})}${money(a.amount)} — ${item.actingAgent || "?"}`
    + " acts on it once approved";
}

const KEPT_ANSWERS = 5;  // the operator's last answers stay in view, their results with them

function drawInbox(items) {
  const key = items.map(i => i.taskId).join(",");
  if (key === inboxKey) return;
  inboxKey = key;
  const root = document.getElementById("inbox");
  // An answered escalation leaves the inbox as soon as the agent takes the answer: its card
  // (and what the answer came to) is kept, not wiped by the redraw.
  const answered = [...root.querySelectorAll(".item.answered")].slice(-KEPT_ANSWERS);
  root.replaceChildren(...answered);
  if (!items.length && !answered.length) {
    root.append(el("p", {class: "empty"}, "No escalation waiting."));
    return;
  }
  const kept = new Set(answered.map(card => card.dataset.task));
  for (const item of items.filter(i => !kept.has(i.taskId))) {
    const card = el("div", {class: "item", "data-task": item.taskId});
    card.append(el("h3", {}, `${item.source || "?"} asks: ${item.need || "a decision"}`
      + ` (${item.trigger || item.tier})`));
    const behalf = item.onBehalfOf  // whose task it is: the user the agent acted for
      ? [el("dt", {}, "On behalf of"), el("dd", {class: "user"}, item.onBehalfOf)] : [];
    const dl = el("dl");
    // What a decision binds first: the action (its fingerprint is what is signed) and the
    // agent that acts on it once approved.
    if (item.action) dl.append(el("dt", {}, "Action"), el("dd", {class: "action"}, describeAction(item)));
    else dl.append(el("dt", {}, "Goes back to"), el("dd", {}, item.actingAgent || item.source));
    dl.append(...behalf);
    dl.append(el("dt", {}, "What happened"), el("dd", {}, item.whatHappened));
    const tried = el("ul");
    for (const t of item.whatWasTried || []) tried.append(el("li", {}, t));
    const dd = el("dd"); dd.append(tried);
    dl.append(el("dt", {}, "What was tried"), dd);
    dl.append(el("dt", {}, "What is needed"), el("dd", {}, item.whatIsNeeded));
    card.append(dl);
    const text = el("textarea", {placeholder: "a note, or your reply", "aria-label": "note"});
    const actions = el("div", {class: "actions"});
    for (const [action, label] of [["approve", "Approve"], ["deny", "Deny"], ["reply", "Reply"]]) {
      const button = el("button", {type: "button", class: action}, label);
      button.addEventListener("click", () => answer(item, action, text.value, card));
      actions.append(button);
    }
    const result = el("div", {class: "result"});
    card.append(text, actions, result);
    root.append(card);
  }
}

async function answer(item, action, text, card) {
  const result = card.querySelector(".result");
  result.textContent = "sending…";
  const response = await fetch("/api/answer", {
    method: "POST", headers: {"Content-Type": "application/json", ...AUTH},
    body: JSON.stringify({agent: item.agentUrl, taskId: item.taskId, action, text}),
  });
  const body = await response.json();
  card.classList.add("answered");  // kept in view by the redraws that follow
  if (!card.isConnected) document.getElementById("inbox").prepend(card);
  if (!response.ok) {
    result.textContent = `refused: ${body.error}`;
  } else if (body.noted) {  // a reply to a permission: a note; the escalation still waits
    result.textContent = "noted: the escalation still waits for approve or deny";
  } else {
    result.textContent = `${body.verdict}: the decision goes back to ${item.source}`;
  }
}

// Agents watched whose tasks the console may not read (its key is no operator's there): why.
let unread = {};

function drawHealth(agents) {
  const root = document.getElementById("health");
  root.replaceChildren();
  unread = Object.fromEntries(agents.filter(a => a.unread).map(a => [a.name, a.unread]));
  for (const agent of agents) {
    const h = agent.health || {};
    const status = !agent.reachable ? "down" : (h.status || "healthy");
    const breakers = Object.entries(h.breakers || {}).filter(([, b]) => b.state !== "closed");
    const row = el("div", {class: "agent-health", "data-agent": agent.name, "data-status": status});
    const name = el("span");
    name.append(el("span", {class: `dot ${status}`}), document.createTextNode(agent.name));
    const facts = agent.unread ? agent.unread
      : !agent.reachable ? agent.error || "unreachable"
      : `${h.pendingHandoffs ?? 0} pending · ${h.stalePendingHandoffs ?? 0} stale · `
        + (breakers.length ? breakers.map(([k, b]) => `${k} ${b.state}`).join(", ")
                           : "breakers closed");
    row.append(name, el("span", {}, facts));
    root.append(row);
  }
}

function pre(value) { return el("pre", {}, JSON.stringify(value, null, 2)); }

// Structured data, readable: a summary line that opens onto the formatted JSON (wrapped).
function folded(summary, value) {
  const box = el("details", {class: "data"});
  box.append(el("summary", {}, summary), pre(value));
  return box;
}

function money(amount) {
  return typeof amount === "number"
    ? ` for $${amount.toLocaleString("en-US", {minimumFractionDigits: 2, maximumFractionDigits: 2})}`
    : "";
}

// An operator's decision, as a person reads it; the signed original folded beneath it.
function decisionView(decision) {
  const escalation = decision.escalation || {};
  const action = escalation.action;
  const claims = (decision.signed || {}).claims || {};
  const dl = el("dl", {class: "decision"});
  const row = (term, text, cls) => dl.append(el("dt", {}, term), el("dd", cls ? {class: cls} : {}, text));
  row("Verdict", decision.verdict || "?", `verdict ${decision.verdict || ""}`);
  row("By", `${decision.by || "?"}${decision.at ? " at " + decision.at : ""}`);
  if (decision.text) row("Note", decision.text);
  if (action) row("Action", `${action.name} ${JSON.stringify(action.params || {})}${money(action.amount)}`);
  if (escalation.whatIsNeeded) {
    const source = escalation.source || {};
    row("Answers", `${source.agent || "?"}'s escalation: ${escalation.whatIsNeeded}`);
  }
  if (claims.iss) {
    const expires = claims.exp ? new Date(claims.exp * 1000).toISOString() : "?";
    row("Signed", `by ${claims.iss} for ${claims.aud || "?"}, expires ${expires}`);
  }
  const box = el("div", {class: "decision-view"});
  box.append(dl, folded("the decision as signed (JSON)", decision));
  return box;
}

// One part of a message: text as text; data folded, a decision in it drawn once.
function partView(part, decisionShown) {
  if (part.text !== undefined) return el("div", {class: "text"}, part.text);
  const data = part.data ?? part;
  const keys = data && typeof data === "object" ? Object.keys(data) : [];
  const view = el("div");
  if (data && data.decision && !decisionShown) view.append(decisionView(data.decision));
  view.append(folded(`data: ${short(keys.join(", "), 60) || typeof data}`, data));
  return view;
}

async function openTask(hop) {
  selected = hop;
  document.querySelectorAll(".box.selected").forEach(b => b.classList.remove("selected"));
  document.querySelectorAll(`.box[data-task="${hop.taskId}"]`)
    .forEach(b => b.classList.add("selected"));
  const panel = document.getElementById("detail");
  const body = document.getElementById("detail-body");
  document.getElementById("detail-title").textContent = `${hop.agent} · task ${hop.taskId}`;
  body.replaceChildren(el("p", {}, "loading…"));
  panel.hidden = false;
  const response = await fetch(`/api/task?agent=${encodeURIComponent(hop.agentUrl)}`
                               + `&id=${encodeURIComponent(hop.taskId)}`, {headers: AUTH});
  const data = await response.json();
  body.replaceChildren();
  if (!response.ok) { body.append(el("p", {}, data.error)); return; }
  const task = data.task;
  body.append(el("p", {class: "state", "data-state": hop.state},
    `${hop.state} at ${task.status.timestamp || ""}`));
  const decision = ((data.envelope || {}).transferContext || {}).decision;
  if (decision) body.append(el("h3", {}, "Decision"), decisionView(decision));
  body.append(el("h3", {}, "History"));
  for (const m of task.history || []) {
    const div = el("div", {class: "msg"});
    div.append(el("div", {class: "role"}, m.role.replace("ROLE_", "").toLowerCase()));
    for (const part of m.parts || []) div.append(partView(part, Boolean(decision)));
    body.append(div);
  }
  body.append(el("h3", {}, "Artifacts"));
  body.append(task.artifacts ? pre(task.artifacts) : el("p", {class: "empty"}, "none"));
  body.append(el("h3", {}, "Handoff envelope (transfer context)"));
  body.append(data.envelope ? pre(data.envelope) : el("p", {class: "empty"},
    "none: this task was not handed over"));
  body.append(el("h3", {}, "Ledger rows"));
  body.append(data.ledger.length ? pre(data.ledger) : el("p", {class: "empty"}, "none"));
}

document.getElementById("detail-close").addEventListener("click", () => {
  document.getElementById("detail").hidden = true;
  selected = null;
  document.querySelectorAll(".box.selected").forEach(b => b.classList.remove("selected"));
});

function connect() {
  const live = document.getElementById("live");
  const source = new EventSource(`/api/events?token=${encodeURIComponent(TOKEN)}`);
  source.addEventListener("open", () => { live.textContent = "live"; live.classList.remove("off"); });
  source.addEventListener("error", () => { live.textContent = "reconnecting…"; live.classList.add("off"); });
  source.addEventListener("snapshot", event => {
    const snapshot = JSON.parse(event.data);
    drawHealth(snapshot.agents);  // first: the chains' stand-in boxes say why from it
    drawChains(snapshot.conversations);
    drawInbox(snapshot.inbox);
    document.body.dataset.version = String(Number(document.body.dataset.version || 0) + 1);
  });
}

connect();
