// Builds an HTML form from a JSON schema (as pydantic v2's model_json_schema() writes it)
// and reads the typed value back.
//
// Every field is a controller object:
//   el            the element to insert in the page
//   get()         the field's value; on a bad value it shows the message beside the field
//                 and throws FieldError
//   set(v)        fill the field from a value
//   child(key)    the controller of a property name or array index (to place server errors)
//   showError(m)  / clearErrors()
//   focus()
//   dirty         true once the visitor changed the field
//   omittable     leave it out of the value while untouched (no default the page knows of)

let uid = 0;
const nextId = (prefix) => `${prefix}-${++uid}`;
const MAX_DEPTH = 8;
const LONG_TEXT_NAMES = /^(code|program|script|source|content|body|prompt|text|document|patch|diff|query|sql)$/i;

export class FieldError extends Error {}

/** A DOM element: h("div", {class: "x", onclick: f}, child, "text", ...). */
export function h(tag, attrs = {}, ...children) {
  const node = document.createElement(tag);
  for (const [key, value] of Object.entries(attrs)) {
    if (value === undefined || value === null || value === false) continue;
    if (key.startsWith("on")) node.addEventListener(key.slice(2), value);
    else if (key === "text") node.textContent = value;
    else node.setAttribute(key, value === true ? "" : String(value));
  }
  for (const child of children.flat()) {
    if (child !== null && child !== undefined && child !== false) {
      node.append(child instanceof Node ? child : String(child));
    }
  }
  return node;
}

/** "max_steps" -> "Max steps" */
export function humanize(key) {
  const words = String(key).replace(/([a-z0-9])([A-Z])/g, "$1 $2").replace(/[_-]+/g, " ").trim();
  return words ? words[0].toUpperCase() + words.slice(1) : String(key);
}

function lookup(root, ref) {
  if (typeof ref !== "string" || !ref.startsWith("#/")) return {};
  let node = root;
  for (const raw of ref.slice(2).split("/")) {
    const part = raw.replace(/~1/g, "/").replace(/~0/g, "~");
    node = node && typeof node === "object" ? node[part] : undefined;
  }
  return node && typeof node === "object" ? node : {};
}

/** Follow $ref (into $defs) and single-entry allOf; keys at the use site win. */
export function deref(schema, root) {
  let out = schema || {};
  for (let i = 0; i < 32; i++) {
    if (out.$ref) {
      const { $ref, ...site } = out;
      out = { ...lookup(root, $ref), ...site };
    } else if (Array.isArray(out.allOf) && out.allOf.length === 1 && !out.properties) {
      const { allOf, ...site } = out;
      out = { ...allOf[0], ...site };
    } else {
      break;
    }
  }
  return out;
}

const isNull = (s) => s && (s.type === "null" || (Array.isArray(s.enum) && s.enum.length === 1 && s.enum[0] === null));

/** What control a schema gets: {kind, schema, nullable}. */
export function classify(schema, root) {
  const s = deref(schema, root);
  const alts = s.anyOf || s.oneOf;
  if (Array.isArray(alts)) {
    const resolved = alts.map((a) => deref(a, root));
    const others = resolved.filter((a) => !isNull(a));
    const nullable = others.length < resolved.length;
    const { anyOf, oneOf, ...site } = s;
    if (others.length === 1) {
      const inner = classify({ ...others[0], ...pick(site, ["title", "description", "default"]) }, root);
      return { ...inner, nullable: nullable || inner.nullable };
    }
    if (others.length > 1 && others.every((a) => Array.isArray(a.enum) || "const" in a)) {
      const values = others.flatMap((a) => (Array.isArray(a.enum) ? a.enum : [a.const]));
      return { kind: "enum", schema: { ...site, enum: values }, nullable };
    }
    const scalar = (a) => ["string", "integer", "number", "boolean"].includes(a.type) || Array.isArray(a.enum) || "const" in a;
    return {
      kind: "json",
      schema: { ...s, "x-scalar": others.every(scalar), "x-string": others.some((a) => a.type === "string") },
      nullable,
    };
  }
  if (Array.isArray(s.enum)) {
    const values = s.enum.filter((v) => v !== null);
    return { kind: "enum", schema: { ...s, enum: values }, nullable: values.length < s.enum.length };
  }
  if ("const" in s) return { kind: "enum", schema: { ...s, enum: [s.const] }, nullable: false };
  let type = s.type;
  let nullable = false;
  if (Array.isArray(type)) {
    nullable = type.includes("null");
    const rest = type.filter((t) => t !== "null");
    type = rest.length === 1 ? rest[0] : undefined;
  }
  if (type === "object" || (!type && s.properties)) {
    return { kind: s.properties ? "object" : "json", schema: s, nullable };
  }
  if (type === "array" && Array.isArray(s.prefixItems)) return { kind: "json", schema: s, nullable }; // a tuple
  if (["string", "integer", "number", "boolean", "array"].includes(type)) return { kind: type, schema: s, nullable };
  return { kind: "json", schema: s, nullable };
}

