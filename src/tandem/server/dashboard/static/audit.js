/* tandem dashboard: the audit page (admins) — every write to the server, allowed or refused,
   newest first; filter by user and action (kept in the address). */

import { api } from "./api.js";
import { later } from "./state.js";
import { clear, el, fmtTime, table } from "./ui.js";

var ACTIONS = ["jobs.submit", "jobs.stop", "models.put", "models.alias", "models.delete",
  "packages.upload", "users.add", "users.revoke", "users.set_role", "users.set_group",
  "quotas.set", "quotas.delete"];

// The audit log: who did what to which object, when, and the outcome; filter by user and action.
export function auditView(main, q) {
  q = q || {};
  main.appendChild(el("h1", { text: "Audit log" }));
  main.appendChild(el("p", { cls: "muted", text: "Every write to this server, allowed or refused, newest first. Reads are not logged." }));
  var userSel = el("select", { id: "audit-user" }, [el("option", { value: "", text: "all users" })]);
  var actionSel = el("select", { id: "audit-action" }, [el("option", { value: "", text: "all actions" })].concat(
    ACTIONS.map(function (a) { return el("option", { value: a, text: a }); })));
  actionSel.value = q.action || "";
  var form = el("form", { cls: "filters", id: "audit-filters", onsubmit: function (e) {
    e.preventDefault();
    var parts = [];
    if (userSel.value) parts.push("user=" + encodeURIComponent(userSel.value));
    if (actionSel.value) parts.push("action=" + encodeURIComponent(actionSel.value));
    location.hash = "#/audit" + (parts.length ? "?" + parts.join("&") : "");
  } }, [userSel, actionSel, el("button", { type: "submit", text: "Filter" })]);
  main.appendChild(form);
  var box = el("div", { id: "audit" });
  main.appendChild(box);
  api("/api/users").then(function (d) {
    d.users.forEach(function (u) {
      userSel.appendChild(el("option", { value: u.name, text: u.name + " (" + u.role + (u.group ? ", " + u.group : "") + ")" }));
    });
    userSel.value = q.user || "";
  }).catch(function () { /* the filter still takes the user from the address */ });
  function load() {
    var params = ["limit=200"];
    if (q.user) params.push("user=" + encodeURIComponent(q.user));
    if (q.action) params.push("action=" + encodeURIComponent(q.action));
    return api("/api/audit?" + params.join("&")).then(function (d) {
      clear(box).appendChild(table(["when", "user", "action", "object", "outcome", "detail"], d.entries.map(function (e) {
        return [fmtTime(e.time), el("a", { href: "#/audit?user=" + encodeURIComponent(e.user), text: e.user }), e.action, e.target || "",
          el("span", { cls: "outcome o-" + e.outcome, text: e.outcome + " (" + e.status + ")" }), e.detail || ""];
      }), "audit-table"));
    }).catch(function (e) { clear(box).appendChild(el("p", { cls: "error", text: e.message })); });
  }
  load();
  later(load, 5000);
  return {};
}
