/* tandem dashboard: experiments and runs (a server's or results on disk) — the lists, an
   experiment's trials, best-so-far and learning curves with the scheduler's decisions,
   parallel coordinates, and one run's page. */

import { api } from "./api.js";
import { lineChart } from "./charts.js";
import { checkpointTable, logPanes, metricPanel, xOf } from "./panels.js";
import { later, main } from "./state.js";
import { badge, clear, el, fmtNum, fmtTime, table } from "./ui.js";

export function experimentsView() {
  main.appendChild(el("h1", { text: "Experiments" }));
  var exDiv = el("div", { id: "experiments" }); main.appendChild(exDiv);
  main.appendChild(el("h2", { text: "Runs" }));
  var runDiv = el("div", { id: "runs" }); main.appendChild(runDiv);
  api("/api/dashboard/experiments").then(function (d) {
    var owned = d.experiments.some(function (e) { return "owner" in e; });
    exDiv.appendChild(table(["experiment"].concat(owned ? ["owner"] : []).concat(["trials", "states", "metric", "best", "updated", "folder"]), d.experiments.map(function (e) {
      return [el("a", { href: "#/experiment/" + e.id, text: e.name })].concat(owned ? [e.owner || ""] : []).concat([e.num_trials,
        Object.keys(e.status).map(function (s) { return s + " " + e.status[s]; }).join(", "),
        e.metric ? e.metric + " (" + e.mode + ")" : "", e.best, fmtTime(e.updated), el("span", { cls: "mono muted", text: e.path })]);
    }), "experiments-table"));
  }).catch(function (e) { exDiv.appendChild(el("p", { cls: "error", text: e.message })); });
  api("/api/dashboard/runs").then(function (d) {
    runDiv.appendChild(table(["run", "last report", "updated", "folder"], d.runs.map(function (r) {
      var keys = Object.keys(r.metrics).slice(0, 5);
      return [el("a", { href: "#/run/" + r.id, text: r.name }), keys.map(function (k) { return k + "=" + fmtNum(r.metrics[k]); }).join("  ") + (r.failed ? "  (failed)" : ""), fmtTime(r.updated), el("span", { cls: "mono muted", text: r.path })];
    }), "runs-table"));
  }).catch(function () {});
  return {};
}

function parallelCoordinates(target, trials, configKeys, metric, mode) {
  clear(target);
  var ns = "http://www.w3.org/2000/svg";
  var dims = configKeys.concat(metric ? [metric] : []);
  var data = trials.map(function (t) {
    var o = {}; configKeys.forEach(function (k) { o[k] = t.config[k]; });
    if (metric) o[metric] = t.best !== null && t.best !== undefined ? t.best : (t.last || {})[metric];
    return o;
  });
  if (!dims.length || !data.length) { target.appendChild(el("p", { cls: "muted", text: "No trials yet." })); return; }
  var W = Math.max(500, target.clientWidth || 900), H = 320, top = 28, bottom = 24, left = 50, right = 60;
  var svg = document.createElementNS(ns, "svg");
  svg.setAttribute("width", W); svg.setAttribute("height", H); svg.setAttribute("id", "parallel-coordinates");
  var scales = {};
  dims.forEach(function (k) {
    var vals = data.map(function (d) { return d[k]; }).filter(function (v) { return v !== null && v !== undefined; });
    var numeric = vals.length && vals.every(function (v) { return typeof v === "number"; });
    if (numeric) {
      var lo = Math.min.apply(null, vals), hi = Math.max.apply(null, vals);
      scales[k] = { num: true, lo: lo, hi: hi, f: function (v) { return (hi === lo) ? 0.5 : (v - lo) / (hi - lo); } };
    } else {
      var cats = []; vals.forEach(function (v) { v = String(v); if (cats.indexOf(v) < 0) cats.push(v); }); cats.sort();
      scales[k] = { num: false, cats: cats, f: function (v) { return cats.length < 2 ? 0.5 : cats.indexOf(String(v)) / (cats.length - 1); } };
    }
  });
  var xs = dims.map(function (k, i) { return left + i * (W - left - right) / Math.max(1, dims.length - 1); });
  function y(k, v) { return top + (1 - scales[k].f(v)) * (H - top - bottom); }
  var ms = metric ? scales[metric] : null;
  function color(v) {
    if (!ms || !ms.num || v === undefined || v === null) return "#9aa3b2";
    var f = ms.f(v); if (mode === "min") f = 1 - f;  // better = greener
    var r = Math.round(220 - 180 * f), g = Math.round(60 + 140 * f), b = Math.round(60 + 40 * f);
    return "rgb(" + r + "," + g + "," + b + ")";
  }
  data.forEach(function (d, i) {
    var pts = dims.map(function (k, j) { return (d[k] === undefined || d[k] === null) ? null : xs[j].toFixed(1) + "," + y(k, d[k]).toFixed(1); }).filter(Boolean);
    var p = document.createElementNS(ns, "path");
    p.setAttribute("d", "M" + pts.join("L")); p.setAttribute("class", "l");
    p.setAttribute("stroke", color(metric ? d[metric] : null));
    var title = document.createElementNS(ns, "title");
    title.textContent = trials[i].name + ": " + dims.map(function (k) { return k + "=" + fmtNum(d[k]); }).join(", ");
    p.appendChild(title);
    svg.appendChild(p);
  });
  dims.forEach(function (k, j) {
    var g = document.createElementNS(ns, "g"); g.setAttribute("class", "axis");
    var ln = document.createElementNS(ns, "line");
    ln.setAttribute("x1", xs[j]); ln.setAttribute("x2", xs[j]); ln.setAttribute("y1", top); ln.setAttribute("y2", H - bottom);
    g.appendChild(ln);
    function text(x, yy, s, anchor, weight) {
      var t = document.createElementNS(ns, "text"); t.setAttribute("x", x); t.setAttribute("y", yy);
      t.setAttribute("text-anchor", anchor || "middle"); if (weight) t.setAttribute("font-weight", weight);
      t.textContent = s; g.appendChild(t);
    }
    text(xs[j], 14, k, "middle", "600");
    var s = scales[k];
    if (s.num) { text(xs[j] + 4, top + 4, fmtNum(s.hi), "start"); text(xs[j] + 4, H - bottom, fmtNum(s.lo), "start"); }
    else s.cats.forEach(function (c) { text(xs[j] + 4, y(k, c) + 4, c, "start"); });
    svg.appendChild(g);
  });
  target.appendChild(svg);
}

