// The page: loads /metadata and /schema, builds the action form, and drives the
// environment through its own /ws session (opened on the first Reset, Step or State).

import { FieldError, buildForm, h, placeError } from "./form.js";
import { renderMarkdown } from "./markdown.js";
import { Session, SessionEnd, Unauthorized, getJson, token } from "./session.js";

const $ = (id) => document.getElementById(id);
const HEALTH_EVERY_MS = 10_000;
const HIGHLIGHT_LIMIT = 200_000;
const SHOWN_JSON_LIMIT = 1_000_000; // characters laid out in a JSON view; past it, a cut and a note
const MAX_ROWS = 300; // rows kept in the table; the download has every step
const MAX_FRAME_PIXELS = 4_000_000; // a larger `frame` is left to the JSON view

const page = {
  meta: null,
  schema: null,
  form: null,
  session: null,
  connecting: null,
  busy: false,
  health: null,
  episode: newEpisode(null),
  viewing: null, // index in episode.entries shown in the observation card, null = latest
  selectedRow: null,
  firstRow: 0, // index in episode.entries of the table's first row
};

function newEpisode(seed) {
  return { seed, startedAt: new Date().toISOString(), episodeId: null, entries: [] };
}

// ---------------------------------------------------------------- status and banner

function setStatus(state, text) {
  const pill = $("conn-status");
  pill.dataset.state = state;
  pill.textContent = text;
  const open = page.session && page.session.isOpen;
  $("connect-btn").textContent = open ? "Disconnect" : "Connect";
  $("connect-btn").setAttribute("aria-label", open ? "Disconnect (frees this page's session on the server)" : "Connect (opens a session)");
}

function showBanner(kind, title, message, actionLabel, action) {
  const banner = $("banner");
  banner.dataset.kind = kind;
  $("banner-title").textContent = title;
  $("banner-message").textContent = message;
  const button = $("banner-action");
  button.textContent = actionLabel;
  button.onclick = action;
  button.hidden = !action;
  banner.hidden = false;
}

function hideBanner() {
  $("banner").hidden = true;
}

function renderCapacity() {
  const el = $("capacity");
  const health = page.health;
  if (!health) {
    el.textContent = "Server unreachable";
    el.dataset.state = "down";
    return;
  }
  const active = health.active_sessions;
  const max = health.max_sessions;
  if (typeof active !== "number" || typeof max !== "number") {
    el.textContent = health.status === "healthy" ? "Server healthy" : `Server: ${health.status}`;
    return;
  }
  el.textContent = `Sessions ${active} / ${max}`;
  el.dataset.state = active >= max ? "full" : "ok";
  el.title = `${active} of ${max} sessions in use on this server (all clients, this page included when connected)`;
}

async function refreshHealth() {
  try {
    page.health = await getJson("health", { auth: false });
  } catch {
    page.health = null;
  }
  renderCapacity();
  return page.health;
}

// ---------------------------------------------------------------- the session

function ensureSession() {
  if (page.session && page.session.isOpen) return Promise.resolve(page.session);
  if (page.connecting) return page.connecting;
  hideBanner();
  setStatus("connecting", "Connecting…");
  const session = new Session();
  session.onend = (end) => sessionEnded(session, end);
  page.connecting = session
    .connect()
    .then(() => {
      page.session = session;
      if (session.isOpen) setStatus("connected", "Connected");
      refreshHealth();
      return session;
    })
    .finally(() => {
      page.connecting = null;
    });
  return page.connecting;
}

function disconnect() {
  if (page.session) page.session.close();
}

function reconnect() {
  hideBanner();
  ensureSession().catch(() => {
    /* sessionEnded explains */
  });
}

