// tbt view: the page's script (trainer/eval/view.py inlines it). Reads the data block, draws the
// tasks x repetitions grid per run, applies the filters, opens an episode on a click or from the
// URL fragment (#e=ID, #uid=UID&run=I&rep=R). Every record text goes in as text nodes, never HTML.
"use strict";
var D = JSON.parse(document.getElementById("data").textContent);
var EP = D.episodes;

function el(tag, attrs) {
  var e = document.createElement(tag);
  for (var k in attrs || {}) {
    if (k === "text") e.textContent = attrs[k];
    else if (k === "cls") e.className = attrs[k];
    else e.setAttribute(k, attrs[k]);
  }
  for (var i = 2; i < arguments.length; i++) {
    var c = arguments[i];
    if (c === null || c === undefined) continue;
    e.appendChild(typeof c === "string" ? document.createTextNode(c) : c);
  }
  return e;
}
function show(x) { return typeof x === "string" ? x : JSON.stringify(x, null, 2); }
function pct(c, n) { return n ? (100 * c / n).toFixed(1) + "%" : "-"; }

// ---------------------------------------------------------------- indexes
var cell = D.runs.map(function () { return {}; });     // run -> uid -> rep -> episode (scored first)
var errorsOf = D.runs.map(function () { return []; }); // run -> system-error episodes
EP.forEach(function (e) {
  if (e.kind === "error") errorsOf[e.run].push(e);
  var byRep = cell[e.run][e.uid] = cell[e.run][e.uid] || {};
  var old = byRep[e.repetition];
  if (!old || old.kind === "error") byRep[e.repetition] = e;  // a scored record wins; else the last attempt
});
function tally(run, uid) {
  var reps = cell[run][uid] || {}, n = 0, c = 0;
  for (var r in reps) if (reps[r].kind !== "error") { n++; if (reps[r].kind === "pass") c++; }
  return {n: n, c: c};
}

// ---------------------------------------------------------------- header and filters
document.getElementById("title").textContent = D.title;
var runsP = document.getElementById("runs");
D.runs.forEach(function (r, i) {
  runsP.appendChild(el("span", {cls: "run"}, el("b", {text: r.name}), r.label ? " (" + r.label + ")" : "",
    ": " + r.passed + "/" + r.scored + " passed (" + pct(r.passed, r.scored) + "), " + r.system_errors +
    " system-error attempt(s)" + (r.duplicated ? ", " + r.duplicated + " duplicated record(s) left out" : "")));
});
function options(sel, values, labels) {
  values.forEach(function (v, i) { sel.appendChild(el("option", {value: v, text: labels ? labels[i] : v})); });
}
options(document.getElementById("f-domain"), [""].concat(D.domains), ["all"].concat(D.domains));
options(document.getElementById("f-end"), [""].concat(D.end_reasons), ["any"].concat(D.end_reasons));
var names = D.runs.map(function (r, i) { return i + ": " + r.name; });
var idx = D.runs.map(function (r, i) { return String(i); });
options(document.getElementById("f-a"), idx, names);
options(document.getElementById("f-b"), idx, names);
if (D.runs.length > 1) document.getElementById("f-b").value = "1";
else document.getElementById("f-changes").hidden = true;

