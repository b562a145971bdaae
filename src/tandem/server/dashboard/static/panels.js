/* tandem dashboard: the parts a job's page and a run's page share — the metric chart with
   its key chooser, the log panes (one per rank), the checkpoints table. */

import { lineChart } from "./charts.js";
import { clear, debounce, el, fmtTime, table } from "./ui.js";

export function metricKeys(rows) {
  var keys = {};
  rows.forEach(function (r) { for (var k in r) if (typeof r[k] === "number") keys[k] = 1; });
  return Object.keys(keys).sort();
}
export function xOf(r, i) { return typeof r.training_iteration === "number" ? r.training_iteration : i + 1; }
export function defaultKey(keys) {
  var pref = ["loss", "val_loss", "valid_loss", "mean_loss", "accuracy", "val_accuracy", "score"];
  for (var i = 0; i < pref.length; i++) if (keys.indexOf(pref[i]) >= 0) return pref[i];
  var skip = { training_iteration: 1, time_total_s: 1, time_this_iter_s: 1, timestamp: 1, epoch: 1, step: 1 };
  for (var j = 0; j < keys.length; j++) if (!skip[keys[j]]) return keys[j];
  return keys[0];
}
// A metric chart with a key chooser and other runs overlaid. getRuns() -> [{label, rows}]
export function metricPanel(container, getRuns, addOverlay) {
  var keySel = el("select", { id: "metric-key" });
  var chartDiv = el("div", { cls: "chart", id: "metric-chart" });
  var bar = el("div", { cls: "row" }, [el("label", { for: "metric-key", text: "Metric " }), keySel]);
  if (addOverlay) bar.appendChild(addOverlay);
  container.appendChild(bar);
  container.appendChild(chartDiv);
  var chosen = null, lastKeys = "";
  keySel.addEventListener("change", function () { chosen = keySel.value; draw(); });
  function draw() {
    var runs = getRuns();
    var keys = metricKeys([].concat.apply([], runs.map(function (r) { return r.rows; })));
    if (keys.join() !== lastKeys) {
      lastKeys = keys.join();
      clear(keySel);
      keys.forEach(function (k) { keySel.appendChild(el("option", { value: k, text: k })); });
    }
    if (!chosen || keys.indexOf(chosen) < 0) chosen = defaultKey(keys);
    keySel.value = chosen || "";
    var series = runs.map(function (run) {
      var x = [], y = [];
      run.rows.forEach(function (r, i) { if (typeof r[chosen] === "number") { x.push(xOf(r, i)); y.push(r[chosen]); } });
      return { label: run.label, x: x, y: y };
    });
    lineChart(chartDiv, { title: chosen, series: series, xlabel: "training_iteration", xint: true, ylabel: chosen, empty: "No reports yet." });
  }
  return { draw: debounce(draw, 250), drawNow: draw };
}

export function logPanes(container) {
  var panes = {};
  var grid = el("div", { cls: "logs", id: "logs" });
  container.appendChild(grid);
  function pane(rank) {
    if (!panes[rank]) {
      var pre = el("pre", { cls: "log", id: "log-rank-" + rank });
      var box = el("div", {}, [el("div", { cls: "muted", text: "rank " + rank }), pre]);
      var keys = Object.keys(panes).map(Number).concat([+rank]).sort(function (a, b) { return a - b; });
      var pos = keys.indexOf(+rank);
      grid.insertBefore(box, grid.children[pos] || null);
      panes[rank] = pre;
    }
    return panes[rank];
  }
  function add(rank, text) {
    var pre = pane(rank);
    var stick = pre.scrollTop + pre.clientHeight >= pre.scrollHeight - 20;
    pre.appendChild(document.createTextNode(text));
    if (pre.textContent.length > 400000) pre.textContent = pre.textContent.slice(-200000);
    if (stick) pre.scrollTop = pre.scrollHeight;
  }
  return { add: add, pane: pane };
}

export function checkpointTable(cks, latest) {
  var keys = metricKeys(cks.map(function (c) { return c.metrics || {}; })).filter(function (k) { return k !== "training_iteration"; }).slice(0, 6);
  return table(["iteration", "path"].concat(keys).concat(["saved"]), cks.map(function (c) {
    return [c.iteration, el("span", { cls: "mono", text: c.path + (c.path === latest ? "  (latest)" : "") + (c.deleted ? "  (deleted)" : "") })]
      .concat(keys.map(function (k) { return (c.metrics || {})[k]; })).concat([c.time ? fmtTime(c.time) : ""]);
  }), "checkpoints-table");
}
