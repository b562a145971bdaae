/* tandem dashboard: the server's live stream (server-sent events) for the jobs and
   cluster views; each event goes to the view on screen. */

import { page } from "./state.js";

var es = null;
// One long-lived stream at a time per page (browsers allow 6 connections per server):
// the jobs and cluster views use the global stream, a job's page its own streams.
export function disconnect() {
  if (es) { es.close(); es = null; }
  var live = document.getElementById("live");
  if (page.summary.mode === "server") { live.textContent = "refreshes every few s"; live.className = "live"; }
}
export function connect() {
  if (page.summary.mode !== "server" || es) return;
  var live = document.getElementById("live");
  es = new EventSource("/api/dashboard/events");
  es.addEventListener("hello", function () { live.textContent = "live"; live.className = "live on"; });
  es.onerror = function () { live.textContent = "reconnecting"; live.className = "live off"; };
  ["job", "progress", "cluster"].forEach(function (kind) {
    es.addEventListener(kind, function (ev) {
      var data; try { data = JSON.parse(ev.data); } catch (e) { return; }
      if (page.view && page.view.onEvent) page.view.onEvent(kind, data);
    });
  });
}