function pick(obj, keys) {
  const out = {};
  for (const k of keys) if (k in obj) out[k] = obj[k];
  return out;
}

function rangeText(s, integer) {
  const fmt = (n) => String(n);
  const lo = s.exclusiveMinimum !== undefined ? ["> ", s.exclusiveMinimum] : s.minimum !== undefined ? ["≥ ", s.minimum] : null;
  const hi = s.exclusiveMaximum !== undefined ? ["< ", s.exclusiveMaximum] : s.maximum !== undefined ? ["≤ ", s.maximum] : null;
  const parts = [integer ? "integer" : "number"];
  if (lo && hi && s.minimum !== undefined && s.maximum !== undefined) parts.push(`${fmt(s.minimum)} – ${fmt(s.maximum)}`);
  else {
    if (lo) parts.push(lo[0] + fmt(lo[1]));
    if (hi) parts.push(hi[0] + fmt(hi[1]));
  }
  if (s.multipleOf !== undefined) parts.push(`× ${s.multipleOf}`);
  return parts.join(" · ");
}

function typeText(kind, s, root) {
  switch (kind) {
    case "string": {
      const parts = ["string"];
      if (s.format) parts.push(s.format);
      if (s.minLength !== undefined && s.maxLength !== undefined) parts.push(`${s.minLength}–${s.maxLength} chars`);
      else if (s.maxLength !== undefined) parts.push(`≤ ${s.maxLength} chars`);
      else if (s.minLength !== undefined) parts.push(`≥ ${s.minLength} chars`);
      return parts.join(" · ");
    }
    case "integer":
    case "number":
      return rangeText(s, kind === "integer");
    case "enum":
      return `one of ${s.enum.length}`;
    case "array": {
      const item = s.items ? classify(s.items, root).kind : "any";
      return `list of ${item === "json" ? "values" : item}`;
    }
    case "object":
      return "object";
    case "boolean":
      return "boolean";
    default:
      return "JSON";
  }
}

function isLongText(s, key) {
  if (s.maxLength !== undefined && s.maxLength > 200) return true;
  if (["textarea", "multiline", "multi-line", "long", "code"].includes(String(s.format || "").toLowerCase())) return true;
  if (s.widget === "textarea" || s["x-widget"] === "textarea" || s.multiline === true) return true;
  if (typeof s.default === "string" && s.default.includes("\n")) return true;
  return s.maxLength === undefined && LONG_TEXT_NAMES.test(String(key));
}

/**
 * Build the controller of one field.
 * opts: {key, label, required, root, depth, hasDefault, inline (array rows: no visible label)}
 */
export function buildField(schema, opts) {
  const info = classify(schema, opts.root);
  const site = deref(schema, opts.root);
  const s = info.schema;
  // a $ref'd model's own title is its class name: the use site's title or key reads better
  const label = opts.label || (schema && schema.title) || humanize(opts.key);
  const description = site.description || s.description;
  const hasDefault = "default" in site;
  const defaultValue = site.default;
  const depth = opts.depth || 0;
  const kind = depth > MAX_DEPTH && (info.kind === "object" || info.kind === "array") ? "json" : info.kind;
  const ctx = { ...opts, label, description, depth, kind };
  const nullable = info.nullable;

  let ctrl;
  if (kind === "object") ctrl = objectField(s, ctx);
  else if (kind === "array") ctrl = arrayField(s, ctx);
  else ctrl = scalarField(s, ctx, nullable);

  if (nullable && !ctrl.handlesNull) ctrl = optionalWrap(ctrl, ctx);
  ctrl.omittable = !opts.required && !hasDefault;
  if (hasDefault) ctrl.set(defaultValue);
  else if (nullable && !opts.required) ctrl.set(null);
  else if (kind === "json" && s.type === "object") ctrl.set({}); // show the expected shape
  ctrl.dirty = false;
  return ctrl;
}

