// The dashboard of `shoal ui`: reads /api/… of the server that served it and
// draws the page the path names. Every value from the cluster goes into the
// page as text (textContent), never as markup.
"use strict";

const $main = document.getElementById("main");
const $status = document.getElementById("status");
let timer = null; // the page's refresh
let source = null; // the job page's event stream
let agent = ""; // the local agent: "n1 · shoal 1.2.3"

function el(tag, attrs, ...kids) {
  const e = tag.startsWith("svg:")
    ? document.createElementNS("http://www.w3.org/2000/svg", tag.slice(4))
    : document.createElement(tag);
  for (const [k, v] of Object.entries(attrs || {})) {
    if (v !== undefined && v !== null) e.setAttribute(k, v);
  }
  for (const k of kids) {
    if (k === null || k === undefined || k === false) continue;
    e.append(k instanceof Node ? k : document.createTextNode(String(k)));
  }
  return e;
}

async function getJSON(path) {
  const r = await fetch(path, { credentials: "same-origin", cache: "no-store" });
  const body = await r.json().catch(() => ({ error: r.status + " " + r.statusText }));
  if (!r.ok) throw new Error(body.error || r.statusText);
  return body;
}

function status(text, bad) {
  $status.textContent = text;
  $status.className = bad ? "status bad" : "status";
}

// seconds of a Go duration as the API writes it: "1.5s", "250ms", "2m0s" or a number of seconds.
function seconds(d) {
  if (d === undefined || d === null || d === "") return 0;
  if (typeof d === "number") return d;
  let s = 0;
  const re = /([\d.]+)(h|ms|us|µs|ns|m|s)/g;
  let m;
  while ((m = re.exec(d)) !== null) {
    const v = parseFloat(m[1]);
    s += v * { h: 3600, m: 60, s: 1, ms: 1e-3, us: 1e-6, "µs": 1e-6, ns: 1e-9 }[m[2]];
  }
  return s;
}

function fmtDur(s) {
  if (!isFinite(s) || s < 0) return "";
  if (s < 0.01) return (s * 1000).toFixed(2) + " ms";
  if (s < 1) return Math.round(s * 1000) + " ms";
  if (s < 60) return s.toFixed(1) + " s";
  if (s < 3600) return Math.floor(s / 60) + " m " + Math.round(s % 60) + " s";
  return Math.floor(s / 3600) + " h " + Math.round((s % 3600) / 60) + " m";
}

function fmtTime(t) {
  if (!t) return "";
  const d = new Date(t);
  return d.toLocaleTimeString([], { hour12: false }) + "." + String(d.getMilliseconds()).padStart(3, "0");
}

function stateCell(st) { return el("td", { class: "state state-" + st }, st); }

function bar(frac) {
  const f = Math.max(0, Math.min(1, frac || 0));
  const inner = el("span");
  inner.style.width = (f * 100).toFixed(1) + "%";
  return el("span", { class: "progress" }, el("span", { class: "bar" }, inner), el("span", { class: "pct" }, Math.round(f * 100) + "%"));
}

function owner(j) {
  const o = j.spec && j.spec.owner;
  if (!o) return "(agent's user)";
  return o.name || "uid " + o.uid;
}

function progressOf(j) {
  if (j.farm && j.farm.total) return j.farm.done / j.farm.total;
  if (j.state === "succeeded") return 1;
  return j.progress || 0;
}

// reported is the fraction a "progress" event says ("progress 60%"), or null.
function reported(e) {
  const m = e.type === "progress" && /^progress (\d+)%/.exec(e.message || "");
  return m ? parseInt(m[1], 10) / 100 : null;
}

// lastReported is the progress the newest of events reports, or 0.
function lastReported(events) {
  for (let i = events.length - 1; i >= 0; i--) {
    const p = reported(events[i]);
    if (p !== null) return p;
  }
  return 0;
}

function duration(j) {
  const from = j.started || j.submitted;
  if (!from) return "";
  const to = j.ended ? new Date(j.ended) : new Date();
  return fmtDur((to - new Date(from)) / 1000);
}

function intervalText(j) {
  if (!j.interval) return "";
  const every = seconds(j.interval.every);
  return (every ? fmtDur(every) : "none") + (j.interval.auto ? " (auto)" : "");
}

