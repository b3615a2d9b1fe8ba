// Berth UI: fetches the agent's HTTP API with the operator's ACL token and
// keeps the page live with blocking queries (?index=N&wait=). Everything is
// built with DOM calls and text nodes, never by parsing HTML, so data from the
// API cannot become markup.
"use strict";

const TOKEN_KEY = "berth.token";
const WAIT = "60s";
let generation = 0; // bumped to stop every watcher (token change)
const controllers = new Set();

function token() { return sessionStorage.getItem(TOKEN_KEY) || ""; }

// h builds an element: h("td", {class: "num"}, "3").
function h(tag, attrs, ...children) {
  const el = document.createElement(tag);
  for (const [k, v] of Object.entries(attrs || {})) {
    if (v === undefined || v === null || v === false) continue;
    el.setAttribute(k, v === true ? "" : String(v));
  }
  for (const c of children.flat()) {
    if (c === undefined || c === null) continue;
    el.append(c instanceof Node ? c : document.createTextNode(String(c)));
  }
  return el;
}

function link(kind, id, text) {
  if (!id) return "";
  return h("a", {href: "/ui/" + kind + "/" + encodeURIComponent(id)}, text || id);
}
function short(id) { return id ? id.slice(0, 8) : ""; }
function time(ns) { return ns ? new Date(ns / 1e6).toISOString().replace("T", " ").replace(/\.\d+Z$/, "Z") : ""; }

function setStatus(text, isError) {
  const el = document.getElementById("status");
  el.textContent = text;
  el.classList.toggle("error", !!isError);
}

class APIError extends Error {
  constructor(status, body) { super(body || ("HTTP " + status)); this.status = status; }
}

// get fetches one API path, answering the body and X-Nomad-Index.
async function get(path, index, signal) {
  let url = path;
  if (index) url += (path.includes("?") ? "&" : "?") + "index=" + index + "&wait=" + WAIT;
  const headers = {};
  if (token()) headers["X-Nomad-Token"] = token();
  const resp = await fetch(url, {headers, signal, cache: "no-store"});
  const text = await resp.text();
  if (!resp.ok) throw new APIError(resp.status, text.trim());
  const type = resp.headers.get("Content-Type") || "";
  const body = type.includes("json") ? JSON.parse(text) : text;
  return {body, index: Number(resp.headers.get("X-Nomad-Index") || 0)};
}

function describe(err) {
  if (err.status === 403) return "permission denied: enter an ACL token with read access above (" + err.message + ")";
  if (err.status === 401) return "not authorized: enter an ACL token above (" + err.message + ")";
  return err.message;
}

const pause = (ms) => new Promise((r) => setTimeout(r, ms));

// watch renders path now and again each time its index moves, until the
// token changes. A failure is shown and retried with backoff.
async function watch(path, render) {
  const gen = generation;
  let index = 0, backoff = 500;
  while (gen === generation) {
    const ctl = new AbortController();
    controllers.add(ctl);
    try {
      const res = await get(path, index, ctl.signal);
      if (gen !== generation) return;
      const moved = res.index !== index;
      index = res.index;
      backoff = 500;
      render(res.body);
      setStatus("live · index " + index);
      if (!moved || !index) await pause(1000); // no blocking support: poll
    } catch (err) {
      if (gen !== generation || err.name === "AbortError") return;
      setStatus(describe(err), true);
      // What an earlier token could read is not left on screen.
      if (err.status === 401 || err.status === 403) replace(h("p", {class: "muted"}, "Nothing to show without a token that may read this."));
      await pause(backoff);
      backoff = Math.min(backoff * 2, 10000);
    } finally {
      controllers.delete(ctl);
    }
  }
}

function replace(el) {
  const content = document.getElementById("content");
  content.replaceChildren(el);
}

function table(cols, rows, attrsOf) {
  return h("table", {},
    h("thead", {}, h("tr", {}, cols.map((c) => h("th", {}, c[0])))),
    h("tbody", {}, rows.map((r) => h("tr", attrsOf ? attrsOf(r) : {}, cols.map((c) => {
      const v = c[1](r);
      return h("td", typeof v === "number" ? {class: "num"} : {}, v);
    })))));
}

function emptyOr(rows, what, el) { return rows.length ? el : h("p", {class: "muted"}, "No " + what + "."); }

// ---- list pages ----

