// Talking to the server: HTTP info routes, the access token, and one /ws session.
//
// Every address is built relative to the page (served at <base>/web/), so the page works
// under a base path and over https (wss) as well as on localhost. The token is never in a
// URL (URLs get logged): HTTP sends `Authorization: Bearer`, the WebSocket the subprotocols
// ["openenv", "openenv.bearer.<unpadded base64url>"] (the server selects "openenv").

const TOKEN_KEY = "openenv.token";

export const token = {
  get: () => {
    try {
      return sessionStorage.getItem(TOKEN_KEY) || "";
    } catch {
      return "";
    }
  },
  set: (value) => {
    try {
      if (value) sessionStorage.setItem(TOKEN_KEY, value);
      else sessionStorage.removeItem(TOKEN_KEY);
    } catch {
      /* storage disabled: the token lives until the page is closed */
    }
  },
};

export function httpUrl(route) {
  return new URL(`../${route}`, window.location.href).href;
}

export function wsUrl() {
  const url = new URL("../ws", window.location.href);
  url.protocol = url.protocol === "https:" ? "wss:" : "ws:";
  url.hash = "";
  url.search = "";
  return url.href;
}

/** The WebSocket subprotocols that carry `accessToken` (none without a token). */
export function wsProtocols(accessToken) {
  if (!accessToken) return [];
  const bytes = new TextEncoder().encode(accessToken);
  const base64 = btoa(Array.from(bytes, (b) => String.fromCharCode(b)).join(""));
  const base64url = base64.replace(/\+/g, "-").replace(/\//g, "_").replace(/=+$/, "");
  return ["openenv", `openenv.bearer.${base64url}`];
}

export class Unauthorized extends Error {}

/** GET a JSON route; throws Unauthorized on 401. */
export async function getJson(route, { auth = true } = {}) {
  const headers = { Accept: "application/json" };
  const t = token.get();
  if (auth && t) headers.Authorization = `Bearer ${t}`;
  const response = await fetch(httpUrl(route), { headers, cache: "no-store", credentials: "same-origin" });
  if (response.status === 401) throw new Unauthorized(`${route}: token required`);
  if (!response.ok) throw new Error(`${route} answered HTTP ${response.status}`);
  return response.json();
}

/** Why a session ended, for the page to explain. */
export class SessionEnd extends Error {
  constructor(reason, message, detail = {}) {
    super(message);
    this.reason = reason; // "full" | "unauthorized" | "failed" | "dropped" | "server-closed" | "closed" | "factory"
    this.detail = detail;
  }
}

/**
 * One WebSocket session. Requests are answered in order (the protocol answers every
 * request except close exactly once), so pending requests form a queue.
 *   session.onend = (SessionEnd) => ...   called once when the session is over
 */
export class Session {
  constructor() {
    this.ws = null;
    this.pending = [];
    this.opened = false;
    this.ended = null;
    this.onend = null;
  }

  get isOpen() {
    return this.ws !== null && this.ws.readyState === WebSocket.OPEN && !this.ended;
  }

  connect() {
    return new Promise((resolve, reject) => {
      let ws;
      try {
        ws = new WebSocket(wsUrl(), wsProtocols(token.get()));
      } catch (err) {
        reject(new SessionEnd("failed", `Could not open a WebSocket: ${err.message}`));
        return;
      }
      this.ws = ws;
      let settled = false;
      ws.addEventListener("open", () => {
        this.opened = true;
        settled = true;
        resolve(this);
      });
      ws.addEventListener("message", (event) => this._message(event));
      ws.addEventListener("close", (event) => {
        const end = this.ended || this._classify(event);
        this._end(end);
        if (!settled) {
          settled = true;
          reject(end);
        }
      });
    });
  }

  _classify(event) {
    const code = event.code;
    if (!this.opened) {
      // the handshake was refused (e.g. 403 without a valid token) or nothing answered
      return new SessionEnd("failed", "The server refused the WebSocket connection.", { code });
    }
    if (code === 1013) return new SessionEnd("full", "The server is at capacity.", { code });
    if (code === 1008) return new SessionEnd("unauthorized", "The server refused the token.", { code });
    if (code === 1000 && this.closing) return new SessionEnd("closed", "Session closed.", { code });
    if (code === 1000 || code === 1001 || code === 1012) {
      return new SessionEnd("server-closed", event.reason || "The server ended the session.", { code });
    }
    return new SessionEnd("dropped", "The connection to the server was lost.", { code });
  }

  _message(event) {
    let msg;
    try {
      msg = JSON.parse(event.data);
    } catch {
      return;
    }
    const code = msg && msg.type === "error" && msg.data ? msg.data.code : null;
    // Sent on their own, before any request: the session cannot start.
    if (code === "CAPACITY_REACHED") {
      this.ended = new SessionEnd("full", msg.data.message || "The server is at capacity.", msg.data);
      return;
    }
    if (code === "FACTORY_ERROR") {
      this.ended = new SessionEnd("factory", msg.data.message || "Creating the environment failed.", msg.data);
      return;
    }
    const waiter = this.pending.shift();
    if (waiter) waiter.resolve({ ...msg, latency: performance.now() - waiter.sentAt });
  }

  _end(end) {
    if (this.finished) return;
    this.finished = true;
    this.ended = end;
    for (const waiter of this.pending.splice(0)) waiter.reject(end);
    if (this.onend) this.onend(end);
  }

  /** Send one request; resolves with the reply ({type, data, latency}). */
  request(type, data) {
    if (!this.isOpen) return Promise.reject(this.ended || new SessionEnd("closed", "Not connected."));
    return new Promise((resolve, reject) => {
      const message = data === undefined ? { type } : { type, data };
      this.pending.push({ resolve, reject, sentAt: performance.now() });
      this.ws.send(JSON.stringify(message));
    });
  }

  /** End the session and free its slot on the server. */
  close() {
    if (!this.ws) return;
    this.closing = true;
    if (this.ws.readyState === WebSocket.OPEN) {
      try {
        this.ws.send(JSON.stringify({ type: "close" }));
      } catch {
        /* already closing */
      }
    }
    this.ws.close(1000);
  }
}