/** Help text + error slot shared by every field. */
function decorations(ctx) {
  const helpId = nextId("help");
  const errId = nextId("err");
  const help = ctx.description ? h("p", { class: "help", id: helpId, text: ctx.description }) : null;
  const error = h("p", { class: "error", id: errId, hidden: true });
  return { help, error, helpId: help ? helpId : null, errId };
}

function attachErrors(ctrl, target, deco, controls) {
  const describe = (withError) => {
    const ids = [deco.helpId, withError ? deco.errId : null].filter(Boolean).join(" ");
    for (const c of controls()) {
      if (ids) c.setAttribute("aria-describedby", ids);
      else c.removeAttribute("aria-describedby");
    }
  };
  describe(false);
  ctrl.showError = (message) => {
    deco.error.textContent = message;
    deco.error.hidden = false;
    target.classList.add("invalid");
    for (const c of controls()) c.setAttribute("aria-invalid", "true");
    describe(true);
  };
  const clearOwn = () => {
    deco.error.hidden = true;
    deco.error.textContent = "";
    target.classList.remove("invalid");
    for (const c of controls()) c.removeAttribute("aria-invalid");
    describe(false);
  };
  const clearChildren = ctrl.clearErrors;
  ctrl.clearErrors = () => {
    clearOwn();
    if (clearChildren) clearChildren();
  };
  ctrl.clearOwnError = clearOwn;
  target.addEventListener("input", () => {
    ctrl.dirty = true;
    clearOwn();
  });
  target.addEventListener("change", () => {
    ctrl.dirty = true;
  });
}

function fail(ctrl, message) {
  ctrl.showError(message);
  throw new FieldError(message);
}

function scalarField(s, ctx, nullable) {
  const id = nextId("f");
  const deco = decorations(ctx);
  const ctrl = { kind: ctx.kind, child: () => null, dirty: false };
  let control;
  const head = h("div", { class: "field-head" });
  const tag = h("span", { class: "type", text: typeText(ctx.kind, s, ctx.root) });
  const row = h("div", { class: `field field-${ctx.kind}`, "data-key": ctx.key });

  if (ctx.kind === "boolean") {
    control = h("input", { type: "checkbox", id });
    const lab = h("label", { for: id, class: "check" }, control, h("span", { text: ctx.label }));
    if (ctx.inline) lab.lastChild.classList.add("sr-only");
    head.append(lab, tag);
    ctrl.get = () => control.checked;
    ctrl.set = (v) => {
      control.checked = Boolean(v);
    };
  } else {
    if (ctx.kind === "enum") {
      control = h("select", { id });
      if (!("default" in s) || !s.enum.some((v) => same(v, s.default))) {
        control.append(h("option", { value: "", text: "Choose…" }));
      }
      s.enum.forEach((v, i) => control.append(h("option", { value: String(i), text: typeof v === "string" ? v : JSON.stringify(v) })));
      ctrl.get = () => {
        if (control.value === "") fail(ctrl, "Choose a value.");
        return s.enum[Number(control.value)];
      };
      ctrl.set = (v) => {
        const i = s.enum.findIndex((e) => same(e, v));
        control.value = i >= 0 ? String(i) : "";
      };
    } else if (ctx.kind === "integer" || ctx.kind === "number") {
      control = h("input", {
        type: "number",
        id,
        inputmode: ctx.kind === "integer" ? "numeric" : "decimal",
        min: s.minimum ?? s.exclusiveMinimum,
        max: s.maximum ?? s.exclusiveMaximum,
        step: s.multipleOf ?? (ctx.kind === "integer" ? 1 : "any"),
      });
      ctrl.get = () => readNumber(ctrl, control, s, ctx.kind === "integer");
      ctrl.set = (v) => {
        control.value = typeof v === "number" ? String(v) : "";
      };
    } else if (ctx.kind === "string") {
      const long = isLongText(s, ctx.key);
      control = long
        ? h("textarea", { id, rows: 4, spellcheck: "false" })
        : h("input", { type: "text", id, autocomplete: "off", spellcheck: "false" });
      if (s.maxLength !== undefined) control.maxLength = s.maxLength;
      if (s.format || s.pattern) control.placeholder = s.format || s.pattern;
      ctrl.get = () => {
        const v = control.value;
        if (s.minLength !== undefined && v.length < s.minLength) fail(ctrl, `At least ${s.minLength} characters.`);
        if (s.maxLength !== undefined && v.length > s.maxLength) fail(ctrl, `At most ${s.maxLength} characters.`);
        if (s.pattern) {
          let re = null;
          try {
            re = new RegExp(s.pattern, "u");
          } catch {
            re = null; // a Python-only pattern: the server checks it
          }
          if (re && !re.test(v)) fail(ctrl, `Must match ${s.pattern}.`);
        }
        return v;
      };
      ctrl.set = (v) => {
        control.value = v === null || v === undefined ? "" : String(v);
      };
    } else {
      // a union of plain values (int | str) or an array item gets one line; objects a text area
      const oneLine = ctx.inline || s["x-scalar"] === true;
      const example = s.type === "object" ? '{"key": 1}' : s.type === "array" ? "[1, 2]" : oneLine ? "a JSON value" : "{}";
      control = oneLine
        ? h("input", { type: "text", id, class: "mono", spellcheck: "false", autocomplete: "off", placeholder: example })
        : h("textarea", { id, rows: 3, spellcheck: "false", class: "mono", placeholder: example });
      ctrl.handlesNull = nullable;
      ctrl.get = () => {
        const text = control.value.trim();
        if (text === "") {
          if (nullable) return null;
          fail(ctrl, "Enter a JSON value.");
        }
        try {
          return JSON.parse(text);
        } catch (err) {
          if (s["x-string"]) return control.value; // int | str: what is not JSON is the string itself
          return fail(ctrl, `Not valid JSON: ${err.message}`);
        }
      };
      ctrl.set = (v) => {
        const flat = JSON.stringify(v);
        control.value = v === undefined ? "" : oneLine || flat.length <= 60 ? flat : JSON.stringify(v, null, 2);
      };
    }
    const lab = h("label", { for: id, text: ctx.label });
    if (ctx.inline) lab.classList.add("sr-only");
    head.append(lab, tag);
  }
  if (ctx.required && !ctx.inline) head.append(h("span", { class: "req", text: "required" }));
  if (ctx.inline) head.classList.add("inline-head");
  row.append(head);
  if (ctx.kind !== "boolean") row.append(control);
  if (deco.help) row.append(deco.help);
  row.append(deco.error);
  ctrl.el = row;
  ctrl.control = control;
  ctrl.head = head;
  ctrl.focus = () => control.focus();
  attachErrors(ctrl, row, deco, () => [control]);
  return ctrl;
}