async function sessionEnded(session, end) {
  if (page.session === session) page.session = null;
  const health = await refreshHealth();
  const lost = page.episode.entries.length ? " The episode on the server has ended; its history stays here." : "";
  switch (end.reason) {
    case "closed":
      setStatus("idle", "Not connected");
      break;
    case "full": {
      setStatus("full", "Server full");
      const active = end.detail.active_sessions ?? (health && health.active_sessions);
      const max = end.detail.max_sessions ?? (health && health.max_sessions);
      const count = typeof max === "number" ? ` All ${max} session${max === 1 ? " is" : "s are"} in use${typeof active === "number" && active !== max ? ` (${active} active)` : ""}.` : "";
      showBanner("warn", "The server is full.", `${count} Another client is using this environment; try again when it disconnects (or raise MAX_CONCURRENT_ENVS on the server).`, "Try again", reconnect);
      break;
    }
    case "factory":
      setStatus("error", "Error");
      showBanner("error", "The environment could not be created.", end.message, "Try again", reconnect);
      break;
    case "unauthorized":
    case "failed": {
      setStatus("error", "Not connected");
      if (await tokenRefused()) return;
      const why = health ? "The server refused the WebSocket connection." : "The server does not answer.";
      showBanner("error", "Could not connect.", `${why} Check that it is running, then reconnect.`, "Reconnect", reconnect);
      break;
    }
    case "server-closed":
      setStatus("dropped", "Session ended");
      showBanner("warn", "The server ended this session.", `${end.message ? `${end.message}. ` : ""}Sessions left idle are closed after a while.${lost} Reconnect to start a new one.`, "Reconnect", reconnect);
      break;
    default:
      setStatus("dropped", "Disconnected");
      showBanner("error", "The connection dropped.", `The link to the server was lost${end.detail.code ? ` (code ${end.detail.code})` : ""}.${lost} Reconnect, then press Reset.`, "Reconnect", reconnect);
  }
}

/** After a refused WebSocket: was it the token? Then ask for a new one. */
async function tokenRefused() {
  try {
    await getJson("schema");
    return false;
  } catch (err) {
    if (!(err instanceof Unauthorized)) return false;
  }
  token.set("");
  await askToken("The server refused the token; enter it again.");
  reconnect();
  return true;
}

// ---------------------------------------------------------------- requests

async function run(label, work) {
  if (page.busy) return;
  page.busy = true;
  const started = performance.now();
  const busy = $("busy");
  const timer = setInterval(() => {
    const secs = (performance.now() - started) / 1000;
    if (secs > 0.3) busy.textContent = `${label}… ${secs.toFixed(1)} s`;
  }, 100);
  $("app").setAttribute("aria-busy", "true");
  try {
    const session = await ensureSession();
    await work(session);
  } catch (err) {
    if (err instanceof SessionEnd || err instanceof FieldError) return; // already shown
    showExecError("Error", err && err.message ? err.message : String(err));
  } finally {
    clearInterval(timer);
    busy.textContent = "";
    page.busy = false;
    $("app").setAttribute("aria-busy", "false");
  }
}

function showExecError(code, message) {
  const box = $("exec-error");
  box.replaceChildren(h("strong", { text: code }), " ", h("span", { text: message }));
  box.hidden = false;
}

function clearExecError() {
  $("exec-error").hidden = true;
}

function replyError(reply) {
  const data = reply.data || {};
  showExecError(data.code || "ERROR", data.message || "The server answered with an error.");
}

function readSeed() {
  const input = $("seed");
  const raw = input.value.trim();
  input.removeAttribute("aria-invalid");
  if (raw === "") return { ok: true, seed: null };
  const seed = Number(raw);
  if (!Number.isInteger(seed) || input.validity.badInput) {
    input.setAttribute("aria-invalid", "true");
    showExecError("Seed", "The seed must be a whole number (or empty).");
    input.focus();
    return { ok: false };
  }
  return { ok: true, seed };
}

function doReset() {
  const { ok, seed } = readSeed();
  if (!ok) return;
  run("Resetting", async (session) => {
    const reply = await session.request("reset", seed === null ? {} : { seed });
    if (reply.type !== "observation") return replyError(reply);
    clearExecError();
    page.episode = newEpisode(seed);
    addEntry({ kind: "reset", action: seed === null ? {} : { seed }, reply });
  });
}

function doStep() {
  if (!page.form) return;
  page.form.clearErrors();
  $("form-error").hidden = true;
  let action;
  try {
    action = page.form.get();
  } catch (err) {
    if (!(err instanceof FieldError)) throw err;
    formError("Fix the highlighted field before stepping.");
    focusFirstInvalid();
    return;
  }
  run("Stepping", async (session) => {
    const reply = await session.request("step", action);
    if (reply.type === "observation") {
      clearExecError();
      addEntry({ kind: "step", action, reply });
      return;
    }
    const data = reply.data || {};
    if (data.code === "VALIDATION_ERROR" && Array.isArray(data.errors)) {
      showValidation(data);
      return;
    }
    replyError(reply);
  });
}

