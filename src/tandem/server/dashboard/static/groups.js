/* tandem dashboard: the cluster view's groups box — each group's members, what they hold
   together, and the group's quota. */

import { fmtRes, table } from "./ui.js";

function fmtQuota(q) {
  if (!q) return "";
  return Object.keys(q).map(function (k) { return k + " " + q[k]; }).join(", ");
}


// The cluster view's groups: members, the group's quota, what its members hold together.
export function groupsBox(sch) {
  var groups = {};
  Object.keys(sch.groups || {}).forEach(function (owner) {
    var g = sch.groups[owner];
    (groups[g] = groups[g] || []).push(owner);
  });
  Object.keys(sch.group_quotas || {}).forEach(function (g) { groups[g] = groups[g] || []; });
  var names = Object.keys(groups).sort();
  if (!names.length) return null;
  return table(["group", "members", "holds", "group quota"], names.map(function (g) {
    return [g, groups[g].sort().join(", "), fmtRes((sch.group_in_use || {})[g]) || "nothing", fmtQuota((sch.group_quotas || {})[g]) || "none"];
  }), "groups-table");
}