function rankCount(j) { return j.ranks || (j.spec && j.spec.ranks) || ""; }

// refresh runs load now and every second after, until the page changes.
function refresh(load) {
  const tick = async () => {
    try {
      await load();
      status((agent ? agent + " · " : "") + "live · " + new Date().toLocaleTimeString([], { hour12: false }));
    } catch (e) {
      status("agent: " + e.message, true);
    }
  };
  tick();
  timer = setInterval(tick, 1000);
}

// --- nodes -----------------------------------------------------------------

function nodesPage() {
  const table = el("table", { id: "nodes" },
    el("thead", {}, el("tr", {}, ...["node", "state", "role", "arch", "cores", "speed", "ranks", "since", "rtt", "address"].map((h) => el("th", {}, h)))),
    el("tbody"));
  const links = el("div", { id: "links" });
  $main.replaceChildren(el("h1", {}, "Nodes"), table, el("h2", {}, "Links"), links);
  refresh(async () => {
    const v = await getJSON("/api/nodes");
    const rows = v.nodes.map((n) => el("tr", { "data-node": n.name, "data-state": n.state },
      el("td", {}, n.name + (n.local ? " (this node)" : "") + (n.leaving ? " (leaving)" : "")),
      stateCell(n.state),
      el("td", {}, n.role || ""),
      el("td", {}, n.arch),
      el("td", { class: "num" }, n.cpus ? n.cores + " (" + n.cpus + " CPUs)" : n.cores),
      el("td", { class: "num" }, (n.speed / 1e6).toFixed(0) + " M/s"),
      el("td", { class: "num" }, n.ranks),
      el("td", {}, fmtTime(n.since)),
      el("td", { class: "num" }, n.rtt ? fmtDur(seconds(n.rtt)) : ""),
      el("td", {}, n.api)));
    table.tBodies[0].replaceChildren(...rows);
    links.replaceChildren(linkMatrix(v));
  });
}

function linkMatrix(v) {
  if (!v.links || v.links.length === 0) {
    return el("p", { class: "note" }, v.links_error ? "No links: " + v.links_error : "No link measured yet.");
  }
  const names = [...new Set(v.links.flatMap((l) => [l.from, l.to]))].sort();
  const at = new Map(v.links.map((l) => [l.from + "\u0000" + l.to, l]));
  const head = el("tr", {}, el("th", {}, "from \\ to"), ...names.map((n) => el("th", {}, n)));
  const rows = names.map((from) => el("tr", {}, el("th", {}, from), ...names.map((to) => {
    const l = at.get(from + "\u0000" + to);
    if (!l) return el("td", {}, from === to ? "·" : "");
    const parts = [];
    if (l.bandwidth || seconds(l.rtt) > 0) parts.push(fmtDur(seconds(l.rtt)) + (l.bandwidth ? " · " + (l.bandwidth / 1e6).toFixed(0) + " MB/s" : ""));
    // A direction that cannot open a connection says how it failed (docs/api.md, reach).
    if (l.reach && l.reach.result !== "reachable") parts.push(l.reach.result.replace("-", " "));
    return el("td", { class: l.estimated ? "est" : "", title: l.estimated ? "estimated" : "measured " + fmtTime(l.measured) }, parts.join(" · "));
  })));
  return el("table", { class: "matrix" }, el("thead", {}, head), el("tbody", {}, ...rows));
}

// --- jobs ------------------------------------------------------------------

function jobsPage() {
  const table = el("table", { id: "jobs" },
    el("thead", {}, el("tr", {}, ...["job", "owner", "state", "progress", "restarts", "epoch", "interval", "ranks", "submitted", "duration"].map((h) => el("th", {}, h)))),
    el("tbody"));
  const empty = el("p", { class: "empty" });
  $main.replaceChildren(el("h1", {}, "Jobs"), table, empty);
  refresh(async () => {
    const v = await getJSON("/api/jobs");
    empty.textContent = v.jobs.length ? "" : "No jobs.";
    table.tBodies[0].replaceChildren(...v.jobs.map((j) => el("tr", { "data-job": j.id, "data-state": j.state },
      el("td", {}, el("a", { href: "/jobs/" + encodeURIComponent(j.id) }, j.id), j.farm ? " (farm)" : ""),
      el("td", {}, owner(j)),
      stateCell(j.state),
      el("td", {}, bar(progressOf(j))),
      el("td", { class: "num" }, j.restarts),
      el("td", { class: "num" }, j.epoch || ""),
      el("td", {}, intervalText(j)),
      el("td", { class: "num" }, rankCount(j)),
      el("td", {}, fmtTime(j.submitted)),
      el("td", {}, duration(j)))));
  });
}

