// The API reference, rendered from openapi.yaml (served as JSON next to this module, converted
// by the server once at start-up).

import { h, table } from "./ui.js";

const METHODS = ["get", "put", "post", "delete", "patch"];

function refName(ref) {
  return ref.split("/").pop();
}

function resolve(doc, x) {
  return x && x.$ref ? resolve(doc, x.$ref.split("/").slice(1).reduce((o, k) => o && o[k], doc)) : x;
}

/** A short description of a schema, with links to named schemas. */
function schemaRef(s) {
  if (!s) return "—";
  if (s.$ref) return h("a", { href: "#/api", "data-target": "schema-" + refName(s.$ref) }, refName(s.$ref));
  if (s.oneOf) return s.oneOf.flatMap((x, i) => (i ? [" | ", schemaRef(x)] : [schemaRef(x)]));
  if (s.type === "array") return ["array of ", schemaRef(s.items)];
  const type = Array.isArray(s.type) ? s.type.join(" | ") : s.type || "any";
  return s.enum ? `${type}: ${s.enum.join(", ")}` : type;
}

function operation(doc, path, method, op, shared) {
  const params = [...(shared || []), ...(op.parameters || [])].map((p) => resolve(doc, p));
  const body = op.requestBody && op.requestBody.content;
  return h("section", { class: "op", id: "op-" + (op.operationId || method + path) },
    h("h3", null, h("span", { class: "method" }, method), h("code", null, path)),
    h("p", null, op.summary || ""),
    params.length ? table(["Parameter", "In", "Type", "Description"],
      params.map((p) => [p.name, p.in, schemaRef(p.schema), p.description || ""])) : null,
    body ? h("p", null, "Body: ", Object.entries(body).flatMap(([type, c], i) => [i ? "; " : "", h("code", null, type), " ", schemaRef(c.schema)])) : null,
    h("p", { class: "muted" }, "Responses: ", Object.keys(op.responses || {}).join(", ")));
}

/** #/api */
export async function reference(main, _params, signal) {
  const r = await fetch(new URL("./openapi.json", import.meta.url), { signal });
  const doc = await r.json();
  const toc = h("ul", null);
  const ops = [];
  for (const [path, item] of Object.entries(doc.paths || {})) {
    for (const m of METHODS) {
      if (!item[m]) continue;
      const section = operation(doc, path, m, item[m], item.parameters);
      ops.push(section);
      toc.append(h("li", null, h("a", { href: "#/api", "data-target": section.id }, `${m.toUpperCase()} ${path}`)));
    }
  }
  const schemas = Object.entries((doc.components && doc.components.schemas) || {}).map(([name, s]) =>
    h("section", { class: "op", id: "schema-" + name },
      h("h3", null, name),
      s.description ? h("p", null, s.description) : null,
      s.properties ? table(["Field", "Type", "Required", "Description"],
        Object.entries(s.properties).map(([k, p]) => [h("code", null, k), schemaRef(p), (s.required || []).includes(k) ? "yes" : "", p.description || ""])) : h("p", null, schemaRef(s))));
  main.append(
    h("h1", null, doc.info.title, " API ", doc.info.version),
    h("p", null, doc.info.description),
    h("p", null, "The machine-readable document: ", h("a", { href: "/openapi.yaml" }, "openapi.yaml"), "."),
    h("nav", { "aria-label": "Operations" }, h("h2", null, "Operations"), toc),
    ...ops, h("h2", null, "Schemas"), ...schemas);
  // In-page links: the hash is the router's, so scroll to the target instead.
  main.addEventListener("click", (e) => {
    const a = e.target.closest("a[data-target]");
    if (!a) return;
    e.preventDefault();
    const t = document.getElementById(a.dataset.target);
    if (t) {
      t.scrollIntoView();
      t.setAttribute("tabindex", "-1");
      t.focus();
    }
  });
}