function readNumber(ctrl, control, s, integer) {
  const raw = control.value.trim();
  if (raw === "" || Number.isNaN(control.valueAsNumber)) {
    if (control.validity && control.validity.badInput) fail(ctrl, "Not a number.");
    fail(ctrl, integer ? "Enter a whole number." : "Enter a number.");
  }
  const v = Number(raw);
  if (!Number.isFinite(v)) fail(ctrl, "Not a number.");
  if (integer && !Number.isInteger(v)) fail(ctrl, "Must be a whole number.");
  if (s.minimum !== undefined && v < s.minimum) fail(ctrl, `Must be at least ${s.minimum}.`);
  if (s.maximum !== undefined && v > s.maximum) fail(ctrl, `Must be at most ${s.maximum}.`);
  if (s.exclusiveMinimum !== undefined && v <= s.exclusiveMinimum) fail(ctrl, `Must be greater than ${s.exclusiveMinimum}.`);
  if (s.exclusiveMaximum !== undefined && v >= s.exclusiveMaximum) fail(ctrl, `Must be less than ${s.exclusiveMaximum}.`);
  return v;
}

function same(a, b) {
  return JSON.stringify(a) === JSON.stringify(b);
}

/** Nullable field: the inner control plus an explicit "unset" switch (sends null). */
function optionalWrap(inner, ctx) {
  const id = nextId("unset");
  const box = h("input", { type: "checkbox", id, class: "unset-box" });
  const toggle = h(
    "label",
    { for: id, class: "unset", title: "Send null for this field" },
    box,
    h("span", { text: "unset" }),
    h("span", { class: "sr-only", text: ` (${ctx.label} is null)` }),
  );
  const composite = inner.kind === "object" || inner.kind === "array";
  const target = inner.head || inner.legend;
  if (target) target.append(toggle);
  const apply = () => {
    inner.el.classList.toggle("is-unset", box.checked);
    if (composite && inner.body) inner.body.hidden = box.checked;
  };
  box.addEventListener("change", () => {
    apply();
    inner.clearErrors();
    if (!box.checked) inner.focus();
  });
  inner.el.addEventListener("input", (e) => {
    if (e.target !== box && box.checked) {
      box.checked = false;
      apply();
    }
  });
  return {
    ...inner,
    el: inner.el,
    kind: inner.kind,
    nullable: true,
    get: () => (box.checked ? null : inner.get()),
    set: (v) => {
      box.checked = v === null || v === undefined;
      if (!box.checked) inner.set(v);
      apply();
    },
    get dirty() {
      return inner.dirty;
    },
    set dirty(v) {
      inner.dirty = v;
    },
    isUnset: () => box.checked,
    unsetBox: box,
    child: (k) => inner.child(k),
    showError: (m) => inner.showError(m),
    clearErrors: () => inner.clearErrors(),
    focus: () => (box.checked ? box.focus() : inner.focus()),
  };
}