function doState() {
  run("Reading state", async (session) => {
    const reply = await session.request("state");
    if (reply.type !== "state") return replyError(reply);
    clearExecError();
    if (reply.data && reply.data.episode_id) page.episode.episodeId = reply.data.episode_id;
    $("state-card").hidden = false;
    renderJson($("state-json"), reply.data);
    $("state-time").textContent = `at ${new Date().toLocaleTimeString()} · ${Math.round(reply.latency)} ms`;
  });
}

function formError(text) {
  const box = $("form-error");
  box.textContent = text;
  box.hidden = false;
}

function focusFirstInvalid() {
  const first = $("action-form").querySelector("[aria-invalid='true'], .invalid input, .invalid select, .invalid textarea, .invalid button");
  if (first) {
    if (first.closest("#advanced")) $("advanced").open = true;
    first.focus();
  }
}

/** A VALIDATION_ERROR: each error beside the field its `loc` names. */
function showValidation(data) {
  const unplaced = [];
  for (const e of data.errors) {
    const loc = Array.isArray(e.loc) ? e.loc : [];
    const message = e.msg || "Invalid value.";
    if (!placeError(page.form, loc, message)) unplaced.push(loc.length ? `${loc.join(".")}: ${message}` : message);
  }
  const summary = `The server rejected this action${data.errors.length > 1 ? ` (${data.errors.length} problems)` : ""}.`;
  formError(unplaced.length ? `${summary} ${unplaced.join("; ")}` : summary);
  focusFirstInvalid();
}

// ---------------------------------------------------------------- observation and history

function addEntry({ kind, action, reply }) {
  const episode = page.episode;
  const steps = episode.entries.filter((e) => e.kind === "step").length;
  const data = reply.data || {};
  episode.entries.push({
    step: kind === "reset" ? 0 : steps + 1,
    kind,
    action,
    observation: data.observation,
    reward: data.reward ?? null,
    done: Boolean(data.done),
    latency_ms: Math.round(reply.latency * 10) / 10,
    at: new Date().toISOString(),
  });
  page.viewing = null;
  renderHistory(kind === "step");
  renderObservation();
}

function numeric(reward) {
  if (typeof reward === "number") return reward;
  if (typeof reward === "boolean") return reward ? 1 : 0;
  return 0;
}

function cumulative(entries) {
  return entries.filter((e) => e.kind === "step").reduce((sum, e) => sum + numeric(e.reward), 0);
}

function fmt(value) {
  if (value === null || value === undefined) return "–";
  if (typeof value === "number") return Number.isInteger(value) ? String(value) : String(Number(value.toPrecision(6)));
  return String(value);
}

function renderObservation() {
  const entries = page.episode.entries;
  const index = page.viewing ?? entries.length - 1;
  const entry = entries[index];
  const source = $("obs-source");
  source.replaceChildren();
  if (!entry) return;
  const latest = index === entries.length - 1;
  source.append(entry.kind === "reset" ? "after reset" : `after step ${entry.step}`);
  if (!latest) {
    source.append(" · ", h("button", { type: "button", class: "link", text: "show latest", onclick: () => showEntry(Infinity) }));
  }
  const reward = $("stat-reward");
  reward.textContent = fmt(entry.reward);
  reward.dataset.sign = typeof entry.reward === "number" ? Math.sign(entry.reward) : "";
  const done = $("stat-done");
  done.textContent = entry.done ? "Yes" : "No";
  done.dataset.done = String(entry.done);
  $("stat-step").textContent = String(entry.step);
  $("stat-return").textContent = fmt(cumulative(entries.slice(0, index + 1)));
  drawFrame($("obs-frame"), entry.observation && entry.observation.frame);
  renderJson($("obs-json"), entry.observation);
  $("copy-obs").disabled = false;
}

/** An observation's `frame` (height × width × RGB(A) integers, as Gymnasium's rgb_array
 * render gives it) drawn on the canvas; anything else hides the canvas. */
function drawFrame(canvas, frame) {
  const rows = Array.isArray(frame) ? frame.length : 0;
  const cols = rows && Array.isArray(frame[0]) ? frame[0].length : 0;
  if (!rows || !cols || !Array.isArray(frame[0][0]) || rows * cols > MAX_FRAME_PIXELS) {
    canvas.hidden = true;
    return;
  }
  canvas.width = cols;
  canvas.height = rows;
  const image = canvas.getContext("2d").createImageData(cols, rows);
  let at = 0;
  for (const row of frame) {
    for (let x = 0; x < cols; x++) {
      const pixel = (row && row[x]) || [];
      image.data[at] = pixel[0] | 0;
      image.data[at + 1] = pixel[1] | 0;
      image.data[at + 2] = pixel[2] | 0;
      image.data[at + 3] = pixel.length > 3 ? pixel[3] | 0 : 255;
      at += 4;
    }
  }
  canvas.getContext("2d").putImageData(image, 0, 0);
  canvas.hidden = false;
}