// --- one job ---------------------------------------------------------------

const markKinds = {
  epoch: "epoch", "epoch-bad": "loss", "rank-lost": "loss", "node-lost": "loss", "node-fault": "loss",
  restart: "restart", reconfigure: "move", resize: "move",
};
const markColor = { epoch: "#2e9e5b", loss: "#c62828", restart: "#e67e22", move: "#8e44ad" };

function jobPage(id) {
  const events = [];
  const samples = []; // [time, progress, checkpoint cost] as the record said
  const cards = el("div", { class: "cards", id: "job-cards" });
  const placement = el("div", { id: "placement" });
  const plot = el("div", { id: "timeline" });
  const cost = el("div", { id: "cost" });
  const tasks = el("div", { id: "tasks" });
  const list = el("ol", { id: "events" });
  const mpi = el("div", {}, el("h2", {}, "Where the ranks run"), placement);
  const ckpt = el("div", {}, el("h2", {}, "Checkpoint cost"), cost);
  $main.replaceChildren(el("h1", {}, "Job " + id), cards, mpi,
    el("h2", {}, "Timeline"), plot, ckpt, tasks,
    el("h2", {}, "Events"), list);
  let record = null;
  const draw = () => {
    if (!record) return;
    plot.replaceChildren(timeline(record, events, samples));
    if (record.farm) {
      mpi.hidden = ckpt.hidden = true; // a farm's tasks run as plain processes, without checkpoints
      tasks.replaceChildren(el("h2", {}, "Tasks"), farmTasks(record, events));
    } else {
      cost.replaceChildren(costPlot(record, samples));
    }
  };
  source = new EventSource("/api/jobs/" + encodeURIComponent(id) + "/events");
  source.onmessage = (m) => {
    const e = JSON.parse(m.data);
    events.push(e);
    const li = el("li", { class: e.type, "data-seq": e.seq, "data-type": e.type, "data-time": e.time, "data-received": Date.now() },
      el("span", { class: "t" }, fmtTime(e.time)), el("span", { class: "k" }, e.type), " ", e.message || (e.state ? "→ " + e.state : ""));
    list.append(li);
    li.scrollIntoView({ block: "nearest" });
    if (e.type === "done") {
      source.close();
      load().catch(() => {});
    }
    draw();
  };
  const load = async () => {
    record = await getJSON("/api/jobs/" + encodeURIComponent(id));
    const j = record;
    samples.push([Date.now(), progressOf(j), j.interval ? seconds(j.interval.cost) : 0]);
    const card = (k, v) => el("div", { class: "card" }, el("b", {}, k), v);
    const kids = [
      card("state", el("span", { class: "state state-" + j.state, id: "job-state" }, j.state)),
      card("owner", owner(j)),
      card("progress", bar(Math.max(progressOf(j), lastReported(events)))),
      card("ranks", rankCount(j)),
      card("restarts", j.restarts),
      card("epoch", j.epoch || "none"),
      card("interval", intervalText(j) || "none"),
      card("coordinator", j.coordinator || ""),
      card("submitted", fmtTime(j.submitted)),
      card("duration", duration(j)),
    ];
    if (j.reason) kids.push(card("reason", j.reason));
    cards.replaceChildren(...kids);
    const nodes = Object.keys(j.placement || {}).sort();
    placement.replaceChildren(nodes.length
      ? el("table", { id: "ranks" }, el("thead", {}, el("tr", {}, el("th", {}, "node"), el("th", {}, "ranks"))),
        el("tbody", {}, ...nodes.map((n) => el("tr", { "data-node": n }, el("td", {}, n), el("td", {}, ranges(j.placement[n]))))))
      : el("p", { class: "note" }, "Not placed."));
    draw();
  };
  refresh(load);
}