const lists = {
  volumes: ["/v1/volumes?type=csi", "volumes", [
    ["ID", (v) => link("volume", v.ID)],
    ["Name", (v) => v.Name],
    ["Plugin", (v) => link("plugin", v.PluginID)],
    ["State", (v) => v.State || ""],
    ["Schedulable", (v) => v.Schedulable ? "yes" : "no"],
    ["Claims", (v) => v.Claims || 0],
    ["Access", (v) => v.AccessMode || ""],
    ["Controllers", (v) => v.ControllerRequired ? v.ControllersHealthy + "/" + v.ControllersExpected : "—"],
    ["Nodes", (v) => v.NodesHealthy + "/" + v.NodesExpected],
  ], (v) => ({"data-volume": v.ID})],
  jobs: ["/v1/jobs", "jobs", [
    ["ID", (j) => link("job", j.ID)], ["Type", (j) => j.Type], ["Status", (j) => j.Status],
    ["Priority", (j) => j.Priority], ["Stop", (j) => j.Stop ? "yes" : ""],
  ]],
  allocs: ["/v1/allocations", "allocations", [
    ["ID", (a) => link("alloc", a.ID, short(a.ID))], ["Job", (a) => link("job", a.JobID)],
    ["Group", (a) => a.TaskGroup], ["Node", (a) => link("node", a.NodeID, a.NodeName || short(a.NodeID))],
    ["Desired", (a) => a.DesiredStatus], ["Client", (a) => a.ClientStatus],
  ]],
  nodes: ["/v1/nodes", "nodes", [
    ["ID", (n) => link("node", n.ID, short(n.ID))], ["Name", (n) => n.Name], ["Address", (n) => n.Address],
    ["Status", (n) => n.Status], ["Eligibility", (n) => n.SchedulingEligibility], ["Drain", (n) => n.Drain ? "yes" : ""],
  ]],
  plugins: ["/v1/plugins?type=csi", "plugins", [
    ["ID", (p) => link("plugin", p.ID)], ["Provider", (p) => p.Provider],
    ["Controllers", (p) => p.ControllerRequired ? p.ControllersHealthy + "/" + p.ControllersExpected : "—"],
    ["Nodes", (p) => p.NodesHealthy + "/" + p.NodesExpected],
  ]],
};

function listPage(name) {
  const [path, what, cols, attrsOf] = lists[name];
  watch(path, (rows) => {
    rows = rows || [];
    replace(emptyOr(rows, what, table(cols, rows, attrsOf)));
    document.body.dataset.rendered = String(rows.length);
    if (!performance.getEntriesByName("berth:rendered").length) performance.mark("berth:rendered");
    window.dispatchEvent(new CustomEvent("berth:rendered", {detail: rows.length}));
  });
}

// ---- detail pages ----

// kv shows an object's scalar fields; nested values as compact JSON.
function kv(obj, skip) {
  const dl = h("dl", {class: "kv"});
  for (const [k, v] of Object.entries(obj || {})) {
    if (skip && skip.includes(k)) continue;
    if (v === null || v === undefined || v === "") continue;
    dl.append(h("dt", {}, k), h("dd", {}, typeof v === "object" ? JSON.stringify(v) : String(v)));
  }
  return dl;
}

const details = {
  job: (id) => "/v1/job/" + encodeURIComponent(id),
  alloc: (id) => "/v1/allocation/" + encodeURIComponent(id),
  node: (id) => "/v1/node/" + encodeURIComponent(id),
  plugin: (id) => "/v1/plugin/csi/" + encodeURIComponent(id),
};

// Each detail page has a summary box and, for jobs and allocs, a table
// under it; each part follows its own blocking query.
function detailPage(kind, id) {
  const summary = h("div", {id: "summary"}), extra = h("div", {id: "extra"});
  replace(h("div", {}, summary, extra));
  const skip = {job: ["TaskGroups"], alloc: ["Job", "TaskStates", "AllocatedResources", "Resources"]}[kind];
  watch(details[kind](id), (obj) => {
    summary.replaceChildren(kv(obj, skip));
    if (kind === "job") {
      summary.append(h("p", {}, "Groups: ", (obj.TaskGroups || []).map((g) => g.Name + " ×" + g.Count).join(", ")));
    }
    if (kind === "alloc") {
      const tasks = Object.entries(obj.TaskStates || {}).map(([name, st]) => ({name, ...st}));
      const last = (st) => { const e = (st.Events || [])[(st.Events || []).length - 1]; return e ? e.Type + (e.DisplayMessage ? ": " + e.DisplayMessage : "") : ""; };
      extra.replaceChildren(h("h2", {}, "Tasks"), emptyOr(tasks, "task states", table([
        ["Task", (t) => t.name], ["State", (t) => t.State], ["Failed", (t) => t.Failed ? "yes" : ""],
        ["Restarts", (t) => t.Restarts || 0], ["Last event", last]], tasks)));
    }
  });
  if (kind === "job") {
    watch(details.job(id) + "/allocations", (allocs) => {
      allocs = allocs || [];
      extra.replaceChildren(h("h2", {}, "Allocations"), emptyOr(allocs, "allocations", table(lists.allocs[2], allocs)));
    });
  }
}

// ---- the volume page ----

function stepCell(step) { return h("span", {class: "step step-" + step, "data-step": step}, step); }