function groupShell(ctx, cls) {
  const deco = decorations(ctx);
  const legend = h("legend", {}, h("span", { class: "legend-text", text: ctx.label }));
  const fieldset = h("fieldset", { class: `group ${cls}`, "data-key": ctx.key });
  const body = h("div", { class: "group-body" });
  fieldset.append(legend);
  if (deco.help) fieldset.append(deco.help);
  fieldset.append(deco.error, body);
  return { fieldset, legend, body, deco };
}

/** The fields of an object schema, in order; `skip` names properties rendered elsewhere. */
export function objectFields(s, ctx, container, skip = []) {
  const required = new Set(s.required || []);
  const children = new Map();
  for (const [key, prop] of Object.entries(s.properties || {})) {
    if (skip.includes(key)) continue;
    const child = buildField(prop, { key, root: ctx.root, depth: (ctx.depth || 0) + 1, required: required.has(key) });
    children.set(key, child);
    container.append(child.el);
  }
  return children;
}

function collect(children) {
  const out = {};
  let failed = null;
  for (const [key, child] of children) {
    if (child.omittable && !child.dirty) continue;
    try {
      out[key] = child.get();
    } catch (err) {
      if (!(err instanceof FieldError)) throw err;
      failed = failed || err;
    }
  }
  if (failed) throw failed;
  return out;
}

function objectField(s, ctx) {
  const shell = groupShell(ctx, "group-object");
  const tag = h("span", { class: "type", text: "object" });
  shell.legend.append(tag);
  const children = objectFields(s, ctx, shell.body);
  const ctrl = {
    kind: "object",
    el: shell.fieldset,
    legend: shell.legend,
    body: shell.body,
    dirty: false,
    get: () => collect(children),
    set: (v) => {
      if (v && typeof v === "object") {
        for (const [key, child] of children) if (key in v) child.set(v[key]);
      }
    },
    child: (k) => children.get(String(k)) || null,
    clearErrors: () => children.forEach((c) => c.clearErrors()),
    focus: () => {
      const first = children.values().next().value;
      if (first) first.focus();
    },
  };
  attachErrors(ctrl, shell.fieldset, shell.deco, () => []);
  return ctrl;
}

