// agentflow run viewer: everything is derived here from the run's own files (embedded as JSON above).
// All run content is inserted as text (textContent), never as HTML: patches and model output are untrusted.
"use strict";
(function () {
  const D = JSON.parse(document.getElementById("run-data").textContent);
  const $main = document.getElementById("main");
  const $detail = document.getElementById("detail");

  // ------------------------------------------------------------------------------------------------ helpers
  function h(tag, attrs, ...kids) {
    const el = document.createElement(tag);
    for (const [k, v] of Object.entries(attrs || {})) {
      if (v === null || v === undefined || v === false) continue;
      if (k === "on") for (const [ev, fn] of Object.entries(v)) el.addEventListener(ev, fn);
      else if (k === "cls") el.className = v;
      else if (k === "style") el.style.cssText = v;  // CSSOM: the page's CSP refuses style attributes
      else el.setAttribute(k, v === true ? "" : String(v));
    }
    for (const kid of kids.flat(Infinity)) {
      if (kid === null || kid === undefined || kid === false) continue;
      el.appendChild(kid instanceof Node ? kid : document.createTextNode(String(kid)));
    }
    return el;
  }
  const fmtS = (s) => (s === null || s === undefined || isNaN(s)) ? "" :
    s < 1 ? (s * 1000).toFixed(0) + " ms" : s < 120 ? s.toFixed(1) + " s" : (s / 60).toFixed(1) + " min";
  const fmtN = (n) => (n || 0).toLocaleString("en-US");
  const fmtUsd = (u) => u ? "$" + u.toFixed(4) : "";
  const json = (v) => JSON.stringify(v, null, 2);
  function pre(text, diff) {
    const el = h("pre", {});
    if (!diff) { el.textContent = text; return el; }
    for (const line of String(text).split("\n")) {
      const cls = line.startsWith("@@") ? "hunk" : line.startsWith("+") && !line.startsWith("+++") ? "add" :
        line.startsWith("-") && !line.startsWith("---") ? "del" : null;
      el.appendChild(h("span", { cls }, line + "\n"));
    }
    return el;
  }
  function pill(text, kind) { return h("span", { cls: "pill " + (kind || "") }, text); }
  function passMark(p) { return p === true ? pill("pass", "ok") : p === false ? pill("fail", "bad") : pill("–"); }

  // ------------------------------------------------------------------------------------------------ events
  const E = D.events.map(([ts, kind, node, parent, data], i) => ({ i, ts, kind, node, parent, data: data || {} }));
  const t0 = E.length ? E[0].ts : 0;
  const tEnd = E.length ? E[E.length - 1].ts : 0;
  const instanceIds = new Set(Object.keys((D.report && D.report.instances) || {}));
  for (const e of E) if (e.kind === "repair.start" && e.node) instanceIds.add(e.node);
  for (const id of Object.keys(D.preds)) instanceIds.add(id);
  function instOf(e) {
    if (e.data.instance_id) return e.data.instance_id;
    const id = e.node || e.parent;
    if (!id) return null;
    const head = id.split("/")[0];
    return instanceIds.has(head) ? head : null;
  }
  const byInst = new Map();
  for (const e of E) {
    const iid = instOf(e);
    if (iid === null) continue;
    if (!byInst.has(iid)) byInst.set(iid, []);
    byInst.get(iid).push(e);
  }

  // Spans: start/end pairs and the leaf events that carry a duration (the same rules as the trace export).
  // A run's key holds its task (a bench runs one workflow per task, several at once); a node's id
  // already does. A top-level run.start / run.resume begins a new leg of the run (after a crash or a pause):
  // what was still open ended with the previous leg's last event, so no span reaches across the gap.
  const PAIRS = { run: "run", node: "node", agent: "agent", repair: "repair" };
  const spanKey = (scope, e) => scope + ":" + (scope === "run" ? (e.data.instance_id || "") : (e.node || ""));
  function spansOf(events) {
    const open = new Map(), out = [];
    let previous = null;
    for (const e of events) {
      const [scope, phase] = e.kind.split(".");
      if (scope === "run" && (phase === "start" || phase === "resume") && !e.data.instance_id) {
        for (const span of [...open.values()].flat()) { span.end = previous ? previous.ts : span.start; span.cut = true; }
        open.clear();
      }
      previous = e;
      if (PAIRS[scope] && (phase === "start" || phase === "resume")) {
        const key = spanKey(scope, e);
        const span = { kind: scope, label: scope === "run" ? (e.data.workflow || D.kind) + " run" + (phase === "resume" ? " (resumed)" : "") :
          scope + " " + (e.node || ""), start: e.ts, end: null, ev: e, depth: { run: 0, repair: 1, node: 1, agent: 2 }[scope] };
        if (!open.has(key)) open.set(key, []);
        open.get(key).push(span); out.push(span);  // one key may be open several times (samples of one agent)
      } else if (PAIRS[scope] && (phase === "end" || (scope === "node" && phase === "failed"))) {
        const span = (open.get(spanKey(scope, e)) || []).shift();  // the oldest open one ends first
        if (span) { span.end = e.ts; span.endEv = e;
          if (phase === "failed" || e.data.error || e.data.status === "error" || e.data.status === "failed") span.error = true; }
      } else {
        const dur = e.kind === "model.call" ? e.data.latency_s : e.data.duration_s;
        const kind = { "model.call": "model", "tool.call": "tool", "sandbox.exec": "sandbox", "repair.attempt": "attempt" }[e.kind];
        if (!kind) continue;
        const label = kind === "model" ? "chat " + (e.data.model || e.data.spec || "") :
          kind === "tool" ? "tool " + (e.data.name || "") : kind === "sandbox" ? "$ " + (e.data.command || "") :
          "apply " + (e.node || "");
        out.push({ kind, label, start: e.ts - (dur || 0), end: e.ts, ev: e, depth: 3,
          error: kind === "tool" ? e.data.ok === false : false,
          tokens: e.data.usage ? (e.data.usage.input_tokens || 0) + (e.data.usage.output_tokens || 0) : 0 });
      }
    }
    for (const span of [...open.values()].flat()) span.end = events.length ? events[events.length - 1].ts : span.start;
    for (const span of out) span.end = Math.max(span.end, span.start);  // clocks may step back; a span never does
    return out.sort((a, b) => a.start - b.start || a.depth - b.depth);
  }

  function usageOf(events) {
    const u = { calls: 0, input: 0, output: 0, usd: 0, tools: 0, execs: 0, exceeded: [] };
    for (const e of events) {
      if (e.kind === "model.call") {
        const x = e.data.usage || {};
        u.calls += 1; u.input += x.input_tokens || 0; u.output += x.output_tokens || 0; u.usd += x.cost_usd || 0;
      } else if (e.kind === "tool.call") u.tools += 1;
      else if (e.kind === "sandbox.exec") u.execs += 1;
      else if (e.kind === "budget.exceeded") u.exceeded.push(e);
    }
    return u;
  }

  // --------------------------------------------------------------------------------------------- detail pane
  function showDetail(title, ...content) {
    $detail.replaceChildren(h("button", { cls: "close", title: "close", on: { click: hideDetail } }, "×"),
      h("h2", {}, title), ...[content].flat(Infinity).filter(Boolean));
    $detail.hidden = false;
    document.body.classList.add("with-detail");
  }
  function hideDetail() { $detail.hidden = true; document.body.classList.remove("with-detail"); }
  function messagesView(messages) {
    return messages.map((m) => h("div", { cls: "msg" }, h("div", { cls: "role" }, m.role + (m.name ? " " + m.name : "")),
      m.content ? pre(m.content) : null,
      (m.tool_calls || []).map((c) => h("div", {}, "→ " + c.name, pre(json(c.arguments))))));
  }
  function eventDetail(span) {
    const e = span.ev, d = e.data, parts = [];
    parts.push(h("p", { cls: "muted" }, `${e.kind} · node ${e.node || "–"} · at +${fmtS(e.ts - t0)}` +
      (span.end !== null ? ` · ${fmtS(span.end - span.start)}` : "")));
    if (e.kind === "model.call") {
      const u = d.usage || {};
      parts.push(h("p", {}, `model ${d.model || ""} (${d.spec || ""}) · tokens in ${fmtN(u.input_tokens)} / out ` +
        `${fmtN(u.output_tokens)} · finish ${(d.finish_reasons || []).join(", ")}${d.cached ? " · cached" : ""}`));
      if (d.messages) parts.push(h("h3", {}, "messages"), messagesView(d.messages), h("h3", {}, "reply"),
        messagesView(d.output || []));
      else parts.push(h("p", { cls: "muted" }, "message contents are not recorded (opt in with -c trace.content=true)"));
    } else if (e.kind === "tool.call") {
      parts.push(h("h3", {}, "arguments"), pre(json(d.args || {})), h("h3", {}, d.ok === false ? "error" : "result"),
        pre(d.text || d.error || ""));
    }
    parts.push(h("h3", {}, "event"), pre(json(d)));
    if (span.endEv) parts.push(h("h3", {}, "end"), pre(json(span.endEv.data)));
    showDetail(span.label, parts);
  }

  // ------------------------------------------------------------------------------------------------- timeline
  function timeline(events, limit) {
    const spans = spansOf(events);
    if (!spans.length) return h("p", { cls: "muted" }, "no timed events");
    let lo = Infinity, hi = -Infinity;  // a loop: spreading thousands of values into Math.min can overflow
    for (const s of spans) { lo = Math.min(lo, s.start); hi = Math.max(hi, s.end); }
    const width = Math.max(hi - lo, 1e-6);
    const max = limit || 2000;
    const rows = spans.slice(0, max).map((s) => {
      const left = (100 * (s.start - lo)) / width, w = (100 * (s.end - s.start)) / width;
      const row = h("div", { cls: "tl-row", "data-kind": s.kind, on: { click: () => {
        for (const r of row.parentNode.querySelectorAll(".sel")) r.classList.remove("sel");
        row.classList.add("sel"); eventDetail(s); } } },
        h("div", { cls: "tl-label", style: `padding-left:${6 + 12 * s.depth}px`, title: s.label }, s.label),
        h("div", { cls: "tl-track" }, h("div", { cls: "tl-bar " + s.kind + (s.error ? " error" : ""),
          style: `left:${left.toFixed(3)}%;width:${w.toFixed(3)}%` })),
        h("div", { cls: "tl-meta" }, fmtS(s.end - s.start) + (s.tokens ? ` · ${fmtN(s.tokens)} tok` : "") +
          (s.cut ? " · cut short" : "")));
      return row;
    });
    const more = spans.length > max ? h("p", { cls: "muted" }, `${spans.length - max} more spans not shown`) : null;
    return h("div", {}, h("div", { cls: "tl", id: "timeline" }, rows), more);
  }

  // ----------------------------------------------------------------------------------------------- search tree
  const candById = new Map(D.candidates.map((c) => [c.candidate_id, c]));
  // a branch's name in its tree: its id, after its pass when a search node ran again in a loop (`s7/b0`)
  function branchName(id) {
    const parts = id.split("/");
    return parts.length > 2 && /^s\d+$/.test(parts[parts.length - 2]) ? parts.slice(-2).join("/") : parts[parts.length - 1];
  }
  function searchTree(iid, events) {
    const nodes = new Map();
    for (const e of events) if (e.kind === "search.node" && e.node) nodes.set(e.node, Object.assign({ id: e.node, parent: e.parent }, e.data));
    if (!nodes.size) return h("p", { cls: "muted" }, "no search tree in this run");
    const end = events.find((e) => e.kind === "repair.end") || {};
    const chosen = end.data ? end.data.chosen : null, chosenBy = end.data ? end.data.chosen_by : null;
    const kids = new Map();
    for (const n of nodes.values()) {
      const key = n.parent && nodes.has(n.parent) ? n.parent : "";
      if (!kids.has(key)) kids.set(key, []);
      kids.get(key).push(n);
    }
    // a branch's candidates: those its nodes verified (`repair.attempt`, tagged with the branch), of which it
    // shows the chosen one, else its best (tests passed, then score; the later on a tie)
    const inBranch = new Map();
    for (const e of events) if (e.kind === "repair.attempt" && e.data.branch && candById.has(e.node)) {
      const key = (e.data.instance_id && e.node.startsWith(e.data.instance_id + "/") ? e.data.instance_id + "/" : "") +
        `${e.data.search}/${e.data.branch}`;
      if (!inBranch.has(key)) inBranch.set(key, []);
      inBranch.get(key).push(candById.get(e.node));
    }
    const rank = (c) => [(c.verification || {}).passed === true ? 1 : 0, +(c.verification || {}).score || 0];
    const bestOf = (cs) => cs.find((c) => c.candidate_id === chosen) || cs.reduce((a, b) => {
      const [pa, sa] = rank(a), [pb, sb] = rank(b);
      return pb > pa || (pb === pa && sb >= sa) ? b : a;
    });
    const candOf = (n) => inBranch.has(n.id) ? bestOf(inBranch.get(n.id)) : null;
    const chosenPath = new Set();
    for (const n of nodes.values()) {
      const c = candOf(n);
      if (c && chosen && c.candidate_id === chosen) for (let p = n; p && !chosenPath.has(p.id); p = nodes.get(p.parent)) chosenPath.add(p.id);
    }
    // a node's value as its label shows it: the backed-up mean over its subtree (mcts), else its own
    const backedUp = (n) => +(n.mean !== undefined && n.mean !== null ? n.mean : n.value) || 0;
    function nodeDetail(n) {
      const c = candOf(n), parts = [];
      parts.push(h("div", {}, `value ${backedUp(n).toFixed(3)} backed up · own ${(+n.value || 0).toFixed(3)} · ` +
        `visits ${n.visits} · depth ${n.depth}` + (n.terminal ? " · terminal" : "")));
      // the nodes the branch's step ran, and why it failed
      parts.push(h("p", { cls: "muted" }, n.action ? "ran " + n.action : "the starting point (the run's state at the search node)"));
      if (n.error) parts.push(h("div", { cls: "bad" }, "failed: " + n.error));
      if (n.thread) parts.push(h("div", { cls: "muted" }, "checkpoint thread " + n.thread));
      if (!c) return parts.concat(branchDetail(n));
      const v = c.verification || {};
      const chain = [];  // a chain of attempts in one branch (best-of-N): each built on the one before
      for (let p = candById.get(c.parent_id); p && chain.length < 50; p = candById.get(p.parent_id)) chain.unshift(p.candidate_id);
      const parentCand = candOf(nodes.get(n.parent) || {});
      if (chain.length && !(parentCand && chain[chain.length - 1] === parentCand.candidate_id))
        parts.push(h("div", { cls: "muted" }, "built on " + chain.join(" → ")));
      parts.push(h("div", {}, "candidate ", h("b", {}, c.candidate_id), " · ", c.status, " · verification ",
        passMark(v.passed), ` score ${(+v.score || 0).toFixed(3)} (${v.kind || ""})`,
        c.candidate_id === chosen ? h("b", { cls: "ok" }, ` · chosen (by ${chosenBy})`) : null));
      if (whyFailed(c)) parts.push(h("p", { cls: "bad" }, whyFailed(c)));
      parts.push(testsView(v.tests_status));
      if (v.output) parts.push(h("h3", {}, "test output"), pre(v.output));
      if ((c.edit_errors || []).length) parts.push(h("h3", {}, "edit errors"), pre(c.edit_errors.join("\n")));
      parts.push(h("h3", {}, "patch"), h("div", { cls: "patch" }, pre(c.patch || "(empty)", true)));
      return parts;
    }
    function render(n) {
      const ch = kids.get(n.id) || [];
      const c = candOf(n), passed = c ? (c.verification || {}).passed : branchPassed(n);
      const isChosen = chosen ? !!c && c.candidate_id === chosen : n.chosen === true;  // a repair's choice first
      const box = h("div", { cls: "snode" + (isChosen ? " chosen" : ""), "data-node-id": n.id });
      const toggle = h("span", { cls: "toggle" }, ch.length ? "▸" : "·");
      let kidsEl = null, detailEl = null;
      const row = h("div", { cls: "srow", on: { click: () => {
        if (detailEl) { detailEl.remove(); detailEl = null; } else { detailEl = h("div", { cls: "sdetail" }, nodeDetail(n)); row.after(detailEl); }
        if (ch.length) {
          if (kidsEl) { kidsEl.remove(); kidsEl = null; toggle.textContent = "▸"; } else {
            kidsEl = h("div", { cls: "kids" }, ch.map(render)); box.appendChild(kidsEl); toggle.textContent = "▾"; }
        }
      } } }, toggle, h("b", {}, branchName(n.id)), h("span", {}, n.action || "root"),
      h("span", { cls: "vbar", title: "backed-up value" }, h("i", { style: `width:${Math.round(100 * Math.max(0, Math.min(1, backedUp(n))))}%` })),
      h("span", { cls: "muted", title: `own value ${(+n.value || 0).toFixed(2)}` }, `v=${backedUp(n).toFixed(2)} n=${n.visits}`), passMark(passed),
      passed === false && whyFailed(c) ? h("span", { cls: "why" }, whyFailed(c)) : null,
      isChosen ? pill("chosen", "ok") : chosenPath.has(n.id) ? pill("on chosen path") : null);
      box.appendChild(row);
      return box;
    }
    const roots = kids.get("") || [];
    const picked = chosen ? null : [...nodes.values()].filter((n) => n.chosen === true).pop();  // a graph search's (last pass's) choice
    if (picked) for (let p = picked; p && !chosenPath.has(p.id); p = nodes.get(p.parent)) chosenPath.add(p.id);  // stops on a cycle
    const why = picked ? h("p", {}, "chosen: ", h("b", {}, branchName(picked.id)), ` by ${picked.select || "value"}` +
      ` among ${nodes.size - 1} branches (${picked.strategy || ""})`) :
      chosen ? h("p", {}, "chosen: ", h("b", {}, chosen), ` by ${chosenBy || "?"}` +
      (chosenBy === "tests" ? " (the best verification score)" : chosenBy === "vote" ? " (most candidates agree on the normalised patch)" :
        chosenBy === "behaviour_vote" ? " (most candidates make the issue's examples show the same)" :
        chosenBy === "verifier" ? " (the verifier model judged it best)" : "")) : h("p", { cls: "muted" }, "no candidate chosen");
    return h("div", {}, why, h("p", { cls: "muted" }, `${nodes.size} nodes; click a node to see its patch and test results and to expand its children`),
      h("div", { cls: "tree", id: "search-tree" }, roots.map(render)));
  }

  // A workflow search's branch (no repair candidate): its test result and workspace diff, as the search's final
  // `search.node` event holds them (the search report's `tests` and `diff`).
  function branchPassed(n) {
    const t = n.tests;
    if (typeof t === "boolean") return t;
    if (t && typeof t === "object") for (const k of ["ok", "passed"]) if (typeof t[k] === "boolean") return t[k];
    return undefined;
  }
  function branchDetail(n) {
    if (n.parent === null || n.parent === undefined || !("tests" in n || "diff" in n)) return [];
    const t = n.tests, parts = [h("h3", {}, "tests"), h("div", { cls: "tests" }, passMark(branchPassed(n)))];
    if (t !== null && t !== undefined) parts.push(pre(typeof t === "string" ? t : JSON.stringify(t, null, 2)));
    else parts.push(h("p", { cls: "muted" }, "no test result in the branch's state"));
    parts.push(h("h3", {}, "patch"), h("div", { cls: "patch" }, n.diff === null || n.diff === undefined ?
      h("p", { cls: "muted" }, "no workspace diff recorded (a run without a workspace or run folder)") : pre(n.diff || "(empty)", true)));
    return parts;
  }

  // Why a candidate did not pass, in one line, from what candidates.jsonl holds: its edit's fate, then its
  // verification (failing tests by name, the reproduction script, the test command's exit code, the output).
  function whyFailed(c) {
    if (!c) return "";
    const first = (c.edit_errors || [])[0];
    if (c.status === "unparsable") return "no usable edit in the answer" + (first ? ": " + first : "");
    if (c.status === "apply_error") return "the edit did not apply" + (first ? ": " + first : "");
    if (c.status === "noop") return "the edit changed nothing";
    const v = c.verification || {};
    if (v.passed !== false) return v.passed === null && c.verification ? "not decidable by the tests (they pass at the base commit)" : "";
    const failing = Object.entries(v.tests_status || {}).flatMap(([group, r]) => (r.failure || []).map((t) => `${t} (${group})`));
    if (failing.length) return `${failing.length} test${failing.length > 1 ? "s" : ""} failing: ${failing[0]}` +
      (failing.length > 1 ? ` and ${failing.length - 1} more` : "");
    if (v.reproduced === true) return "the reproduction script still fails";
    const line = String(v.output || "").split("\n").map((l) => l.trim()).find(Boolean);
    if (v.exit_code !== null && v.exit_code !== undefined) return `the test command exited ${v.exit_code}` + (line ? `: ${line}` : "");
    return line || "verification failed (no detail recorded)";
  }

  function testsView(ts) {
    return Object.entries(ts || {}).map(([group, r]) => h("div", { cls: "tests", "data-group": group },
      h("h3", {}, `${group}: ${(r.success || []).length} pass, ${(r.failure || []).length} fail`),
      (r.failure || []).map((t) => h("div", { cls: "bad" }, "✗ " + t)),
      (r.success || []).map((t) => h("div", { cls: "ok" }, "✓ " + t))));
  }

  // -------------------------------------------------------------------------------------------- instance page
  function instanceRow(iid) {
    const r = ((D.report || {}).instances || {})[iid] || {};
    const o = D.outcomes[iid] || {};
    const evs = byInst.get(iid) || [];
    const u = usageOf(evs);
    const start = evs.find((e) => e.kind === "repair.start"), end = evs.find((e) => e.kind === "repair.end");
    const graded = r.error ? "error" : r.resolved ? "resolved" : r.patch_successfully_applied === false ? "patch failed" : "unresolved";
    // how it ended, with the limit reached (`limit`: outcome.json, report.json's entry, repair.end); runs written
    // before `limit` was a field spell it in the status (limits_exceeded:<limit>)
    const ended = [r, o, end ? end.data : {}].map((x) => x.status ? x.status + (x.limit ? ":" + x.limit : "") : null).find(Boolean);
    return { iid, status: ended || (start ? "running" : D.kind === "eval" ? graded : "not run"),

      resolved: isGraded(iid) ? !!r.resolved : undefined, usd: r.cost_usd || o.cost_usd || u.usd, calls: u.calls, tokens: u.input + u.output,
      dur: start && end ? end.ts - start.ts : r.duration_s, chosenBy: o.chosen_by || (end ? end.data.chosen_by : null) };
  }
  // Whether the task's tests graded its patch: an outcome.json says so by its `report` (null when nothing was
  // graded: a repository without the task's tests, no patch, a task that did not finish); an eval's report, and
  // older runs' report entries, by holding test results or an error.
  function isGraded(iid) {
    const o = D.outcomes[iid], r = ((D.report || {}).instances || {})[iid];
    if (o && "report" in o) return o.report !== null && o.report !== undefined;
    if (!r) return false;
    const tests = Object.values(r.tests_status || {}).reduce((n, g) => n + (g.success || []).length + (g.failure || []).length, 0);
    return D.kind === "eval" || tests > 0 || !!r.error || r.resolved === true;
  }
  function instancePage(iid) {
    const evs = byInst.get(iid) || [];
    const row = instanceRow(iid), o = D.outcomes[iid] || {};
    const cands = D.candidates.filter((c) => c.instance_id === iid);
    const u = usageOf(evs);
    const out = [h("h2", {}, iid), h("div", { cls: "cards" },
      card(row.status, "status"), card(row.resolved === true ? "yes" : row.resolved === false ? "no" : "not graded", "resolved"),
      card(fmtN(u.calls), "model calls"), card(fmtN(u.input + u.output), "tokens"), card(fmtUsd(row.usd) || "–", "cost"),
      card(fmtS(row.dur) || "–", "duration"), card(String(cands.length), "candidates"))];
    if (o.error) out.push(h("p", { cls: "bad" }, o.error));
    if (D.kind !== "eval") out.push(h("h2", {}, "Search tree"), searchTree(iid, evs));
    if (cands.length) {
      out.push(h("h2", {}, "Candidates"), table(["candidate", "parent", "status", "verified", "score", "why not"],
        cands.map((c) => [c.candidate_id, c.parent_id || "", c.status, passMark((c.verification || {}).passed),
          c.verification ? (+c.verification.score || 0).toFixed(3) : "", whyFailed(c)]), (i) => {
          const c = cands[i], why = whyFailed(c);
          showDetail(c.candidate_id, h("p", {}, c.status), why ? h("p", { cls: "bad" }, why) : null,
            c.verification && c.verification.output ? [h("h3", {}, "test output"), pre(c.verification.output)] : null,
            pre(c.patch || "(no patch)", true), c.answer ? [h("h3", {}, "model answer"), pre(c.answer)] : null);
        }));
    }
    if (D.preds[iid]) out.push(h("h2", {}, D.kind === "eval" ? "Evaluated patch" : "Submitted patch"), pre(D.preds[iid], true));
    const graded = ((D.report || {}).instances || {})[iid];
    if (graded && graded.tests_status) out.push(h("h2", {}, "Graded with the task's tests"),
      h("div", { id: "graded" }, graded.error ? h("p", { cls: "bad" }, graded.error) : null, testsView(graded.tests_status)));
    if (D.logs[iid]) out.push(h("h2", {}, "Evaluation log"), pre(D.logs[iid]));
    out.push(h("h2", {}, "Timeline"), timeline(evs));
    return out;
  }
  function card(value, label) { return h("div", { cls: "card" }, h("b", {}, value), h("span", {}, label)); }
  function table(head, rows, onClick) {
    return h("table", {}, h("thead", {}, h("tr", {}, head.map((c) => h("th", {}, c)))),
      h("tbody", {}, rows.map((r, i) => h("tr", { on: onClick ? { click: () => onClick(i) } : {} }, r.map((c) => h("td", {}, c))))));
  }

  // ---------------------------------------------------------------------------------------------- graph view
  function graphView() {
    const g = D.graph;
    const state = nodeStates();
    const names = g ? g.nodes.map((n) => n.name) : [...state.keys()];
    if (!names.length) return h("p", { cls: "muted" }, "no graph: the workflow could not be loaded and no node ran");
    const edges = g ? g.edges : names.slice(1).map((n, i) => [names[i], n, ""]);
    // layers by longest path from the start over the edges (cycles cut at back edges)
    const layer = new Map([["__start__", 0]]);
    const first = (g && g.start) || names[0];
    const adj = new Map();
    for (const [a, b] of [["__start__", first, ""], ...edges]) { if (!adj.has(a)) adj.set(a, []); adj.get(a).push(b); }
    const queue = ["__start__"], seen = new Set(["__start__"]);
    while (queue.length) {
      const a = queue.shift();
      for (const b of adj.get(a) || []) if (!seen.has(b)) { seen.add(b); layer.set(b, layer.get(a) + 1); queue.push(b); }
    }
    for (const n of names) if (!layer.has(n)) layer.set(n, 1);
    if (!layer.has("__end__")) layer.set("__end__", Math.max(...layer.values()) + 1);
    const cols = new Map();
    for (const [n, l] of layer) { if (!cols.has(l)) cols.set(l, []); cols.get(l).push(n); }
    const W = 150, H = 34, GX = 40, GY = 44, pos = new Map();
    let width = 0;
    for (const [l, ns] of cols) ns.forEach((n, i) => { pos.set(n, [20 + i * (W + GX), 20 + l * (H + GY)]); width = Math.max(width, 40 + (i + 1) * (W + GX)); });
    const height = 40 + (Math.max(...layer.values()) + 1) * (H + GY);
    const NS = "http://www.w3.org/2000/svg";
    const svg = document.createElementNS(NS, "svg");
    svg.setAttribute("class", "graph"); svg.setAttribute("width", width); svg.setAttribute("height", height);
    const el = (tag, attrs, text) => { const x = document.createElementNS(NS, tag); for (const [k, v] of Object.entries(attrs)) x.setAttribute(k, v); if (text) x.textContent = text; return x; };
    for (const [a, b, label] of [["__start__", first, ""], ...edges]) {
      const p = pos.get(a), q = pos.get(b);
      if (!p || !q) continue;
      const d = q[1] > p[1] ? `M${p[0] + W / 2},${p[1] + H} L${q[0] + W / 2},${q[1]}` :
        `M${p[0] + W},${p[1] + H / 2} C${p[0] + W + 40},${p[1]} ${q[0] + W + 40},${q[1] + H} ${q[0] + W},${q[1] + H / 2}`;
      svg.appendChild(el("path", { d, "stroke-dasharray": label ? "4 3" : "" }));
      if (label) svg.appendChild(el("text", { x: (p[0] + q[0]) / 2 + W / 2 + 6, y: (p[1] + q[1] + H) / 2 + 4, "font-size": 10 }, label));
    }
    for (const [n, [x, y]] of pos) {
      const st = state.get(n);
      const grp = el("g", { class: n.startsWith("__") ? "done" : st ? st.s : "", "data-node": n });
      grp.appendChild(el("rect", { x, y, width: W, height: H, rx: 6 }));
      grp.appendChild(el("text", { x: x + W / 2, y: y + 14 }, n.replace(/__/g, "")));
      if (st) grp.appendChild(el("text", { x: x + W / 2, y: y + 28, "font-size": 10 }, st.runs ? `${st.s} · ${st.runs}× · ${fmtS(st.dur)}` : st.s));
      if (st && st.why) grp.appendChild(el("title", {}, st.why));
      svg.appendChild(grp);
    }
    const failed = [...state].filter(([, st]) => st.s === "failed");
    return h("div", {}, h("p", { cls: "muted" }, "node states: green done, amber running or paused, red failed, white not run"), svg,
      failed.map(([n, st]) => h("p", { cls: "bad", "data-failed-node": n }, `node ${n} failed` + (st.why ? `: ${st.why}` : ""))));
  }

  // A node's state, runs (ended or failed) and time in it, from the node events; a top-level run.start or
  // run.resume begins a new leg, so a node still running when the last leg stopped did not finish then. The
  // last run.end settles the rest: paused at an interrupt, failed with the errors it names.
  function nodeStates() {
    const state = new Map();
    const get = (n) => { if (!state.has(n)) state.set(n, { s: "", runs: 0, dur: 0, t: null, why: "" }); return state.get(n); };
    for (const e of E) {
      if (e.data.branch) continue;  // a search branch's nodes: drawn in the search's tree, not here
      if ((e.kind === "run.start" || e.kind === "run.resume") && !e.data.instance_id)
        for (const st of state.values()) if (st.s === "running") { st.s = "interrupted"; st.t = null; }
      if (e.kind === "node.start") Object.assign(get(e.node), { s: "running", t: e.ts });
      if (e.kind === "node.end" || e.kind === "node.failed") {
        const st = get(e.node);
        st.s = e.kind === "node.end" ? "done" : "failed";
        st.why = e.kind === "node.failed" ? [e.data.reason, e.data.error].filter(Boolean).join(": ") : "";
        st.runs += 1;
        if (st.t !== null) st.dur += Math.max(0, e.ts - st.t);
        st.t = null;
      }
    }
    const last = E.filter((e) => e.kind === "run.end" && !e.data.instance_id).pop();
    if (last && last.data.status === "interrupted") for (const n of last.data.next || []) get(n).s = "paused";
    if (last && (last.data.status === "failed" || last.data.status === "error")) {
      for (const [n, err] of Object.entries(last.data.errors || {})) {
        const st = get((err && err.node) || n);
        if (st.s !== "done") { st.s = "failed"; st.why = st.why || [(err || {}).reason, (err || {}).error].filter(Boolean).join(": "); }
      }
      for (const st of state.values()) if (st.s === "running") st.s = "failed";
    }
    return state;
  }

  // ----------------------------------------------------------------------------------------------- pages
  function ungradedNote() {
    const ids = [...instanceIds].filter((iid) => D.outcomes[iid] && !isGraded(iid));
    return ids.length ? ` (${ids.length} not graded)` : "";
  }
  function statusCounts() {  // report.json's statuses: how the tasks ended (submitted is not a failure), and the limits reached
    const st = (D.report || {}).statuses || {}, limits = Object.entries((D.report || {}).limits || {});
    return Object.keys(st).length ? Object.entries(st).map(([k, n]) => `${k} ${n}`).join(" · ") +
      (limits.length ? " (" + limits.map(([k, n]) => `${k} ${n}`).join(" · ") + ")" : "") : null;
  }
  function overview() {
    const u = usageOf(E), out = [];
    const rep = D.report || {};
    const status = D.kind === "workflow" ? ((E.filter((e) => e.kind === "run.end").pop() || {}).data || {}).status || "running" :
      rep.total_instances !== undefined ? `${rep.resolved_instances || 0}/${rep.total_instances} resolved` + ungradedNote() : "";
    out.push(h("h2", {}, "Run"), h("div", { cls: "cards" }, card(D.kind, "kind"), card(status || "–", "status"),
      card(fmtS(activeSeconds(E)) || "–", legs(E) > 1 ? `wall time (${legs(E)} legs: resumed)` : "wall time"), card(fmtN(u.calls), "model calls"), card(fmtN(u.input), "input tokens"),
      card(fmtN(u.output), "output tokens"), card(fmtUsd(u.usd || rep.cost_usd) || "–", "cost"),
      card(fmtN(u.tools), "tool calls"), card(fmtN(u.execs), "sandbox commands"),
      D.kind !== "workflow" && statusCounts() ? card(statusCounts(), "tasks ended") : null));
    out.push(h("h2", {}, "Budget"), budgetView(u));
    if (D.kind === "workflow") {
      out.push(h("h2", {}, "Workflow graph"), graphView());
      const searches = [...new Set(E.filter((e) => e.kind === "search.node" && e.data.search).map((e) => e.data.search))];
      for (const name of searches)
        out.push(h("h2", {}, `Search: ${name}`), searchTree("", E.filter((e) => e.data && e.data.search === name && e.kind === "search.node")));
      out.push(h("h2", {}, "Timeline"), timeline(E));
    }
    else out.push(h("h2", {}, "Instances"), instancesTable());
    return out;
  }
  // Limits as the run was configured: a workflow's run-wide limits (run.json / config.resolved.yaml `limits`,
  // its step limit from -c step_limit or the workflow file), a repair's per-task limits and run-wide spend limit.
  // Use as its budget counted it (usage.json, every leg of a resumed run) where the run kept one.
  function budgetView(u) {
    const rows = D.kind === "workflow" ? workflowBudget(u) : taskBudget(u);
    return h("div", {}, table(["budget", "used (whole run)", "limit"], rows.map(([name, used, limit]) =>
      [name, typeof used === "number" ? (+used.toFixed(4)).toString() : used, limit])),
    u.exceeded.length ? u.exceeded.map((e) => h("p", { cls: "bad" }, `budget exceeded (${e.data.kind}) at ${e.node || "run"}`)) : null);
  }
  const shown = (limit, suffix) => limit === null || limit === undefined ? "no limit" : `${limit}${suffix || ""}`;
  function workflowBudget(u) {
    const c = D.config || {}, limits = Object.assign({}, (D.meta || {}).limits || {}, c.limits || {});
    const spent = D.usage || { model_calls: u.calls, tokens: u.input + u.output, tool_calls: u.tools, usd: u.usd,
      wall_seconds: activeSeconds(E) };
    const stepLimit = (c.run || {}).step_limit || (D.graph || {}).step_limit;
    return [["model calls", spent.model_calls, shown(limits.model_calls)], ["tokens", spent.tokens, shown(limits.tokens)],
      ["tool calls", spent.tool_calls, shown(limits.tool_calls)], ["cost (USD)", spent.usd, shown(limits.usd)],
      ["wall time (s)", spent.wall_seconds, shown(limits.wall_seconds)],
      ["node runs (super-step limit)", E.filter((e) => e.kind === "node.start").length,
        stepLimit ? String(stepLimit) : "1000 (the default)"]];
  }
  function taskBudget(u) {
    const c = (D.config || {}).limits || D.config || {};  // a repair's `limits:` (flat in runs of earlier versions)
    return [["model calls", u.calls, shown(c.step_limit, " per task")], ["cost (USD)", u.usd || (D.report || {}).cost_usd || 0,
      shown(c.budget_usd, " per task") + (c.run_budget_usd ? ` · ${c.run_budget_usd} whole run` : "")],
    ["wall time (s)", activeSeconds(E), shown(c.wall_time_s, " per task")]];
  }
  // Time the run was running: from each leg's start (run.start / run.resume) to that leg's last event, so the
  // hours between a crash and its resume are not counted.
  const legs = (events) => events.filter((e) => (e.kind === "run.start" || e.kind === "run.resume") && !e.data.instance_id).length;
  function activeSeconds(events) {
    let total = 0, legStart = null, last = null, begun = false;
    for (const e of events) {
      if ((e.kind === "run.start" || e.kind === "run.resume") && !e.data.instance_id) {
        if (begun) { total += last - legStart; legStart = e.ts; }  // a later leg: the gap before it is not run time
        begun = true;
      }
      if (legStart === null) legStart = e.ts;
      last = e.ts;
    }
    return legStart !== null && last !== null ? total + (last - legStart) : 0;
  }
  function instancesTable() {
    const ids = [...instanceIds].sort((a, b) => a.localeCompare(b, "en", { numeric: true }));
    const rows = ids.map(instanceRow);
    const tbl = h("table", { id: "instances" }, h("thead", {}, h("tr", {}, ["instance", "status", "resolved", "chosen by",
      "model calls", "tokens", "cost", "duration"].map((c) => h("th", {}, c)))),
    h("tbody", {}, rows.map((r) => h("tr", { "data-instance": r.iid }, h("td", {}, h("a", { href: "#inst=" + encodeURIComponent(r.iid) }, r.iid)),
      h("td", {}, pill(r.status, ["submitted", "resolved"].includes(r.status) ? "ok" : r.status === "error" ? "bad" : "warn")),
      h("td", {}, r.resolved === true ? pill("yes", "ok") : r.resolved === false ? pill("no", "bad") : pill("not graded")),
      h("td", {}, r.chosenBy || ""), h("td", {}, fmtN(r.calls)), h("td", {}, fmtN(r.tokens)), h("td", {}, fmtUsd(r.usd)),
      h("td", {}, fmtS(r.dur))))));
    return ids.length ? tbl : h("p", { cls: "muted" }, "no instances");
  }
  function configPage() { return [h("h2", {}, "Resolved configuration"), pre(json(D.config)), D.meta ? [h("h2", {}, "run.json"), pre(json(D.meta))] : null]; }

  const single = D.kind === "repair" && instanceIds.size === 1 ? [...instanceIds][0] : null;
  const TABS = [["overview", "Overview"], ...(D.kind === "workflow" ? [] : single ? [["inst=" + encodeURIComponent(single), "Repair"]] : []),
    ["timeline", "Timeline"], ["config", "Config"]];
  function route() {
    const hash = decodeURIComponent(location.hash.slice(1)) || "overview";
    let page;
    if (hash.startsWith("inst=")) page = instancePage(hash.slice(5));
    else if (hash === "timeline") page = [h("h2", {}, "Timeline"), timeline(E)];
    else if (hash === "config") page = configPage();
    else page = overview();
    $main.replaceChildren(...[page].flat(Infinity).filter(Boolean));
    for (const a of document.querySelectorAll("nav a")) a.classList.toggle("on", decodeURIComponent(a.getAttribute("href").slice(1)) === hash);
    hideDetail();
    window.scrollTo(0, 0);
  }
  document.getElementById("title").textContent = `${D.kind} · ${D.name} · ${D.generated}`;
  document.getElementById("tabs").replaceChildren(...TABS.map(([id, label]) => h("a", { href: "#" + id }, label)));
  window.addEventListener("hashchange", route);
  if (!location.hash && single) history.replaceState(null, "", "#inst=" + encodeURIComponent(single));
  route();
  window.agentflowViewReadyMs = performance.now();
  document.body.setAttribute("data-ready", "1");
})();