function timeline(c) {
  const hist = c.History || [];
  if (!hist.length) return h("span", {class: "muted"}, "—");
  return h("ol", {class: "timeline"}, hist.map((t) => h("li", {"data-to": t.To},
    time(t.Time), " ", t.From ? t.From + " → " : "", t.To,
    t.Attempts ? " (attempt " + t.Attempts + ")" : "",
    t.Error ? h("span", {class: "err"}, " — " + t.Error) : "")));
}

function claimsTable(claims, id) {
  const cols = [
    ["Alloc", (c) => link("alloc", c.AllocID, short(c.AllocID))],
    ["Job", (c) => link("job", c.JobID)],
    ["Node", (c) => link("node", c.NodeID, short(c.NodeID))],
    ["Mode", (c) => c.AccessMode || c.Mode],
    ["Step", (c) => stepCell(c.Step)],
    ["Attempts", (c) => c.Attempts || 0],
    ["Last error", (c) => c.LastError ? h("span", {class: "err"}, c.LastError) : ""],
    ["Next retry", (c) => time(c.NextRetry)],
    ["Timeline", timeline],
  ];
  return h("div", {id}, emptyOr(claims, "claims", table(cols, claims, (c) => ({"data-alloc": c.AllocID, "data-step": c.Step}))));
}

function explainView(res) {
  if (typeof res === "string") return h("pre", {class: "explain"}, res);
  const out = h("div", {class: "explain"});
  if (res.Summary) out.append(h("p", {}, h("strong", {}, res.Summary)));
  const fs = res.Findings || [];
  if (fs.length) {
    out.append(h("ul", {}, fs.map((f) => h("li", {"data-kind": f.Kind},
      f.AllocID ? h("span", {class: "muted"}, "alloc " + short(f.AllocID) + ": ") : "",
      f.Why || "", f.Action ? h("div", {}, "→ ", h("code", {}, f.Action)) : ""))));
  }
  if (!res.Summary && !fs.length) out.append(h("pre", {class: "explain"}, JSON.stringify(res, null, 2)));
  return out;
}

let explainSeq = 0;
async function loadExplain(id, box) {
  const seq = ++explainSeq;
  try {
    const res = await get("/v1/volume/csi/" + encodeURIComponent(id) + "/explain");
    if (seq === explainSeq) box.replaceChildren(explainView(res.body));
  } catch (err) {
    if (seq !== explainSeq) return;
    box.replaceChildren(h("p", {class: "muted"}, err.status === 404 || err.status === 405
      ? "This agent has no explain endpoint (" + err.message + "); the claims above show each step."
      : "explain: " + describe(err)));
  }
}

function volumePage(id) {
  const explainBox = h("div", {id: "explain"}, h("p", {class: "muted"}, "loading…"));
  watch("/v1/volume/csi/" + encodeURIComponent(id), (v) => {
    const claims = v.Claims || [], past = v.PastClaims || [];
    replace(h("div", {},
      kv({ID: v.ID, Name: v.Name, Namespace: v.Namespace, Plugin: v.PluginID, Provider: v.Provider,
        State: v.State, Schedulable: v.Schedulable ? "yes" : "no", "Access mode": v.AccessMode,
        "Attachment mode": v.AttachmentMode, Readers: v.CurrentReaders, Writers: v.CurrentWriters,
        Controllers: v.ControllerRequired ? v.ControllersHealthy + "/" + v.ControllersExpected : "not required",
        Nodes: v.NodesHealthy + "/" + v.NodesExpected, "Modify index": v.ModifyIndex}),
      h("h2", {}, "Claims"), claimsTable(claims, "claims"),
      h("h2", {}, "Past claims"), claimsTable(past, "past-claims"),
      h("h2", {}, "Explain"), explainBox));
    loadExplain(id, explainBox);
  });
}

// ---- the token form ----

function showToken() {
  document.getElementById("token-state").textContent = token() ? "token set (this tab)" : "no ACL token";
}

function restart() {
  generation++;
  for (const c of controllers) c.abort();
  controllers.clear();
  document.getElementById("content").replaceChildren();
  start();
}

function start() {
  const page = document.body.dataset.page, id = document.body.dataset.id;
  if (lists[page]) listPage(page);
  else if (page === "volume") volumePage(id);
  else if (details[page]) detailPage(page, id);
}

document.addEventListener("DOMContentLoaded", () => {
  const form = document.getElementById("token-form");
  form.addEventListener("submit", (e) => {
    e.preventDefault();
    const input = document.getElementById("token");
    const v = input.value.trim();
    if (v) sessionStorage.setItem(TOKEN_KEY, v);
    input.value = "";
    showToken();
    restart();
  });
  document.getElementById("token-clear").addEventListener("click", () => {
    sessionStorage.removeItem(TOKEN_KEY);
    showToken();
    restart();
  });
  showToken();
  start();
});
