/* tandem dashboard: what the page shares between views — the <main> element, what the
   server said about itself (summary), the view on screen, and the timers and charts that
   belong to it (the router ends them when the page changes). */

export var main = document.getElementById("main");
// summary: /api/dashboard/summary's answer; view: { onEvent(kind, data), close() } or null
export var page = { summary: { mode: "server" }, view: null };
var timers = [];
var charts = [];

export function later(fn, ms) { var t = setInterval(fn, ms); timers.push(t); return t; }
export function keepChart(c) { charts.push(c); return c; }
// End what the current view started: its timers and charts.
export function endView() {
  timers.forEach(clearInterval); timers = [];
  charts.forEach(function (c) { try { c.destroy(); } catch (e) { /* gone */ } }); charts = [];
}
