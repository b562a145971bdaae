/* tandem dashboard: one page, hash routes, live over server-sent events.
   No build step, no network access beyond this server: charts use the vendored uPlot.
   This module starts the page (asks the server what it is, shows the matching tabs) and
   routes each address to its view's module. */

import { api, leave } from "./api.js";
import { auditView } from "./audit.js";
import { clusterView } from "./cluster.js";
import { experimentView, experimentsView, runView } from "./experiments.js";
import { jobView } from "./job.js";
import { jobsView } from "./jobs.js";
import { connect, disconnect } from "./live.js";
import { modelsView } from "./models.js";
import { endView, main, page } from "./state.js";
import { clear, debounce, el } from "./ui.js";

// ------------------------------------------------------------------ router
// Each address (#/NAME/ARG?k=v&...) to the view that draws it into <main>; a view answers
// { onEvent(kind, data), close() } or nothing.
var VIEWS = {
  jobs: function (arg, q) { return jobsView(q); },
  job: function (arg) { return jobView(arg); },
  cluster: function () { return clusterView(); },
  experiments: function () { return experimentsView(); },
  experiment: function (arg) { return experimentView(arg); },
  run: function (arg) { return runView(arg); },
  models: function () { return modelsView(); },
  audit: function (arg, q) { return auditView(main, q); },
};

function route() {
  endView();
  if (page.view && page.view.close) page.view.close();
  clear(main);
  var h = (location.hash || "#/jobs").slice(2);
  var q = {}, qi = h.indexOf("?");
  if (qi >= 0) { h.slice(qi + 1).split("&").forEach(function (kv) { var p = kv.split("="); q[p[0]] = decodeURIComponent(p[1] || ""); }); h = h.slice(0, qi); }
  var parts = h.split("/");
  var summary = page.summary;
  var name = parts[0] || (summary.mode === "server" ? "jobs" : "experiments");
  if (summary.mode !== "server" && (name === "jobs" || name === "cluster" || name === "job")) name = "experiments";
  document.querySelectorAll("#nav a").forEach(function (a) {
    a.classList.toggle("active", a.getAttribute("data-view") === name || (name === "job" && a.getAttribute("data-view") === "jobs") ||
      ((name === "experiment" || name === "run") && a.getAttribute("data-view") === "experiments"));
  });
  document.title = "tandem · " + name;
  if (name === "jobs" || name === "cluster") connect(); else disconnect();
  if (Object.prototype.hasOwnProperty.call(VIEWS, name)) page.view = VIEWS[name](parts[1], q);
  else { main.appendChild(el("p", { text: "No such page." })); page.view = null; }
}

api("/api/dashboard/summary").then(function (s) {
  page.summary = s;
  if (s.mode !== "server") {
    document.querySelectorAll('#nav a[data-view="jobs"], #nav a[data-view="cluster"]').forEach(function (a) { a.hidden = true; });
    document.getElementById("logout").hidden = !s.login;
    var live = document.getElementById("live"); live.textContent = "results on disk"; live.className = "live";
  }
  if (s.models) document.getElementById("nav-models").hidden = false;
  if (s.user && s.user.role === "admin") document.getElementById("nav-audit").hidden = false;
  if (s.user) {
    var who = document.getElementById("whoami");
    who.textContent = s.user.name + " (" + s.user.role + ")"; who.hidden = false;
  }
  route();
}).catch(function (e) { clear(main).appendChild(el("p", { cls: "error", text: "Cannot reach the server: " + e.message })); });
window.addEventListener("hashchange", route);
// Logging out: the view's timers, the live stream and any later call end before the form
// goes, so nothing asks the server between its clearing the cookie and the login page.
document.getElementById("logout").addEventListener("submit", function () {
  leave(); endView(); disconnect();
  if (page.view && page.view.close) page.view.close();
  page.view = null;
});
window.addEventListener("resize", debounce(route, 300));