function historyRow(e, i) {
  const actionText = e.kind === "reset" ? (e.action.seed !== undefined ? `reset (seed ${e.action.seed})` : "reset") : oneLine(e.action);
  const view = h("button", {
    type: "button",
    class: "link",
    text: String(e.step),
    "aria-label": `Show the observation ${e.kind === "reset" ? "after reset" : `of step ${e.step}`}`,
    onclick: () => showEntry(i),
  });
  return h(
    "tr",
    { class: [e.kind, e.done ? "done" : ""].join(" ").trim() },
    h("td", { class: "num" }, view),
    h("td", { class: "action mono", title: actionText }, h("span", { text: actionText })),
    h("td", { class: "num", "data-sign": typeof e.reward === "number" ? Math.sign(e.reward) : "", text: fmt(e.reward) }),
    h("td", { text: e.done ? "done" : "–", class: e.done ? "done-cell" : "" }),
    h("td", { class: "num muted", text: `${e.latency_ms.toFixed(1)} ms` }),
  );
}

function showEntry(index) {
  page.viewing = index >= page.episode.entries.length - 1 ? null : index;
  renderObservation();
  markSelected();
}

/** Highlight the row whose observation is shown (touches two rows, not the whole table). */
function markSelected() {
  const entries = page.episode.entries;
  const row = $("history-body").rows[(page.viewing ?? entries.length - 1) - page.firstRow];
  if (page.selectedRow && page.selectedRow !== row) {
    page.selectedRow.classList.remove("selected");
    page.selectedRow.removeAttribute("aria-current");
  }
  page.selectedRow = entries.length ? row : null;
  if (page.selectedRow) {
    row.classList.add("selected");
    row.setAttribute("aria-current", "true");
  }
}

/** Rebuild the table (new episode), or append the newest entry to it. */
function renderHistory(appendOnly = false) {
  const entries = page.episode.entries;
  const body = $("history-body");
  if (appendOnly && entries.length > 1 && page.firstRow + body.rows.length === entries.length - 1) {
    body.append(historyRow(entries[entries.length - 1], entries.length - 1));
    if (body.rows.length > MAX_ROWS) {
      if (page.selectedRow === body.rows[0]) page.selectedRow = null;
      body.deleteRow(0);
      page.firstRow += 1;
    }
  } else {
    page.selectedRow = null;
    page.firstRow = Math.max(0, entries.length - MAX_ROWS);
    body.replaceChildren(...entries.slice(page.firstRow).map((e, i) => historyRow(e, i + page.firstRow)));
    if (!entries.length) body.append(h("tr", { class: "placeholder" }, h("td", { colspan: 5, text: "No steps yet." })));
  }
  if (page.viewing !== null && page.viewing < page.firstRow) page.viewing = null;
  markSelected();
  $("history-total").textContent = fmt(cumulative(entries));
  const steps = entries.length ? entries[entries.length - 1].step : 0;
  const parts = [`${steps} step${steps === 1 ? "" : "s"}`];
  if (page.episode.seed !== null) parts.push(`seed ${page.episode.seed}`);
  if (page.firstRow > 0) parts.push(`table shows the last ${MAX_ROWS}`);
  $("history-summary").textContent = entries.length ? parts.join(" · ") : "";
  $("download-btn").disabled = !entries.length;
  const wrap = body.closest(".history-wrap");
  if (page.viewing === null) wrap.scrollTop = wrap.scrollHeight;
}

/** JSON on one line, with a space after each comma and colon. */
function oneLine(value) {
  if (value === null || typeof value !== "object") return JSON.stringify(value) ?? "null";
  if (Array.isArray(value)) return `[${value.map(oneLine).join(", ")}]`;
  return `{${Object.entries(value).map(([k, v]) => `${JSON.stringify(k)}: ${oneLine(v)}`).join(", ")}}`;
}