// ---------------------------------------------------------------- the grid
var thead = document.querySelector("#grid thead"), tbody = document.querySelector("#grid tbody");
var head = el("tr", {}, el("th", {text: "task"}), el("th", {text: "domain"}));
D.runs.forEach(function (r, i) {
  head.appendChild(el("th", {colspan: String(r.repetitions + 1), cls: "runhead", title: r.path}, i + ": " + r.name));
});
thead.appendChild(head);
var sub = el("tr", {}, el("th"), el("th"));
D.runs.forEach(function (r) {
  for (var k = 0; k < r.repetitions; k++) sub.appendChild(el("th", {cls: "rep", text: String(k)}));
  sub.appendChild(el("th", {cls: "rep", text: "c/n"}));
});
thead.appendChild(sub);
var rows = D.tasks.map(function (t) {
  var tr = el("tr", {"data-uid": t.uid, "data-domain": t.domain}, el("td", {cls: "uid", text: t.uid, title: t.uid}),
              el("td", {cls: "dom", text: t.domain}));
  D.runs.forEach(function (r, i) {
    var reps = cell[i][t.uid] || {};
    for (var k = 0; k < r.repetitions; k++) {
      var e = reps[k];
      var td = el("td", {cls: "c " + (e ? e.kind : "none")});
      if (e) {
        td.setAttribute("data-e", String(e.id));
        td.setAttribute("data-end", e.end_reason || "");
        td.title = t.uid + " #" + k + ": " + (e.kind === "error" ? "system error: " + e.system_error : e.kind) +
          (e.end_reason ? " (" + e.end_reason + ")" : "");
        td.addEventListener("click", openEpisode.bind(null, e.id));
      } else td.title = t.uid + " #" + k + ": no record";
      tr.appendChild(td);
    }
    var s = tally(i, t.uid);
    tr.appendChild(el("td", {cls: "n", text: s.n ? s.c + "/" + s.n : "-"}));
  });
  tbody.appendChild(tr);
  return tr;
});

// ---------------------------------------------------------------- system errors, apart
var errs = document.getElementById("errors");
var nErr = errorsOf.reduce(function (a, l) { return a + l.length; }, 0);
errs.appendChild(el("h2", {text: "System errors (" + nErr + ", not scored)"}));
if (!nErr) errs.appendChild(el("p", {cls: "hint", text: "None."}));
errorsOf.forEach(function (list, i) {
  if (!list.length) return;
  var ul = el("ul");
  list.forEach(function (e) {
    var a = el("a", {href: "#e=" + e.id, cls: "err", "data-e": String(e.id)}, e.uid + " #" + e.repetition +
      " attempt " + e.attempt);
    ul.appendChild(el("li", {}, a, ": " + (e.system_error || "")));
  });
  errs.appendChild(el("h3", {text: D.runs[i].name + (D.runs[i].errors_file ? " (" + D.runs[i].errors_file + ")" : "")}));
  errs.appendChild(ul);
});

// ---------------------------------------------------------------- filters
function apply() {
  var dom = document.getElementById("f-domain").value, end = document.getElementById("f-end").value;
  var failed = document.getElementById("f-failed").checked, ch = document.getElementById("f-changed").value;
  var ra = +document.getElementById("f-a").value, rb = +document.getElementById("f-b").value;
  var shown = 0;
  rows.forEach(function (tr) {
    var uid = tr.getAttribute("data-uid"), ok = !dom || tr.getAttribute("data-domain") === dom;
    var cells = tr.querySelectorAll("td.c[data-e]");
    if (ok && end) ok = [].some.call(cells, function (td) { return td.getAttribute("data-end") === end; });
    if (ok && failed) ok = tr.querySelector("td.c.fail") !== null;
    if (ok && ch && D.runs.length > 1) {
      var a = tally(ra, uid), b = tally(rb, uid);
      var d = (b.n ? b.c / b.n : NaN) - (a.n ? a.c / a.n : NaN);
      ok = !isNaN(d) && (ch === "any" ? d !== 0 : ch === "better" ? d > 0 : d < 0);
    }
    [].forEach.call(cells, function (td) {
      td.classList.toggle("dim", !!end && td.getAttribute("data-end") !== end);
    });
    tr.hidden = !ok;
    if (ok) shown++;
  });
  document.getElementById("count").textContent = shown + " of " + rows.length + " task(s) shown";
}
["f-domain", "f-end", "f-failed", "f-a", "f-b", "f-changed"].forEach(function (id) {
  document.getElementById(id).addEventListener("change", apply);
});
apply();