// ranges writes [0,1,2,5] as "0–2, 5".
function ranges(rs) {
  const out = [];
  const s = [...rs].sort((a, b) => a - b);
  for (let i = 0; i < s.length; i++) {
    let k = i;
    while (k + 1 < s.length && s[k + 1] === s[k] + 1) k++;
    out.push(k > i ? s[i] + "–" + s[k] : String(s[i]));
    i = k;
  }
  return out.join(", ");
}

const W = 900, H = 220, PAD = { l: 44, r: 12, t: 12, b: 28 };

function axes(svg, t0, t1, ymax, yfmt) {
  const x = (t) => PAD.l + ((t - t0) / Math.max(1, t1 - t0)) * (W - PAD.l - PAD.r);
  const y = (v) => H - PAD.b - (v / ymax) * (H - PAD.t - PAD.b);
  svg.append(el("svg:line", { x1: PAD.l, y1: y(0), x2: W - PAD.r, y2: y(0), stroke: "#98a2b3" }));
  svg.append(el("svg:line", { x1: PAD.l, y1: PAD.t, x2: PAD.l, y2: y(0), stroke: "#98a2b3" }));
  for (let i = 0; i <= 4; i++) {
    const v = (ymax * i) / 4;
    svg.append(el("svg:text", { x: PAD.l - 6, y: y(v) + 4, "text-anchor": "end" }, yfmt(v)));
    if (i) svg.append(el("svg:line", { x1: PAD.l, y1: y(v), x2: W - PAD.r, y2: y(v), stroke: "#eef0f3" }));
  }
  for (let i = 0; i <= 5; i++) {
    const t = t0 + ((t1 - t0) * i) / 5;
    svg.append(el("svg:text", { x: x(t), y: H - 8, "text-anchor": "middle" }, "+" + fmtDur((t - t0) / 1000)));
  }
  return { x, y };
}

// timeline plots the job's progress from its submission to its end (or now),
// with each checkpoint, loss, restart and move marked at its time.
function timeline(j, events, samples) {
  const t0 = new Date(j.submitted).getTime();
  const t1 = j.ended ? Math.max(new Date(j.ended).getTime(), t0 + 1) : Math.max(Date.now(), t0 + 1000);
  const svg = el("svg:svg", { viewBox: `0 0 ${W} ${H}`, width: W, height: H, id: "timeline-svg" });
  const { x, y } = axes(svg, t0, t1, 1, (v) => Math.round(v * 100) + "%");
  // Progress: the program's reports (events, in steps of 10%); a farm's, what
  // its record said each time the page read it. Each holds until the next.
  const pts = [[t0, 0]];
  for (const e of events) {
    const p = reported(e);
    if (p !== null) pts.push([new Date(e.time).getTime(), p]);
  }
  if (j.farm && j.farm.total) {
    let done = 0;
    for (const e of events) {
      if (e.type === "task-done") pts.push([new Date(e.time).getTime(), ++done / j.farm.total]);
    }
  }
  pts.sort((a, b) => a[0] - b[0]);
  pts.push([j.ended ? t1 : Math.min(Date.now(), t1), pts[pts.length - 1][1]]);
  const steps = pts.flatMap(([t, p], i) => (i ? [[t, pts[i - 1][1]], [t, p]] : [[t, p]]));
  svg.append(el("svg:polyline", { points: steps.map(([t, p]) => x(t).toFixed(1) + "," + y(p).toFixed(1)).join(" "), fill: "none", stroke: "#1f5fbf", "stroke-width": 2 }));
  // Losses last, over the restart that follows each at the same time.
  const order = { epoch: 0, move: 1, restart: 2, loss: 3 };
  const marked = events.filter((e) => markKinds[e.type]).sort((a, b) => order[markKinds[a.type]] - order[markKinds[b.type]]);
  for (const e of marked) {
    const kind = markKinds[e.type];
    const xt = x(new Date(e.time).getTime());
    const c = markColor[kind];
    const g = el("svg:g", { class: "mark mark-" + kind, "data-type": e.type });
    g.append(el("svg:title", {}, fmtTime(e.time) + " " + e.type + ": " + (e.message || "")));
    if (kind === "epoch") {
      g.append(el("svg:line", { x1: xt, y1: y(0), x2: xt, y2: y(0) - 10, stroke: c, "stroke-width": 2 }));
    } else {
      g.append(el("svg:line", { x1: xt, y1: PAD.t, x2: xt, y2: y(0), stroke: c, "stroke-width": 1.5, "stroke-dasharray": kind === "move" ? "4 3" : null }));
      g.append(el("svg:circle", { cx: xt, cy: PAD.t + (kind === "loss" ? 4 : 14), r: 4, fill: c }));
    }
    svg.append(g);
  }
  const legend = el("div", { class: "legend" },
    ...[["progress", "progress"], ["epoch", "checkpoint"], ["loss", "loss"], ["restart", "restart"], ["move", "move"]]
      .map(([k, t]) => el("span", {}, el("span", { class: "sw sw-" + k }), t)));
  return el("div", {}, svg, legend);
}

