// The README, rendered by vendored, unmodified libraries (licences: ../third_party/):
// marked 17.0.6 (MIT) parses, DOMPurify 3.4.18 (Apache-2.0 OR MPL-2.0) sanitizes. Two layers:
// marked shows raw HTML as text and turns images into links (nothing is fetched from another
// host); DOMPurify keeps only the tags and attributes below and http(s)/mailto/relative links.
import { Marked } from "./vendor/marked.esm.js";

const DOMPurify = globalThis.DOMPurify; // vendor/purify.min.js, a classic script loaded first
const ESC = { "&": "&amp;", "<": "&lt;", ">": "&gt;", '"': "&quot;", "'": "&#39;" };
const esc = (text) => String(text).replace(/[&<>"']/g, (c) => ESC[c]);

const PURIFY = {
  ALLOWED_TAGS: ["h1", "h2", "h3", "h4", "h5", "h6", "p", "br", "hr", "a", "strong", "em", "del", "code",
    "pre", "blockquote", "ul", "ol", "li", "input", "table", "thead", "tbody", "tr", "th", "td"],
  ALLOWED_ATTR: ["href", "title", "start", "type", "checked", "disabled", "align", "class"],
  // a scheme other than http(s) or mailto is refused; no scheme is a relative link
  ALLOWED_URI_REGEXP: /^(?:(?:https?|mailto):|[^a-z]|[a-z0-9+.-]+(?:[^a-z0-9+.\-:]|$))/i,
  RETURN_DOM_FRAGMENT: true,
};

const marked = new Marked({
  gfm: true,
  async: false,
  renderer: {
    html: ({ text }) => esc(text),
    image: ({ href, text }) => `<a href="${esc(href)}">${esc(text || "image")} (image)</a>`,
  },
});

DOMPurify?.addHook("afterSanitizeAttributes", (node) => {
  if (node.nodeName === "A" && /^(https?|mailto):/i.test(node.getAttribute("href") || "")) {
    node.setAttribute("target", "_blank");
    node.setAttribute("rel", "noopener noreferrer");
  }
  if (node.nodeName === "INPUT") {
    node.setAttribute("type", "checkbox");
    node.setAttribute("disabled", "");
  }
  if (!/^language-[\w+#.-]+$/.test(node.getAttribute("class") ?? "language-x")) node.removeAttribute("class");
});

/** Markdown text -> a sanitized DOM node; plain text if the sanitizer did not load. */
export function renderMarkdown(source) {
  const text = String(source || "")
    .replace(/\r\n?/g, "\n")
    .replace(/^---\n[\s\S]*?\n---[ \t]*(\n|$)/, "") // front matter (Space cards): configuration
    .replace(/<!--[\s\S]*?-->/g, ""); // comments are invisible on GitHub and the Hub too
  if (!DOMPurify) return Object.assign(document.createElement("pre"), { textContent: text });
  const fragment = DOMPurify.sanitize(marked.parse(text), PURIFY);
  for (const table of fragment.querySelectorAll("table")) {
    const wrap = Object.assign(document.createElement("div"), { className: "table-wrap" });
    table.replaceWith(wrap);
    wrap.append(table);
  }
  for (const box of fragment.querySelectorAll("li > input:first-child")) box.parentElement.classList.add("task");
  return fragment;
}