function arrayField(s, ctx) {
  const shell = groupShell(ctx, "group-array");
  const itemSchema = s.items || {};
  const itemKind = classify(itemSchema, ctx.root).kind;
  const simple = !["object", "array"].includes(itemKind);
  const tag = h("span", { class: "type", text: typeText("array", s, ctx.root) });
  shell.legend.append(tag);
  const list = h("ol", { class: "rows" });
  const empty = h("p", { class: "empty", text: "No items." });
  const add = h("button", { type: "button", class: "btn btn-small", text: "Add item" });
  add.setAttribute("aria-label", `Add an item to ${ctx.label}`);
  shell.body.append(list, empty, h("div", { class: "row-actions" }, add));
  const rows = [];

  const relabel = () => {
    rows.forEach((r, i) => {
      const name = `${ctx.label} item ${i + 1}`;
      r.remove.setAttribute("aria-label", `Remove ${name}`);
      r.index.textContent = String(i + 1);
      const lab = r.ctrl.el.querySelector("label.sr-only, legend .legend-text");
      if (lab) lab.textContent = simple ? name : `Item ${i + 1}`;
    });
    empty.hidden = rows.length > 0;
    add.disabled = s.maxItems !== undefined && rows.length >= s.maxItems;
  };
  const addRow = (value, focus) => {
    const itemCtrl = buildField(itemSchema, { key: String(rows.length), root: ctx.root, depth: ctx.depth + 1, required: true, inline: simple, label: `${ctx.label} item ${rows.length + 1}` });
    if (value !== undefined) itemCtrl.set(value);
    const remove = h("button", { type: "button", class: "btn btn-small btn-quiet remove", text: "Remove" });
    const index = h("span", { class: "row-index", "aria-hidden": "true" });
    const li = h("li", { class: "row" }, index, itemCtrl.el, remove);
    const entry = { ctrl: itemCtrl, li, remove, index };
    remove.addEventListener("click", () => {
      const at = rows.indexOf(entry);
      rows.splice(at, 1);
      li.remove();
      ctrl.dirty = true;
      relabel();
      const next = rows[at] || rows[at - 1];
      (next ? next.remove : add).focus();
    });
    rows.push(entry);
    list.append(li);
    relabel();
    if (focus) itemCtrl.focus();
  };
  add.addEventListener("click", () => {
    ctrl.dirty = true;
    shell.fieldset.dispatchEvent(new Event("input", { bubbles: true }));
    addRow(undefined, true);
  });

  const ctrl = {
    kind: "array",
    el: shell.fieldset,
    legend: shell.legend,
    body: shell.body,
    dirty: false,
    get: () => {
      const out = [];
      let failed = null;
      for (const r of rows) {
        try {
          out.push(r.ctrl.get());
        } catch (err) {
          if (!(err instanceof FieldError)) throw err;
          failed = failed || err;
        }
      }
      if (failed) throw failed;
      if (s.minItems !== undefined && out.length < s.minItems) fail(ctrl, `Add at least ${s.minItems} item(s).`);
      return out;
    },
    set: (v) => {
      rows.splice(0).forEach((r) => r.li.remove());
      if (Array.isArray(v)) v.forEach((item) => addRow(item, false));
      relabel();
    },
    child: (k) => (rows[Number(k)] ? rows[Number(k)].ctrl : null),
    clearErrors: () => rows.forEach((r) => r.ctrl.clearErrors()),
    focus: () => (rows[0] ? rows[0].ctrl.focus() : add.focus()),
  };
  attachErrors(ctrl, shell.fieldset, shell.deco, () => []);
  relabel();
  return ctrl;
}

/**
 * The form of an action schema. Properties named in `advanced` go into `advancedContainer`
 * (a collapsed section) instead of the main list.
 */
export function buildForm(schema, container, advancedContainer, advanced = ["metadata"]) {
  const root = schema;
  const s = deref(schema, root);
  const ctx = { root, depth: 0 };
  const hidden = Object.keys(s.properties || {}).filter((k) => advanced.includes(k));
  const main = objectFields(s, ctx, container, hidden);
  const extra = new Map();
  const required = new Set(s.required || []);
  for (const key of hidden) {
    const child = buildField(s.properties[key], { key, root, depth: 1, required: required.has(key) });
    const d = deref(s.properties[key], root);
    // free-form dicts (metadata) are left out while they are untouched or empty
    if (!required.has(key) && (d.type === "object" || !d.type)) child.omittable = true;
    extra.set(key, child);
    advancedContainer.append(child.el);
  }
  const all = new Map([...main, ...extra]);
  return {
    fields: all,
    advancedKeys: hidden,
    get: () => {
      const value = collect(all);
      for (const key of hidden) {
        const v = value[key];
        if (v && typeof v === "object" && !Array.isArray(v) && Object.keys(v).length === 0 && !required.has(key)) delete value[key];
      }
      return value;
    },
    set: (v) => {
      for (const [key, child] of all) if (v && key in v) child.set(v[key]);
    },
    child: (k) => all.get(String(k)) || null,
    clearErrors: () => all.forEach((c) => c.clearErrors()),
    isEmpty: () => all.size === 0,
  };
}

/**
 * Place a server validation error: walk `loc` down the controllers and show the message on
 * the deepest one found. Returns the controller, or null when nothing matched.
 */
export function placeError(form, loc, message) {
  let ctrl = null;
  let node = form;
  const rest = [...(loc || [])];
  while (rest.length && node && node.child) {
    const next = node.child(rest[0]);
    if (!next) break;
    ctrl = next;
    node = next;
    rest.shift();
  }
  if (!ctrl) return null;
  const where = rest.length ? ` (at ${rest.join(".")})` : "";
  ctrl.showError(message + where);
  return ctrl;
}
