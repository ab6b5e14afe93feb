// A small Markdown renderer for an environment's README.
//
// Safe by construction: the whole text is HTML-escaped before any markup is produced, so
// raw HTML in the README shows as text; link targets are limited to http(s), mailto,
// anchors and relative paths; images become plain links, so the page never loads anything
// from another host. Covers what READMEs use: front matter (dropped), headings,
// paragraphs, emphasis, code spans and fenced code, lists (nested by indentation),
// block quotes, tables, rules, links.

const ESCAPES = { "&": "&amp;", "<": "&lt;", ">": "&gt;", '"': "&quot;", "'": "&#39;" };

export function escapeHtml(text) {
  return String(text).replace(/[&<>"']/g, (c) => ESCAPES[c]);
}

/** A safe href from escaped text, or null. */
function safeHref(escaped) {
  // Browsers drop tabs, newlines and leading control characters from URLs: do the same
  // before looking at the scheme.
  const url = escaped.replace(/[\u0000-\u0020\u007f]/g, "");
  const scheme = /^([a-z][a-z0-9+.-]*):/i.exec(url);
  if (scheme && !["http", "https", "mailto"].includes(scheme[1].toLowerCase())) return null;
  return url;
}

function inline(text) {
  const stash = [];
  const keep = (html) => `\u0000${stash.push(html) - 1}\u0000`;
  let out = text
    .replace(/(`+)([\s\S]*?[^`])\1(?!`)/g, (_, __, code) => keep(`<code>${code.trim()}</code>`))
    .replace(/!\[([^\]]*)\]\(\s*([^)\s]+)(?:\s+&quot;[^)]*?&quot;)?\s*\)/g, (_, alt, url) => {
      const href = safeHref(url);
      const label = `${alt || "image"} (image)`;
      return keep(href ? `<a href="${href}" target="_blank" rel="noopener noreferrer">${label}</a>` : label);
    })
    .replace(/\[([^\]]+)\]\(\s*([^)\s]+)(?:\s+&quot;([^)]*?)&quot;)?\s*\)/g, (_, label, url, title) => {
      const href = safeHref(url);
      if (!href) return label;
      const t = title ? ` title="${title}"` : "";
      const external = /^(https?:|mailto:)/i.test(href) ? ' target="_blank" rel="noopener noreferrer"' : "";
      return keep(`<a href="${href}"${t}${external}>${label}</a>`);
    })
    .replace(/&lt;(https?:\/\/[^\s&]+?)&gt;/g, (_, url) => keep(`<a href="${url}" target="_blank" rel="noopener noreferrer">${url}</a>`));
  out = out
    .replace(/(\*\*|__)(?=\S)([\s\S]*?\S)\1/g, "<strong>$2</strong>")
    .replace(/(^|[^*\w])\*(?=\S)([^*]*?\S)\*(?!\*)/g, "$1<em>$2</em>")
    .replace(/(^|[^_\w])_(?=\S)([^_]*?\S)_(?![_\w])/g, "$1<em>$2</em>")
    .replace(/~~(?=\S)([\s\S]*?\S)~~/g, "<del>$1</del>")
    .replace(/( {2,}|\\)\n/g, "<br>\n");
  // placeholders can nest (a code span inside a link label)
  for (let pass = 0; pass < 4 && out.includes("\u0000"); pass++) {
    out = out.replace(/\u0000(\d+)\u0000/g, (_, i) => stash[Number(i)]);
  }
  return out;
}

const FENCE = /^ {0,3}(`{3,}|~{3,})\s*([\w+#.-]*)/;
const HEADING = /^ {0,3}(#{1,6})\s+(.*?)(?:\s+#+)?\s*$/;
const RULE = /^ {0,3}([-*_])(?:\s*\1){2,}\s*$/;
const QUOTE = /^ {0,3}&gt; ?/;
const ITEM = /^( *)([-*+]|\d{1,9}[.)])\s+(.*)$/;
const TABLE_SEP = /^\s*\|?\s*:?-+:?\s*(\|\s*:?-+:?\s*)*\|?\s*$/;

function splitRow(line) {
  let row = line.trim();
  if (row.startsWith("|")) row = row.slice(1);
  if (row.endsWith("|") && !row.endsWith("\\|")) row = row.slice(0, -1);
  return row.split(/(?<!\\)\|/).map((c) => c.trim().replace(/\\\|/g, "|"));
}

function startsBlock(line, next) {
  return (
    FENCE.test(line) || HEADING.test(line) || RULE.test(line) || QUOTE.test(line) || ITEM.test(line) ||
    (line.includes("|") && next !== undefined && TABLE_SEP.test(next) && next.includes("-"))
  );
}

function blocks(lines) {
  const html = [];
  let i = 0;
  while (i < lines.length) {
    const line = lines[i];
    if (!line.trim()) {
      i++;
      continue;
    }
    let m;
    if ((m = FENCE.exec(line))) {
      const fence = m[1];
      const body = [];
      i++;
      while (i < lines.length && !lines[i].trim().startsWith(fence)) body.push(lines[i++]);
      i++;
      const lang = m[2] ? ` class="language-${m[2]}"` : "";
      html.push(`<pre><code${lang}>${body.join("\n")}</code></pre>`);
    } else if ((m = HEADING.exec(line))) {
      const level = m[1].length;
      html.push(`<h${level}>${inline(m[2])}</h${level}>`);
      i++;
    } else if (RULE.test(line)) {
      html.push("<hr>");
      i++;
    } else if (QUOTE.test(line)) {
      const body = [];
      while (i < lines.length && lines[i].trim() && (QUOTE.test(lines[i]) || body.length)) {
        body.push(lines[i].replace(QUOTE, ""));
        i++;
      }
      html.push(`<blockquote>${blocks(body)}</blockquote>`);
    } else if (ITEM.test(line)) {
      const first = ITEM.exec(line);
      const indent = first[1].length;
      const ordered = /\d/.test(first[2]);
      const items = [];
      while (i < lines.length) {
        const cur = lines[i];
        const im = ITEM.exec(cur);
        if (im && im[1].length <= indent + 1 && /\d/.test(im[2]) === ordered) {
          items.push([im[3]]);
          i++;
        } else if (items.length && cur.trim() && (cur.length - cur.trimStart().length > indent || !startsBlock(cur, lines[i + 1]))) {
          items[items.length - 1].push(cur.slice(Math.min(indent + 2, cur.length - cur.trimStart().length)));
          i++;
        } else if (items.length && !cur.trim() && i + 1 < lines.length && lines[i + 1].length - lines[i + 1].trimStart().length > indent) {
          items[items.length - 1].push("");
          i++;
        } else {
          break;
        }
      }
      const start = ordered && parseInt(first[2], 10) !== 1 ? ` start="${parseInt(first[2], 10)}"` : "";
      const tag = ordered ? "ol" : "ul";
      const rendered = items.map((body) => {
        const content = blocks(body);
        const tight = content.startsWith("<p>") && content.indexOf("<p>", 1) === -1 ? content.replace(/^<p>([\s\S]*?)<\/p>/, "$1") : content;
        const task = /^\[([ xX])\]\s+/.exec(tight);
        if (task) return `<li class="task"><input type="checkbox" disabled${task[1] !== " " ? " checked" : ""}> ${tight.slice(task[0].length)}</li>`;
        return `<li>${tight}</li>`;
      });
      html.push(`<${tag}${start}>${rendered.join("")}</${tag}>`);
    } else if (line.includes("|") && i + 1 < lines.length && TABLE_SEP.test(lines[i + 1]) && lines[i + 1].includes("-")) {
      const head = splitRow(line);
      const aligns = splitRow(lines[i + 1]).map((c) => (c.startsWith(":") && c.endsWith(":") ? "center" : c.endsWith(":") ? "right" : c.startsWith(":") ? "left" : ""));
      i += 2;
      const rows = [];
      while (i < lines.length && lines[i].trim() && lines[i].includes("|")) rows.push(splitRow(lines[i++]));
      const cell = (tag, text, k) => `<${tag}${aligns[k] ? ` class="align-${aligns[k]}"` : ""}>${inline(text || "")}</${tag}>`;
      html.push(
        `<div class="table-wrap"><table><thead><tr>${head.map((c, k) => cell("th", c, k)).join("")}</tr></thead>` +
          `<tbody>${rows.map((r) => `<tr>${head.map((_, k) => cell("td", r[k], k)).join("")}</tr>`).join("")}</tbody></table></div>`,
      );
    } else if (/^( {4}|\t)/.test(line)) {
      const body = [];
      while (i < lines.length && (/^( {4}|\t)/.test(lines[i]) || (!lines[i].trim() && i + 1 < lines.length && /^( {4}|\t)/.test(lines[i + 1])))) {
        body.push(lines[i++].replace(/^( {4}|\t)/, ""));
      }
      html.push(`<pre><code>${body.join("\n")}</code></pre>`);
    } else {
      const para = [];
      while (i < lines.length && lines[i].trim() && (para.length === 0 || !startsBlock(lines[i], lines[i + 1]))) {
        para.push(lines[i++]);
      }
      // a "Setext" heading: text underlined with === or ---
      const last = para[para.length - 1];
      if (para.length > 1 && /^ {0,3}(=+|-+)\s*$/.test(last)) {
        const level = last.trim()[0] === "=" ? 1 : 2;
        html.push(`<h${level}>${inline(para.slice(0, -1).join("\n"))}</h${level}>`);
      } else {
        html.push(`<p>${inline(para.join("\n").trim())}</p>`);
      }
    }
  }
  return html.join("\n");
}

/** Markdown text -> HTML string (safe to assign to innerHTML). */
export function renderMarkdown(source) {
  let text = String(source || "").replace(/\r\n?/g, "\n").replace(/\u0000/g, "");
  // YAML front matter (Hugging Face Space cards) is configuration, not prose
  text = text.replace(/^---\n[\s\S]*?\n---[ \t]*(\n|$)/, "");
  // HTML comments are invisible on GitHub and the Hub too
  text = text.replace(/<!--[\s\S]*?-->/g, "");
  return blocks(escapeHtml(text).split("\n"));
}
