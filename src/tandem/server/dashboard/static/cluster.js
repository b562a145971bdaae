/* tandem dashboard: the cluster view — capacity cards, allocation over time, nodes, who
   holds what, the scheduling policy and groups, the queue. */

import { api } from "./api.js";
import { lineChart } from "./charts.js";
import { groupsBox } from "./groups.js";
import { later, main } from "./state.js";
import { badge, clear, debounce, el, fmtBytes, fmtDur, fmtNum, fmtRes, table } from "./ui.js";

export function clusterView() {
  main.appendChild(el("h1", { text: "Cluster" }));
  var cards = el("div", { cls: "cards", id: "capacity" });
  main.appendChild(cards);
  var range = el("select", { id: "range" }, [["600", "last 10 minutes"], ["3600", "last hour"], ["86400", "last day"]].map(function (o) { return el("option", { value: o[0], text: o[1] }); }));
  main.appendChild(el("div", { cls: "row" }, [el("h2", { text: "Capacity and allocation over time" }), range]));
  var charts = el("div", { cls: "grid2", id: "alloc-charts" });
  main.appendChild(charts);
  main.appendChild(el("h2", { text: "Nodes" }));
  var nodesDiv = el("div", { id: "nodes" }); main.appendChild(nodesDiv);
  main.appendChild(el("h2", { text: "Who holds what" }));
  var holdDiv = el("div", { id: "holders" }); main.appendChild(holdDiv);
  main.appendChild(el("h2", { text: "Queue" }));
  var schedDiv = el("div", { id: "scheduling-box" }); main.appendChild(schedDiv);
  var queueDiv = el("div", { id: "queue" }); main.appendChild(queueDiv);
  var history = [];
  range.addEventListener("change", draw);
  function resKeys() {
    var keys = {};
    history.forEach(function (s) { for (var k in s.capacity) keys[k] = 1; });
    var order = ["CPU", "GPU", "memory"];
    return Object.keys(keys).sort(function (a, b) { var ia = order.indexOf(a), ib = order.indexOf(b); return (ia < 0 ? 9 : ia) - (ib < 0 ? 9 : ib) || (a < b ? -1 : 1); });
  }
  function drawCards() {
    var now = history[history.length - 1]; if (!now) return;
    clear(cards);
    resKeys().forEach(function (k) {
      var cap = now.capacity[k] || 0, al = now.allocated[k] || 0, f = k === "memory" ? fmtBytes : fmtNum;
      cards.appendChild(el("div", { cls: "card stat", "data-res": k }, [el("div", { cls: "muted", text: k }),
        el("div", { cls: "v", text: f(al) + " / " + f(cap) }), el("div", { cls: "muted", text: "allocated / capacity" }),
        el("div", { cls: "bar" }, [el("span", { style: "width:" + (cap ? Math.min(100, 100 * al / cap) : 0) + "%" })])]));
    });
  }
  function draw() {
    drawCards();
    clear(charts);
    var since = Date.now() / 1000 - (+range.value);
    var hs = history.filter(function (s) { return s.time >= since; });
    var last = history[history.length - 1] || { capacity: {}, allocated: {} };
    var keys = resKeys().filter(function (k) { return (last.capacity[k] || 0) > 0 || hs.some(function (s) { return s.allocated[k] > 0; }); });
    var boxes = keys.map(function (k) { var b = el("div", { cls: "card", "data-chart": k }); charts.appendChild(b); return b; });
    keys.forEach(function (k, bi) {
      var box = boxes[bi];
      var t = hs.map(function (s) { return s.time; });
      var series = [
        { label: "capacity", x: t, y: hs.map(function (s) { return s.capacity[k] || 0; }), color: "#667085", dash: true },
        { label: "allocated", x: t, y: hs.map(function (s) { return s.allocated[k] || 0; }), color: "#2f6fed", fill: "rgba(47,111,237,.15)" },
      ];
      if (k === "CPU") series.push({ label: "used by workers", x: t, y: hs.map(function (s) { return (s.used || {}).CPU || 0; }), color: "#e8590c" });
      if (k === "memory") series.push({ label: "workers' RSS", x: t, y: hs.map(function (s) { return (s.used || {}).memory || 0; }), color: "#e8590c" });
      lineChart(box, { title: k, time: true, height: 200, yfmt: k === "memory" ? fmtBytes : null, series: series });
    });
  }
  function tables(d) {
    clear(nodesDiv).appendChild(table(["node", "address", "capacity", "allocated by tandem", "held by"], d.nodes.map(function (n) {
      return [el("span", { cls: "mono", text: n.node_id.slice(0, 16) }), n.ip, fmtRes(n.capacity), fmtRes(n.allocated),
        n.holders.map(function (h) { return h.name + " r" + h.rank; }).join(", ")];
    }), "nodes-table"));
    clear(holdDiv).appendChild(table(["job", "owner", "priority", "state", "holds", "nodes", "CPU % (all workers)", "RSS", "preempted"], d.holders.map(function (h) {
      var cpu = 0, rss = 0; h.usage.forEach(function (u) { cpu += u.cpu_percent || 0; rss += u.rss_bytes || 0; });
      return [el("a", { href: "#/job/" + encodeURIComponent(h.job_id), text: h.name }), h.owner || "", h.priority, badge(h.state), fmtRes(h.holds), h.nodes.map(function (n) { return n.slice(0, 8); }).join(", "), h.usage.length ? cpu.toFixed(0) : "", h.usage.length ? fmtBytes(rss) : "", h.preemptions ? h.preemptions + "× — " + (h.preempted || "") : ""];
    }), "holders-table"));
    var sch = d.scheduling || {};
    clear(schedDiv).appendChild(el("p", { id: "scheduling", text: "scheduling: " + (sch.policy || "fifo") + Object.keys(sch.in_use || {}).map(function (o) {
      var q = (sch.quotas || {})[o] || sch.default_quota;
      return "; " + o + " holds " + fmtRes(sch.in_use[o]) + (q ? " (quota " + Object.keys(q).map(function (k) { return k + " " + q[k]; }).join(", ") + ")" : "");
    }).join("") }));
    var gb = groupsBox(sch); if (gb) schedDiv.appendChild(gb);
    clear(queueDiv).appendChild(table(["#", "job", "owner", "priority", "needs", "waiting", "why it waits"], d.queue.map(function (q) {
      return [q.position, el("a", { href: "#/job/" + encodeURIComponent(q.job_id), text: q.name }), q.owner || "", q.priority, fmtRes(q.needs), fmtDur(Date.now() / 1000 - q.submitted_at), q.reason];
    }), "queue-table"));
  }
  function load() {
    return api("/api/dashboard/cluster").then(function (d) { history = d.history; draw(); tables(d); });
  }
  var refreshTables = debounce(function () { api("/api/dashboard/cluster?since=" + (Date.now() / 1000)).then(tables).catch(function () {}); }, 300);
  load().catch(function (e) { main.appendChild(el("p", { cls: "error", text: e.message })); });
  later(refreshTables, 5000);
  return {
    onEvent: function (kind, data) {
      if (kind === "cluster") {
        history.push(data);
        if (history.length > 7000) history.shift();
        draw();
      } else if (kind === "job") refreshTables();
    },
  };
}
