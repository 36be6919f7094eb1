// The console's entry point: a hash router (#/jobs, #/jobs/{id}, #/datasets, #/datasets/{id},
// #/new, #/api), the API-key prompt and the page lifecycle (each page gets an AbortSignal that
// fires when the user navigates away, which stops its timers and event streams).

import { ApiError, apiKey, setApiKey } from "./api.js";
import { h, fill, notice } from "./ui.js";
import { jobList, jobPage } from "./jobs.js";
import { datasetList, datasetPage } from "./datasets.js";
import { newJob } from "./newjob.js";
import { reference } from "./reference.js";

const main = document.getElementById("main");
const keyButton = document.getElementById("key-button");
let current = null;

const routes = [
  [/^#\/jobs\/([^/]+)$/, jobPage],
  [/^#\/jobs(?:\?limit=\d+)?$/, jobList],
  [/^#\/datasets\/([^/]+)$/, datasetPage],
  [/^#\/datasets(?:\?limit=\d+)?$/, datasetList],
  [/^#\/new(?:\?dataset=([^/&]+))?$/, newJob],
  [/^#\/api$/, reference],
];

/** Shows the page of the current hash. */
async function route() {
  if (current) current.abort();
  current = new AbortController();
  const signal = current.signal;
  const hash = location.hash || "#/jobs";
  for (const a of document.querySelectorAll("header nav a")) {
    const target = a.getAttribute("href");
    if (hash === target || hash.startsWith(target + "/") || hash.startsWith(target + "?")) a.setAttribute("aria-current", "page");
    else a.removeAttribute("aria-current");
  }
  keyButton.hidden = !apiKey();
  const match = routes.map(([re, page]) => [hash.match(re), page]).find(([m]) => m);
  fill(main);
  if (!match) {
    fill(main, h("h1", null, "Not found"), h("p", null, "No console page at ", h("code", null, hash), "."));
    return;
  }
  const [m, page] = match;
  try {
    await page(main, m.slice(1).map((x) => x && decodeURIComponent(x)), signal);
  } catch (e) {
    if (signal.aborted) return;
    if (e instanceof ApiError && e.status === 401) keyPrompt(e);
    else main.append(notice(e));
  }
}

/** Asks for the API key (after a 401): wrong keys show the server's error and no data. */
export function keyPrompt(err) {
  const input = h("input", { id: "api-key", type: "password", autocomplete: "off", required: true, size: 40 });
  const form = h("form", { id: "key-form", class: "panel" },
    h("h1", null, "API key required"),
    h("p", null, "This server needs an API key. It is kept in this tab's session storage only and sent as an Authorization header."),
    apiKey() ? h("p", { class: "error", role: "alert", id: "key-error" }, "The key was refused: " + err.message) : null,
    h("label", { for: "api-key" }, "API key"), input, " ",
    h("button", { type: "submit" }, "Use this key"));
  form.addEventListener("submit", (e) => {
    e.preventDefault();
    setApiKey(input.value.trim());
    route();
  });
  fill(main, form);
  input.focus();
}

keyButton.addEventListener("click", () => {
  setApiKey("");
  keyPrompt(new Error("forgotten"));
  keyButton.hidden = true;
});

window.addEventListener("hashchange", () => {
  route();
  main.focus({ preventScroll: true });
});
if (!location.hash) history.replaceState(null, "", "#/jobs");
route();
