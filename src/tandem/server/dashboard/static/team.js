/* tandem dashboard: the team pages (issue 24) — the audit log, and the groups box of the
   cluster view. Loaded before app.js; uses app.js's helpers (window.tandemUI) at call time. */
(function () {
  "use strict";

  var ACTIONS = ["jobs.submit", "jobs.stop", "models.put", "models.alias", "models.delete",
    "packages.upload", "users.add", "users.revoke", "users.set_role", "users.set_group",
    "quotas.set", "quotas.delete"];

  function fmtQuota(q) {
    if (!q) return "";
    return Object.keys(q).map(function (k) { return k + " " + q[k]; }).join(", ");
  }

  // The audit log: who did what to which object, when, and the outcome; filter by user and action.
  function auditView(main, q) {
    var ui = window.tandemUI, el = ui.el;
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
    ui.api("/api/users").then(function (d) {
      d.users.forEach(function (u) {
        userSel.appendChild(el("option", { value: u.name, text: u.name + " (" + u.role + (u.group ? ", " + u.group : "") + ")" }));
      });
      userSel.value = q.user || "";
    }).catch(function () { /* the filter still takes the user from the address */ });
    function load() {
      var params = ["limit=200"];
      if (q.user) params.push("user=" + encodeURIComponent(q.user));
      if (q.action) params.push("action=" + encodeURIComponent(q.action));
      return ui.api("/api/audit?" + params.join("&")).then(function (d) {
        ui.clear(box).appendChild(ui.table(["when", "user", "action", "object", "outcome", "detail"], d.entries.map(function (e) {
          return [ui.fmtTime(e.time), el("a", { href: "#/audit?user=" + encodeURIComponent(e.user), text: e.user }), e.action, e.target || "",
            el("span", { cls: "outcome o-" + e.outcome, text: e.outcome + " (" + e.status + ")" }), e.detail || ""];
        }), "audit-table"));
      }).catch(function (e) { ui.clear(box).appendChild(el("p", { cls: "error", text: e.message })); });
    }
    load();
    ui.later(load, 5000);
    return {};
  }

  // The cluster view's groups: members, the group's quota, what its members hold together.
  function groupsBox(sch) {
    var ui = window.tandemUI, el = ui.el;
    var groups = {};
    Object.keys(sch.groups || {}).forEach(function (owner) {
      var g = sch.groups[owner];
      (groups[g] = groups[g] || []).push(owner);
    });
    Object.keys(sch.group_quotas || {}).forEach(function (g) { groups[g] = groups[g] || []; });
    var names = Object.keys(groups).sort();
    if (!names.length) return null;
    return ui.table(["group", "members", "holds", "group quota"], names.map(function (g) {
      return [g, groups[g].sort().join(", "), ui.fmtRes((sch.group_in_use || {})[g]) || "nothing", fmtQuota((sch.group_quotas || {})[g]) || "none"];
    }), "groups-table");
  }

  window.tandemTeam = { auditView: auditView, groupsBox: groupsBox };
})();