export function experimentView(id) {
  var metric = null, exp = null, sortKey = "index", sortDir = 1;
  var head = el("div"); main.appendChild(head);
  var bar = el("div", { cls: "row" }); main.appendChild(bar);
  var keySel = el("select", { id: "exp-metric" });
  bar.appendChild(el("label", { for: "exp-metric", text: "Metric " })); bar.appendChild(keySel);
  keySel.addEventListener("change", function () { metric = keySel.value; load(); });
  main.appendChild(el("h2", { text: "Trials" }));
  var tDiv = el("div", { id: "trials" }); main.appendChild(tDiv);
  main.appendChild(el("div", { cls: "grid2" }, [
    el("div", {}, [el("h2", { text: "Best so far" }), el("div", { cls: "card", id: "best-so-far" })]),
    el("div", {}, [el("h2", { text: "Learning curves" }), el("div", { cls: "card", id: "curves" }), el("div", { cls: "legend-dec muted", id: "decisions" })]),
  ]));
  main.appendChild(el("h2", { text: "Parallel coordinates" }));
  var pcDiv = el("div", { cls: "card pc", id: "pc" }); main.appendChild(pcDiv);
  function better(a, b) { return exp.mode === "min" ? a < b : a > b; }
  function drawTrials() {
    var cfg = exp.config_keys;
    var cols = [["index", "#"], ["name", "trial"], ["status", "state"]].concat(cfg.map(function (k) { return ["config/" + k, k]; }))
      .concat([["last", "last " + (metric || "")], ["best", "best " + (metric || "")], ["iters", "iterations"]]);
    function val(t, key) {
      if (key.indexOf("config/") === 0) return t.config[key.slice(7)];
      if (key === "last") return (t.last || {})[metric];
      if (key === "iters") return (t.last || {}).training_iteration;
      return t[key];
    }
    var ts = exp.trials.slice().sort(function (a, b) {
      var x = val(a, sortKey), y = val(b, sortKey);
      if (x === y) return 0; if (x === undefined || x === null) return 1; if (y === undefined || y === null) return -1;
      return (x < y ? -1 : 1) * sortDir;
    });
    var t = el("table", { id: "trials-table" });
    t.appendChild(el("thead", {}, [el("tr", {}, cols.map(function (c) {
      return el("th", { cls: "sort", "data-key": c[0], text: c[1] + (sortKey === c[0] ? (sortDir > 0 ? " ▲" : " ▼") : ""), onclick: function () {
        if (sortKey === c[0]) sortDir = -sortDir; else { sortKey = c[0]; sortDir = 1; }
        drawTrials();
      } });
    }))]));
    var tb = el("tbody");
    var shown = ts.slice(0, 500);
    if (ts.length > shown.length) tDiv.setAttribute("data-more", ts.length - shown.length);
    shown.forEach(function (tr) {
      tb.appendChild(el("tr", {}, cols.map(function (c) {
        var v = val(tr, c[0]);
        if (c[0] === "status") return el("td", {}, [badge(v), tr.error ? el("div", { cls: "err", title: tr.error, text: tr.error }) : null]);
        if (c[0] === "name") return el("td", {}, [tr.run_id ? el("a", { href: "#/run/" + tr.run_id, text: v }) : v]);
        return el("td", { cls: typeof v === "number" ? "num" : "", text: typeof v === "number" ? fmtNum(v) : (v === undefined || v === null ? "" : String(v)) });
      })));
    });
    t.appendChild(tb);
    clear(tDiv).appendChild(t);
    if (ts.length > shown.length) tDiv.appendChild(el("p", { cls: "muted", text: "Showing " + shown.length + " of " + ts.length + " trials in this order; sort by another column to see others." }));
  }
  function drawCharts() {
    var ts = exp.trials.slice().sort(function (a, b) { return a.index - b.index; });
    var xs = [], ys = [], bx = [], by = [], best = null;
    ts.forEach(function (t) {
      if (t.best === null || t.best === undefined) return;
      xs.push(t.index); ys.push(t.best);
      if (best === null || better(t.best, best)) best = t.best;
      bx.push(t.index); by.push(best);
    });
    lineChart(document.getElementById("best-so-far"), { xlabel: "trial", xint: true, ylabel: metric, height: 260, series: [
      { label: "trial's best", x: xs, y: ys, points: true, color: "#9aa3b2" },
      { label: "best so far", x: bx, y: by, color: "#2b8a3e" }] });
    var series = [], marks = [], notes = [];
    ts.forEach(function (t) {
      if (!t.rows.length) return;  // the server sends the best trials' curves only
      var x = [], y = [];
      t.rows.forEach(function (r, i) { if (typeof r[metric] === "number") { x.push(xOf(r, i)); y.push(r[metric]); } });
      series.push({ label: t.name, x: x, y: y });
      (t.decisions || []).forEach(function (d) {
        var i = x.indexOf(d.iteration); if (i < 0) i = x.length - 1; if (i < 0) return;
        marks.push({ x: x[i], y: y[i], color: d.action === "STOP" ? "#d93025" : "#7048e8" }); notes.push(t.name + " @" + d.iteration + ": " + d.action + (d.reason ? " (" + d.reason + ")" : ""));
      });
    });
    lineChart(document.getElementById("curves"), { title: exp.trials.length > exp.curves_shown ? "the " + exp.curves_shown + " best of " + exp.trials.length + " trials" : null, xlabel: "training_iteration", xint: true, ylabel: metric, height: 260, series: series, markers: marks });
    var dec = clear(document.getElementById("decisions"));
    if (notes.length) dec.appendChild(el("details", {}, [el("summary", { text: notes.length + " scheduler decision(s): dots on the curves (red: stop, purple: pause / exploit)" }), el("ul", {}, notes.map(function (n) { return el("li", { text: n }); }))]));
    parallelCoordinates(pcDiv, exp.trials, exp.config_keys, metric, exp.mode);
  }
  function load() {
    return api("/api/dashboard/experiments/" + id + (metric ? "?metric=" + encodeURIComponent(metric) : "")).then(function (e) {
      exp = e; metric = e.metric;
      clear(head).appendChild(el("div", { cls: "row" }, [el("h1", { text: e.name }), el("span", { cls: "muted mono", text: e.path })]));
      clear(keySel); e.metrics.forEach(function (k) { keySel.appendChild(el("option", { value: k, text: k })); });
      keySel.value = metric || "";
      drawTrials(); drawCharts();
    });
  }
  load().catch(function (e) { main.appendChild(el("p", { cls: "error", text: e.message })); });
  later(function () {
    if (exp && exp.trials.some(function (t) { return t.status === "RUNNING" || t.status === "PENDING"; })) load().catch(function () {});
  }, 3000);
  return {};
}

