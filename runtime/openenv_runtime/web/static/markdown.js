// An environment's README, rendered by vetted libraries (vendored, unmodified, in vendor/):
//   marked 18.2.1 (MIT; the CommonMark + GitHub-flavoured parser)       vendor/marked.esm.js
//   DOMPurify 3.4.18 (Apache-2.0 OR MPL-2.0; the HTML sanitizer)        vendor/purify.min.js
// Their licence texts are in openenv_runtime/web/third_party/ (not served).
//
// Two independent layers, so that neither the parser nor the sanitizer alone holds the
// line: marked's renderer shows raw HTML as text and turns images into links (the page
// never loads anything from another host); DOMPurify then keeps only the tags and
// attributes below, and only http(s), mailto, anchor and relative link targets. The
// result is a DOM fragment, never an HTML string assigned to innerHTML by the caller.

import { Marked } from "./vendor/marked.esm.js";

// vendor/purify.min.js is a classic script (index.html loads it before this module)
const DOMPurify = globalThis.DOMPurify;

const ESCAPES = { "&": "&amp;", "<": "&lt;", ">": "&gt;", '"': "&quot;", "'": "&#39;" };
const escapeHtml = (text) => String(text).replace(/[&<>"']/g, (c) => ESCAPES[c]);

const ALLOWED_TAGS = [
  "h1", "h2", "h3", "h4", "h5", "h6", "p", "br", "hr", "a", "strong", "em", "del", "code", "pre",
  "blockquote", "ul", "ol", "li", "input", "table", "thead", "tbody", "tr", "th", "td",
];
const ALLOWED_ATTR = ["href", "title", "start", "type", "checked", "disabled", "align", "class"];
// a scheme other than http, https or mailto is refused; scheme-less targets are relative
const ALLOWED_URI_REGEXP = /^(?:(?:https?|mailto):|[^a-z]|[a-z0-9+.-]+(?:[^a-z0-9+.\-:]|$))/i;

const marked = new Marked({
  gfm: true,
  async: false,
  renderer: {
    html: ({ text }) => escapeHtml(text),
    image: ({ href, text }) => `<a href="${escapeHtml(href)}">${escapeHtml(text || "image")} (image)</a>`,
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
  if (node.hasAttribute("class") && !/^language-[\w+#.-]+$/.test(node.getAttribute("class"))) {
    node.removeAttribute("class"); // only a code block's language survives
  }
});

/** Markdown text -> a sanitized DOM node (a DocumentFragment). */
export function renderMarkdown(source) {
  let text = String(source || "").replace(/\r\n?/g, "\n");
  // YAML front matter (Hugging Face Space cards) is configuration, not prose
  text = text.replace(/^---\n[\s\S]*?\n---[ \t]*(\n|$)/, "");
  // HTML comments are invisible on GitHub and the Hub too
  text = text.replace(/<!--[\s\S]*?-->/g, "");
  if (!DOMPurify) {
    // fail closed: without the sanitizer the README shows as plain text
    const pre = document.createElement("pre");
    pre.textContent = text;
    return pre;
  }
  const fragment = DOMPurify.sanitize(marked.parse(text), {
    ALLOWED_TAGS,
    ALLOWED_ATTR,
    ALLOWED_URI_REGEXP,
    RETURN_DOM_FRAGMENT: true,
  });
  for (const table of fragment.querySelectorAll("table")) {
    const wrap = document.createElement("div");
    wrap.className = "table-wrap";
    table.replaceWith(wrap);
    wrap.append(table);
  }
  for (const box of fragment.querySelectorAll("li > input:first-child")) box.parentElement.classList.add("task");
  return fragment;
}