/** JSON, indented, with short flat arrays and objects kept on one line ([4, 4]). */
function prettyJson(value, indent = "") {
  if (value === null || typeof value !== "object") return JSON.stringify(value) ?? "null";
  const isArray = Array.isArray(value);
  const items = isArray ? value.map((v) => [null, v]) : Object.entries(value);
  if (!items.length) return isArray ? "[]" : "{}";
  const [open, close] = isArray ? ["[", "]"] : ["{", "}"];
  const key = (k) => (k === null ? "" : `${JSON.stringify(k)}: `);
  if (items.every(([, v]) => v === null || typeof v !== "object")) {
    const flat = `${open}${items.map(([k, v]) => key(k) + JSON.stringify(v)).join(", ")}${close}`;
    if (flat.length + indent.length <= 76) return flat;
  }
  const inner = `${indent}  `;
  return `${open}\n${items.map(([k, v]) => inner + key(k) + prettyJson(v, inner)).join(",\n")}\n${indent}${close}`;
}

function renderJson(pre, value) {
  pre.replaceChildren();
  const text = prettyJson(value);
  if (text.length > SHOWN_JSON_LIMIT) {
    const more = (text.length - SHOWN_JSON_LIMIT).toLocaleString("en");
    pre.textContent = `${text.slice(0, SHOWN_JSON_LIMIT)}\n… ${more} more characters (Copy JSON or Download JSON has it whole)`;
    return;
  }
  if (text.length > HIGHLIGHT_LIMIT) {
    pre.textContent = text;
    return;
  }
  const token = /("(?:\\.|[^"\\])*")(\s*:)?|\b(true|false)\b|\bnull\b|-?\d+(?:\.\d+)?(?:[eE][+-]?\d+)?/g;
  let last = 0;
  for (const m of text.matchAll(token)) {
    pre.append(text.slice(last, m.index));
    const cls = m[1] ? (m[2] ? "j-key" : "j-str") : m[3] ? "j-bool" : m[0] === "null" ? "j-null" : "j-num";
    pre.append(h("span", { class: cls, text: m[1] || m[0] }));
    if (m[2]) pre.append(m[2]);
    last = m.index + m[0].length;
  }
  pre.append(text.slice(last));
}

function download() {
  const entries = page.episode.entries;
  const name = (page.meta && page.meta.name) || "environment";
  const payload = {
    environment: { name, version: page.meta ? page.meta.version : null },
    server: new URL("..", window.location.href).href,
    exported_at: new Date().toISOString(),
    episode: { seed: page.episode.seed, episode_id: page.episode.episodeId, started_at: page.episode.startedAt },
    cumulative_reward: cumulative(entries),
    steps: entries,
  };
  const blob = new Blob([JSON.stringify(payload, null, 2)], { type: "application/json" });
  const url = URL.createObjectURL(blob);
  const stamp = payload.exported_at.replace(/[:.]/g, "-").slice(0, 19);
  const a = h("a", { href: url, download: `${name.replace(/[^\w.-]+/g, "_")}-episode-${stamp}.json` });
  document.body.append(a);
  a.click();
  a.remove();
  setTimeout(() => URL.revokeObjectURL(url), 10_000);
}

async function copyObservation() {
  const button = $("copy-obs");
  try {
    await navigator.clipboard.writeText($("obs-json").textContent);
    button.textContent = "Copied";
  } catch {
    const range = document.createRange();
    range.selectNodeContents($("obs-json"));
    const sel = window.getSelection();
    sel.removeAllRanges();
    sel.addRange(range);
    button.textContent = "Selected";
  }
  setTimeout(() => (button.textContent = "Copy JSON"), 1500);
}

// ---------------------------------------------------------------- token

let tokenWaiters = [];

function askToken(message) {
  const dialog = $("token-dialog");
  const error = $("token-error");
  error.textContent = message || "";
  error.hidden = !message;
  $("token-input").setAttribute("aria-invalid", message ? "true" : "false");
  if (!dialog.open) dialog.showModal();
  $("token-input").focus();
  setStatus("auth", "Token needed");
  return new Promise((resolve) => tokenWaiters.push(resolve));
}

async function submitToken(event) {
  event.preventDefault();
  const input = $("token-input");
  const error = $("token-error");
  const value = input.value.trim();
  if (!value) {
    error.textContent = "Enter the token.";
    error.hidden = false;
    return;
  }
  token.set(value);
  try {
    await getJson("schema");
  } catch (err) {
    token.set("");
    error.textContent = err instanceof Unauthorized ? "The server refused this token." : `Could not check the token: ${err.message}`;
    error.hidden = false;
    input.setAttribute("aria-invalid", "true");
    input.select();
    return;
  }
  input.value = "";
  $("token-dialog").close();
  $("token-btn").hidden = false;
  setStatus("idle", "Not connected");
  const waiters = tokenWaiters;
  tokenWaiters = [];
  waiters.forEach((resolve) => resolve());
}