export function runView(id) {
  var head = el("div"); main.appendChild(head);
  var sum = el("div", { cls: "card kv" }); main.appendChild(sum);
  main.appendChild(el("h2", { text: "Metrics" }));
  var mcard = el("div", { cls: "card" }); main.appendChild(mcard);
  var run = null;
  var panel = metricPanel(mcard, function () { return run ? [{ label: run.name, rows: run.rows }] : []; }, null);
  main.appendChild(el("h2", { text: "Logs" }));
  var logs = logPanes(main);
  main.appendChild(el("h2", { text: "Checkpoints" }));
  var ck = el("div"); main.appendChild(ck);
  main.appendChild(el("h2", { text: "Config" }));
  var cfg = el("pre", { cls: "card mono" }); main.appendChild(cfg);
  api("/api/dashboard/runs/" + id).then(function (r) {
    run = r;
    head.appendChild(el("div", { cls: "row" }, [el("h1", { text: r.name }), r.error ? badge("FAILED") : null]));
    [["folder", r.path], ["reports", r.rows.length]].forEach(function (kv) { sum.appendChild(el("div", { text: kv[0] })); sum.appendChild(el("div", { cls: "mono", text: String(kv[1]) })); });
    if (r.error) { sum.appendChild(el("div", { text: "error" })); sum.appendChild(el("pre", { cls: "log", text: r.error })); }
    Object.keys(r.logs).sort(function (a, b) { return a - b; }).forEach(function (k) { logs.add(k, r.logs[k]); });
    ck.appendChild(checkpointTable(r.checkpoints, null));
    cfg.textContent = JSON.stringify(r.config, null, 2);
    panel.drawNow();
  }).catch(function (e) { main.appendChild(el("p", { cls: "error", text: e.message })); });
  return {};
}