// costPlot draws what a checkpoint blocked rank 0 (the record's weighted mean)
// as the page read it over time.
function costPlot(j, samples) {
  const pts = samples.filter(([, , c]) => c > 0);
  if (pts.length === 0) return el("p", { class: "note" }, "No checkpoint cost reported yet (libshoal reports it with an automatic interval).");
  const t0 = pts[0][0], t1 = Math.max(pts[pts.length - 1][0], t0 + 1000);
  const ymax = Math.max(...pts.map((p) => p[2])) * 1.2;
  const svg = el("svg:svg", { viewBox: `0 0 ${W} ${H}`, width: W, height: H });
  const { x, y } = axes(svg, t0, t1, ymax, (v) => fmtDur(v));
  svg.append(el("svg:polyline", { points: pts.map(([t, , c]) => x(t).toFixed(1) + "," + y(c).toFixed(1)).join(" "), fill: "none", stroke: "#2e9e5b", "stroke-width": 2 }));
  return svg;
}

// farmTasks lists a farm's tasks as its events tell them: done (where, how
// long) or failed.
function farmTasks(j, events) {
  const byTask = new Map();
  for (const e of events) {
    if ((e.type === "task-done" || e.type === "task-failed") && e.data) {
      byTask.set(e.data.task, { e, d: e.data });
    }
  }
  const f = j.farm;
  const summary = el("p", {}, `${f.done} of ${f.total} done, ${f.running} running, ${f.failed} failed` + (f.rate ? `, ${f.rate.toFixed(2)} tasks/s` : ""));
  const rows = [...byTask.keys()].sort((a, b) => a - b).map((k) => {
    const { e, d } = byTask.get(k);
    return el("tr", { "data-task": k },
      el("td", { class: "num" }, k),
      stateCell(e.type === "task-done" ? "succeeded" : "failed"),
      el("td", {}, d.node || ""),
      el("td", { class: "num" }, d.seconds !== undefined ? fmtDur(d.seconds) : ""),
      el("td", { class: "num" }, d.size !== undefined ? d.size + " B" : ""),
      el("td", {}, (d.holders || []).join(", ")));
  });
  return el("div", {}, summary, el("table", { id: "farm-tasks" },
    el("thead", {}, el("tr", {}, ...["task", "state", "node", "time", "result", "held by"].map((h) => el("th", {}, h)))),
    el("tbody", {}, ...rows)));
}

// --- routing ---------------------------------------------------------------

function route() {
  const p = location.pathname;
  document.getElementById("nav-nodes").className = p === "/" || p === "/nodes" ? "active" : "";
  document.getElementById("nav-jobs").className = p.startsWith("/jobs") ? "active" : "";
  const m = /^\/jobs\/(.+)$/.exec(p);
  if (m) {
    document.title = "Shoal · job " + decodeURIComponent(m[1]);
    jobPage(decodeURIComponent(m[1]));
  } else if (p === "/jobs") {
    document.title = "Shoal · jobs";
    jobsPage();
  } else {
    document.title = "Shoal · nodes";
    nodesPage();
  }
}

getJSON("/api/agent").then((h) => { agent = h.name + " · shoal " + h.version; }).catch(() => {});
route();