// ---------------------------------------------------------------- one episode
function kv(obj) {
  var t = el("table", {cls: "kv"});
  Object.keys(obj || {}).forEach(function (k) {
    var v = obj[k];
    t.appendChild(el("tr", {}, el("th", {text: k}), el("td", {text: typeof v === "number" && v % 1 ? v.toFixed(4) : show(v)})));
  });
  return t;
}
function verdictBox(e) {
  var v = e.verdict || {}, box = el("section", {cls: "verdict " + e.kind});
  var word = e.kind === "error" ? "SYSTEM ERROR (not scored)" : e.kind === "pass" ? "PASS" : "FAIL";
  box.appendChild(el("h3", {}, word + (v.reward !== undefined && v.reward !== null ? " · reward " + v.reward : "") +
                      " · ended: " + (e.end_reason || "?")));
  if (e.system_error) box.appendChild(el("p", {cls: "syserr", text: e.system_error}));
  if (v.explanation) box.appendChild(el("div", {}, el("b", {text: "explanation" + (v.lineno ? " (test line " + v.lineno + ")" : "")}),
                                        el("pre", {cls: "explanation", text: v.explanation})));
  (v.judge_calls || []).forEach(function (q) {
    box.appendChild(el("p", {cls: "judge"}, el("b", {text: "judge: "}), q.question + " → " + show(q.answer) +
                       (q.motivation ? " (" + q.motivation + ")" : "") + (q.ambiguous ? " ambiguous: " + show(q.ambiguous) : "")));
  });
  var diff = v.diff || {}, drows = [];
  Object.keys(diff).forEach(function (s) { (diff[s] || []).forEach(function (d) { drows.push([s, d]); }); });
  if (drows.length) {
    var t = el("table", {cls: "diff"}, el("caption", {text: "rows that differ from the golden state"}),
               el("tr", {}, el("th", {text: "server"}), el("th", {text: "path"}), el("th", {text: "kind"}),
                  el("th", {text: "episode left"}), el("th", {text: "golden leaves"})));
    drows.forEach(function (p) {
      var d = p[1];
      t.appendChild(el("tr", {cls: "d-" + d.type}, el("td", {text: p[0]}), el("td", {text: String(d.path)}),
                       el("td", {text: String(d.type)}), el("td", {}, el("pre", {text: show(d.result)})),
                       el("td", {}, el("pre", {text: show(d.golden)}))));
    });
    box.appendChild(t);
  } else if (e.kind === "fail") {
    box.appendChild(el("p", {cls: "hint", text: "No row differs from the golden state: the check failed on something else (the explanation)."}));
  }
  return box;
}
function conversation(e) {
  var sec = el("section", {cls: "messages"}, el("h3", {text: "Conversation"}));
  var seenAssistant = false, firstUser = true;
  (e.messages || []).forEach(function (m) {
    var role = m.role, box;
    if (role === "system") {
      box = el("details", {cls: "m system"}, el("summary", {text: "system"}), el("pre", {text: show(m.content)}));
    } else if (role === "user") {
      var who = seenAssistant ? "simulated user" : firstUser ? "user (the task's query)" : "user";
      firstUser = false;
      box = el("div", {cls: "m " + (seenAssistant ? "user sim" : "user")}, el("b", {text: who}), el("pre", {text: show(m.content)}));
    } else if (role === "assistant") {
      seenAssistant = true;
      box = el("div", {cls: "m assistant" + (m.direct ? " direct" : "")},
               el("b", {text: m.direct ? "shown to the user by a tool" : "assistant"}));
      if (m.reasoning_content) box.appendChild(el("details", {cls: "reasoning", open: ""}, el("summary", {text: "reasoning"}),
                                                  el("pre", {text: m.reasoning_content})));
      if (m.content) box.appendChild(el("pre", {cls: "content", text: show(m.content)}));
      (m.tool_calls || []).forEach(function (c) {
        var fn = c.function || {};
        box.appendChild(el("div", {cls: "call" + (c.problem ? " rejected" : "")},
                           el("code", {text: "→ " + fn.name}), c.problem ? el("span", {cls: "problem", text: " rejected: " + c.problem}) : null,
                           el("pre", {cls: "args", text: show(fn.arguments)})));
      });
      if (m.finish === "length") box.appendChild(el("p", {cls: "hint", text: "(cut by the length limit)"}));
      if (!m.content && !(m.tool_calls || []).length) box.appendChild(el("p", {cls: "hint", text: "(an empty turn: asked again)"}));
    } else if (role === "tool") {
      box = el("div", {cls: "m tool"}, el("b", {text: "← " + (m.name || "tool") + " (" + (m.tool_call_id || "") + ")"}),
               el("pre", {text: show(m.content)}));
    } else box = el("pre", {cls: "m", text: show(m)});
    sec.appendChild(box);
  });
  return sec;
}
function toolTable(e) {
  var calls = e.tool_calls || [];
  if (!calls.length) return el("p", {cls: "hint", text: "No tool calls."});
  var t = el("table", {cls: "calls"}, el("caption", {text: calls.length + " tool call(s)"}),
             el("tr", {}, el("th", {text: "#"}), el("th", {text: "tool"}), el("th", {text: "arguments"}),
                el("th", {text: "result"}), el("th", {text: "seconds"})));
  calls.forEach(function (c, i) {
    t.appendChild(el("tr", {cls: c.problem ? "rejected" : ""}, el("td", {text: String(i)}), el("td", {text: c.name}),
                     el("td", {}, el("pre", {text: show(c.arguments)})),
                     el("td", {}, el("pre", {text: c.problem ? "rejected: " + c.problem + "\n" + show(c.result) : show(c.result)})),
                     el("td", {text: c.seconds === undefined ? (c.problem ? "not run" : "builtin") : c.seconds.toFixed(4)})));
  });
  return t;
}
function openEpisode(id) {
  var e = EP[id], pane = document.getElementById("episode");
  if (!e) return;
  [].forEach.call(document.querySelectorAll("td.c.sel"), function (td) { td.classList.remove("sel"); });
  var td = document.querySelector('td.c[data-e="' + id + '"]');
  if (td) td.classList.add("sel");
  pane.textContent = "";
  pane.setAttribute("data-open", String(id));
  pane.appendChild(el("h2", {}, e.uid, el("span", {cls: "sub", text: " · " + D.runs[e.run].name + " · repetition " +
                                                   e.repetition + " · attempt " + e.attempt + " (" + e.where + ")"})));
  pane.appendChild(verdictBox(e));
  pane.appendChild(conversation(e));
  if (e.format === "ours") pane.appendChild(toolTable(e));
  var facts = el("section", {cls: "facts"}, el("h3", {text: "Timings (seconds), turns, usage"}));
  facts.appendChild(kv(e.timings));
  facts.appendChild(kv({turns: e.turns, usage: e.usage}));
  facts.appendChild(el("h3", {text: "Identities"}));
  facts.appendChild(kv({policy: e.policy, user: e.user, judge: e.judge, seed: e.seed, family: e.family,
                        started_at: e.started_at, synthetic: e.synthetic}));
  if (e.raw) facts.appendChild(el("details", {}, el("summary", {text: "the tb infer record"}), el("pre", {text: show(e.raw)})));
  pane.appendChild(facts);
  if (location.hash !== "#e=" + id) history.replaceState(null, "", "#e=" + id);
  pane.scrollTop = 0;
}
function fromHash() {
  var h = new URLSearchParams(location.hash.slice(1));
  if (h.has("e")) return openEpisode(+h.get("e"));
  if (h.has("uid")) {
    var run = +(h.get("run") || 0), reps = (cell[run] || {})[h.get("uid")] || {};
    var rep = h.has("rep") ? h.get("rep") : Object.keys(reps)[0];
    if (reps[rep]) openEpisode(reps[rep].id);
  }
}
window.addEventListener("hashchange", fromHash);
document.getElementById("errors").addEventListener("click", function (ev) {
  var a = ev.target.closest("a[data-e]");
  if (a) { ev.preventDefault(); openEpisode(+a.getAttribute("data-e")); }
});
fromHash();
