/* tandem dashboard: line charts over the vendored uPlot (loaded as a classic script before
   the modules: the global uPlot). Each chart belongs to the view on screen. */

import { keepChart } from "./state.js";
import { clear, el } from "./ui.js";

export var COLORS = ["#2f6fed", "#e8590c", "#2b8a3e", "#c2255c", "#7048e8", "#0b7285", "#e67700",
  "#5c940d", "#862e9c", "#364fc7", "#a61e4d", "#087f5b"];

// Several (x, y) series with different x values, on one x axis.
export function align(series) {
  var xs = {};
  series.forEach(function (s) { s.x.forEach(function (x) { xs[x] = 1; }); });
  var X = Object.keys(xs).map(Number).sort(function (a, b) { return a - b; });
  var idx = {}; X.forEach(function (x, i) { idx[x] = i; });
  var data = [X];
  series.forEach(function (s) {
    var ys = new Array(X.length).fill(null);
    s.x.forEach(function (x, i) { ys[idx[x]] = s.y[i]; });
    data.push(ys);
  });
  return data;
}
export function lineChart(target, opts) {
  // opts: {title, series: [{label, x, y, color, points, dash, fill}], xlabel, ylabel, time, height, yfmt}
  clear(target);
  var cs = getComputedStyle(target);
  var inner = target.clientWidth - parseFloat(cs.paddingLeft || 0) - parseFloat(cs.paddingRight || 0);
  var width = Math.max(280, (inner || 600) - 2);
  var series = opts.series.filter(function (s) { return s.x.length; });
  if (!series.length) { target.appendChild(el("p", { cls: "muted", text: opts.empty || "No data yet." })); return null; }
  var data = align(series);
  var useries = [{ label: opts.xlabel || "x" }];
  series.forEach(function (s, i) {
    var color = s.color || COLORS[i % COLORS.length];
    var u = { label: s.label, stroke: color, width: 1.6, spanGaps: true, points: { show: s.x.length < 3 } };
    if (s.dash) u.dash = [6, 4];
    if (s.fill) u.fill = s.fill;
    if (s.points) { u.paths = function () { return null; }; u.points = { show: true, size: 9, fill: color, stroke: color }; u.width = 0; }
    if (opts.yfmt) u.value = function (self, v) { return v === null ? "" : opts.yfmt(v); };
    useries.push(u);
  });
  var axes = [{ label: opts.xlabel || "" }, { label: opts.ylabel || "", size: 70 }];
  if (opts.yfmt) axes[1].values = function (self, ticks) { return ticks.map(opts.yfmt); };
  if (opts.xint) axes[0].incrs = [1, 2, 5, 10, 20, 50, 100, 200, 500, 1000, 2000, 5000, 10000, 20000, 50000];
  var hooks = {};
  if (opts.markers && opts.markers.length) {
    // marks drawn on the plot (e.g. scheduler decisions): several may share one x
    hooks.draw = [function (u) {
      var ctx = u.ctx; ctx.save();
      opts.markers.forEach(function (m) {
        var cx = u.valToPos(m.x, "x", true), cy = u.valToPos(m.y, "y", true);
        ctx.beginPath(); ctx.fillStyle = m.color || "#d93025"; ctx.strokeStyle = "#fff";
        ctx.lineWidth = 1.5 * devicePixelRatio;
        ctx.arc(cx, cy, 5 * devicePixelRatio, 0, 2 * Math.PI); ctx.fill(); ctx.stroke();
      });
      ctx.restore();
    }];
  }
  var u = new uPlot({
    title: opts.title, width: width, height: opts.height || 240, series: useries, axes: axes, hooks: hooks,
    scales: { x: { time: !!opts.time } }, legend: { show: true }, cursor: { drag: { x: true, y: false } },
  }, data, target);
  keepChart(u);
  return u;
}