function forgetToken() {
  token.set("");
  disconnect();
  window.location.reload();
}

// ---------------------------------------------------------------- loading

async function loadInfo() {
  for (;;) {
    try {
      const [meta, schema] = await Promise.all([getJson("metadata"), getJson("schema")]);
      return { meta, schema };
    } catch (err) {
      if (!(err instanceof Unauthorized)) throw err;
      const had = Boolean(token.get());
      token.set("");
      await askToken(had ? "The saved token was refused; enter it again." : null);
    }
  }
}

function buildActionForm() {
  const fields = $("fields");
  const advanced = $("advanced-fields");
  fields.replaceChildren();
  advanced.replaceChildren();
  const action = page.schema.action || {};
  page.form = buildForm(action, fields, advanced);
  $("advanced").hidden = page.form.advancedKeys.length === 0;
  if (page.form.fields.size === page.form.advancedKeys.length) {
    fields.append(h("p", { class: "muted", text: "This action has no fields: Step sends an empty action." }));
  }
}

function renderInfo() {
  const { meta, schema } = page;
  const name = meta.name || "Environment";
  document.title = `${name} · OpenEnv`;
  $("env-name").textContent = name;
  $("env-desc").textContent = meta.description || "";
  $("footer-version").textContent = [meta.version ? `${name} ${meta.version}` : name, page.health && page.health.runtime_version ? `openenv-runtime ${page.health.runtime_version}` : null].filter(Boolean).join(" · ");
  $("action-name").textContent = (schema.action && schema.action.title) || "";
  const desc = schema.action && schema.action.description;
  $("action-desc").textContent = desc || "";
  $("action-desc").hidden = !desc;
  const readme = meta.readme_content;
  if (readme && readme.trim()) $("readme").replaceChildren(renderMarkdown(readme));
  else $("readme").replaceChildren(h("p", { class: "muted", text: "This environment has no README." }));
  buildActionForm();
}

function wire() {
  $("reset-form").addEventListener("submit", (e) => {
    e.preventDefault();
    doReset();
  });
  $("state-btn").addEventListener("click", doState);
  $("action-form").addEventListener("submit", (e) => {
    e.preventDefault();
    doStep();
  });
  $("action-form").addEventListener("keydown", (e) => {
    if (e.key !== "Enter" || e.isComposing || e.shiftKey || e.altKey) return;
    const tag = e.target.tagName;
    if (tag === "TEXTAREA") {
      if (!(e.ctrlKey || e.metaKey)) return;
    } else if (tag !== "INPUT" && tag !== "SELECT") {
      return;
    }
    e.preventDefault();
    doStep();
  });
  $("defaults-btn").addEventListener("click", () => {
    $("form-error").hidden = true;
    buildActionForm();
  });
  $("connect-btn").addEventListener("click", () => (page.session && page.session.isOpen ? disconnect() : reconnect()));
  $("token-btn").addEventListener("click", forgetToken);
  $("token-form").addEventListener("submit", submitToken);
  $("token-dialog").addEventListener("cancel", (e) => e.preventDefault()); // nothing works without it
  $("download-btn").addEventListener("click", download);
  $("copy-obs").addEventListener("click", copyObservation);
  window.addEventListener("pagehide", disconnect);
  setInterval(() => {
    if (document.visibilityState === "visible") refreshHealth();
  }, HEALTH_EVERY_MS);
}

async function main() {
  wire();
  const health = await refreshHealth();
  if (health && health.auth_required === true && !token.get()) await askToken(null);
  try {
    const info = await loadInfo();
    page.meta = info.meta;
    page.schema = info.schema;
  } catch (err) {
    setStatus("error", "Unavailable");
    showBanner("error", "Could not load the environment.", `${err.message}. Is the server running?`, "Retry", () => window.location.reload());
    return;
  }
  if (token.get()) $("token-btn").hidden = false;
  renderInfo();
  setStatus("idle", "Not connected");
  $("app").setAttribute("aria-busy", "false");
  document.body.dataset.ready = "true";
}

main();
