/* tandem dashboard: the models view — what is being served, the registry's versions. */

import { api } from "./api.js";
import { later, main } from "./state.js";
import { badge, clear, el, fmtNum, fmtTime, table } from "./ui.js";

export function modelsView() {
  main.appendChild(el("h1", { text: "Models" }));
  main.appendChild(el("h2", { text: "Being served" }));
  var servedDiv = el("div", { id: "served" }); main.appendChild(servedDiv);
  main.appendChild(el("h2", { text: "Registry" }));
  var regDiv = el("div", { id: "registry" }); main.appendChild(regDiv);
  function short(obj, n) {
    var keys = Object.keys(obj || {}).slice(0, n || 4);
    return keys.map(function (k) { var v = obj[k]; return k + "=" + (typeof v === "number" ? fmtNum(v) : (typeof v === "object" ? JSON.stringify(v) : String(v))); }).join("  ");
  }
  function lineage(l) {
    l = l || {};
    var parts = [];
    if (l.job_id) parts.push(el("a", { href: "#/job/" + encodeURIComponent(l.job_id), text: "job " + l.job_id }));
    if (l.trial_id) parts.push(el("span", { text: " trial " + l.trial_id }));
    if (l.run_path) parts.push(el("div", { cls: "mono muted", text: l.run_path }));
    else if (l.checkpoint) parts.push(el("div", { cls: "mono muted", text: l.checkpoint }));
    return el("div", {}, parts.length ? parts : [el("span", { cls: "muted", text: "—" })]);
  }
  function load() {
    return api("/api/dashboard/models").then(function (d) {
      clear(servedDiv).appendChild(table(["model", "job", "owner", "state", "where", "replicas ready"], d.served.map(function (s) {
        return [s.model || s.name, el("a", { href: "#/job/" + encodeURIComponent(s.job_id), text: s.job_id }), s.owner || "", badge(s.state),
          el("span", { cls: "mono", text: (s.url || "") + (s.url ? "" : (s.route_prefix || "")) }),
          (s.replicas_ready === null || s.replicas_ready === undefined ? "" : s.replicas_ready) + (s.replicas ? " / " + s.replicas : "")];
      }), "served-table"));
      clear(regDiv);
      if (!d.models.length) regDiv.appendChild(el("p", { cls: "muted", text: "No models registered yet (model.put(...) or tandem models)." }));
      d.models.forEach(function (m) {
        var aliases = Object.keys(m.aliases || {}).map(function (a) { return a + " → v" + m.aliases[a]; }).join(", ");
        regDiv.appendChild(el("div", { cls: "row" }, [el("h2", { text: m.name }),
          el("span", { cls: "muted", text: m.versions + " version(s), latest v" + m.latest + (aliases ? " · " + aliases : "") }),
          m.owner ? el("span", { cls: "owner", "data-model-owner": m.name, text: "owner: " + m.owner }) : null]));
        regDiv.appendChild(table(["version", "aliases", "created", "metrics", "config", "from", "class"], m.detail.map(function (v) {
          return ["v" + v.version, (v.aliases || []).join(", "), fmtTime(v.created), short(v.metrics), short(v.config), lineage(v.lineage),
            el("span", { cls: "mono", text: (v.model_class || {}).name || (v.model_class || {}).qualname || "" })];
        }), "versions-" + m.name));
      });
    }).catch(function (e) { clear(regDiv).appendChild(el("p", { cls: "error", text: e.message })); });
  }
  load();
  later(load, 5000);
  return {};
}
