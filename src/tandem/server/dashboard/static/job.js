/* tandem dashboard: one job's page — summary, live metrics, logs, resource use per worker,
   checkpoints, state transitions, config and spec. */

import { api } from "./api.js";
import { lineChart } from "./charts.js";
import { ACTIVE, mayStop, stopJob, whyNot } from "./jobctl.js";
import { checkpointTable, logPanes, metricPanel } from "./panels.js";
import { later, main } from "./state.js";
import { badge, clear, el, fmtBytes, fmtDur, fmtRes, fmtTime, table } from "./ui.js";

export function jobView(id) {
  var jobId = decodeURIComponent(id);
  var rows = [], overlays = {}, job = null, closed = false;
  var head = el("div");
  main.appendChild(head);
  var sum = el("div", { cls: "card kv", id: "job-summary" });
  main.appendChild(sum);
  main.appendChild(el("h2", { text: "Metrics" }));
  var mcard = el("div", { cls: "card" });
  main.appendChild(mcard);
  var overlaySel = el("select", { id: "overlay" }, [el("option", { value: "", text: "overlay another run…" })]);
  overlaySel.addEventListener("change", function () {
    var other = overlaySel.value; if (!other) return;
    overlaySel.value = "";
    fetchAllResults(other).then(function (rs) { overlays[other] = rs; panel.draw(); });
  });
  var panel = metricPanel(mcard, function () {
    var runs = [{ label: job ? job.name : jobId, rows: rows }];
    Object.keys(overlays).forEach(function (o) { runs.push({ label: o, rows: overlays[o] }); });
    return runs;
  }, overlaySel);
  api("/api/dashboard/jobs?limit=100").then(function (p) {
    p.jobs.forEach(function (j) { if (j.job_id !== jobId) overlaySel.appendChild(el("option", { value: j.job_id, text: j.name + " · " + j.job_id })); });
  }).catch(function () {});
  main.appendChild(el("h2", { text: "Logs" }));
  var logs = logPanes(main);
  main.appendChild(el("h2", { text: "Resource use per worker" }));
  var usageDiv = el("div", { cls: "grid2", id: "usage" });
  main.appendChild(usageDiv);
  main.appendChild(el("h2", { text: "Checkpoints" }));
  var ckDiv = el("div", { id: "checkpoints" });
  main.appendChild(ckDiv);
  main.appendChild(el("h2", { text: "State transitions" }));
  var trDiv = el("div", { id: "transitions" });
  main.appendChild(trDiv);
  main.appendChild(el("h2", { text: "Config and spec" }));
  var cfgDiv = el("div", { cls: "grid2" });
  var configBox = el("div"), specBox = el("div");
  cfgDiv.appendChild(configBox); cfgDiv.appendChild(specBox);
  main.appendChild(cfgDiv);

  function fetchAllResults(jid) {
    var out = [];
    function page(after) {
      return api("/api/jobs/" + encodeURIComponent(jid) + "/results?limit=20000&after_seq=" + after).then(function (p) {
        p.results.forEach(function (r) { out.push(r.metrics); });
        if (p.results.length === 20000) return page(p.next_after_seq);
        return out;
      });
    }
    return page(-1);
  }
  function renderHead() {
    clear(head);
    var stop = ACTIVE[job.state] && !mayStop(job) ? el("button", { cls: "danger", id: "stop-job", disabled: "disabled", title: whyNot(job), text: job.state === "PENDING" ? "Cancel" : "Stop" }) : ACTIVE[job.state] ? el("button", { cls: "danger", id: "stop-job", text: job.state === "PENDING" ? "Cancel" : "Stop",
      onclick: function () { stopJob(job).then(function (r) { if (r) { job.state = r.state; renderHead(); } }).catch(function (e) { alert(e.message); }); } }) : null;
    head.appendChild(el("div", { cls: "row" }, [el("h1", { text: job.name }), badge(job.state), el("span", { cls: "muted mono", text: job.job_id }), stop]));
  }
  function renderSummary() {
    clear(sum);
    var res = {}; (job.spec.bundles || []).forEach(function (b) { for (var k in b) res[k] = (res[k] || 0) + b[k]; });
    var items = [["state", job.state], ["owner", job.owner || ""], ["priority", job.priority], ["tags", (job.tags || []).join(", ")],
      ["submitted", fmtTime(job.submitted_at)], ["started", fmtTime(job.started_at)], ["ended", fmtTime(job.ended_at)],
      ["duration", job.started_at ? fmtDur((job.ended_at || Date.now() / 1000) - job.started_at) : ""],
      ["workers", (job.spec.num_workers || "") + " × " + fmtRes((job.spec.bundles || [])[0])], ["holds", fmtRes(res)],
      ["run folder", (job.result && job.result.path) || (job.spec.metadata || {}).run_path || ""]];
    items.forEach(function (kv) { sum.appendChild(el("div", { text: kv[0] })); sum.appendChild(el("div", { cls: kv[0] === "run folder" ? "mono" : "", text: String(kv[1] === null || kv[1] === undefined ? "" : kv[1]) })); });
    if (job.error) {
      sum.appendChild(el("div", { text: "error" }));
      sum.appendChild(el("div", {}, [el("div", { cls: "error", text: job.error }),
        job.traceback ? el("details", {}, [el("summary", { text: "traceback" }), el("pre", { cls: "log", text: job.traceback })]) : null]));
    }
    clear(trDiv).appendChild(table(["from", "to", "time", "reason"], (job.transitions || []).map(function (t) {
      return [t.from_state || "—", badge(t.to_state), fmtTime(t.time), t.reason || (t.to_state === "FAILED" ? job.error || "" : "")];
    }), "transitions-table"));
    clear(specBox);
    specBox.appendChild(el("div", { cls: "card" }, [el("div", { cls: "muted", text: "spec" }), el("pre", { cls: "mono", text: JSON.stringify(redact(job.spec), null, 2) })]));
  }
  function loadJob() {
    return api("/api/jobs/" + encodeURIComponent(jobId)).then(function (j) { job = j; renderHead(); renderSummary(); });
  }
  function loadCheckpoints() {
    api("/api/dashboard/jobs/" + encodeURIComponent(jobId) + "/checkpoints").then(function (c) {
      clear(ckDiv).appendChild(checkpointTable(c.checkpoints, c.latest));
      clear(configBox);
      if (c.config) configBox.appendChild(el("div", { cls: "card" }, [el("div", { cls: "muted", text: "config (params.json)" }), el("pre", { cls: "mono", text: JSON.stringify(c.config, null, 2) })]));
    }).catch(function () {});
  }
  var usageSince = 0, usage = {};
  function loadUsage() {
    return api("/api/jobs/" + encodeURIComponent(jobId) + "/usage?limit=20000" + (usageSince ? "&since=" + usageSince : "")).then(function (u) {
      u.samples.forEach(function (s) {
        (usage[s.rank] = usage[s.rank] || []).push(s);
        usageSince = Math.max(usageSince, s.time);
      });
      drawUsage();
    }).catch(function () {});
  }
  function drawUsage() {
    clear(usageDiv);
    var ranks = Object.keys(usage).sort(function (a, b) { return a - b; });
    if (!ranks.length) { usageDiv.appendChild(el("p", { cls: "muted", text: "No samples (the server samples running workers every few seconds)." })); return; }
    var specs = [["cpu_percent", "CPU %", null], ["rss_bytes", "RSS", fmtBytes], ["gpu_util", "GPU utilisation %", null], ["gpu_mem_bytes", "GPU memory", fmtBytes]];
    specs = specs.filter(function (sp) {
      return ranks.some(function (r) { return usage[r].some(function (s) { return s[sp[0]] !== null && s[sp[0]] !== undefined; }); });
    });
    var boxes = specs.map(function () { var b = el("div", { cls: "card" }); usageDiv.appendChild(b); return b; });
    specs.forEach(function (sp, bi) {
      var box = boxes[bi];
      lineChart(box, { title: sp[1], time: true, yfmt: sp[2], height: 200, series: ranks.map(function (r) {
        return { label: "rank " + r, x: usage[r].map(function (s) { return s.time; }), y: usage[r].map(function (s) { return s[sp[0]]; }) };
      }) });
    });
  }
  function followLogs() {
    var ctrl = new AbortController();
    fetch("/api/jobs/" + encodeURIComponent(jobId) + "/logs?follow=true", { credentials: "same-origin", signal: ctrl.signal }).then(function (r) {
      if (!r.ok || !r.body) return;
      var reader = r.body.getReader(), dec = new TextDecoder(), buf = "";
      function pump() {
        return reader.read().then(function (x) {
          if (x.done) return;
          buf += dec.decode(x.value, { stream: true });
          var lines = buf.split("\n"); buf = lines.pop();
          lines.forEach(function (line) {
            var m = /^\(rank=(\d+)\) (.*)$/.exec(line);
            if (m) logs.add(m[1], m[2] + "\n"); else logs.add("0", line + "\n");
          });
          return pump();
        });
      }
      return pump();
    }).catch(function () {});
    return ctrl;
  }
  var logCtrl = null, jes = null;
  loadJob().then(function () {
    logCtrl = followLogs();
    loadCheckpoints(); loadUsage();
    jes = new EventSource("/api/jobs/" + encodeURIComponent(jobId) + "/events");
    jes.onopen = function () { var l = document.getElementById("live"); l.textContent = "live"; l.className = "live on"; };
    jes.addEventListener("reports", function (ev) {
      var d = JSON.parse(ev.data);
      d.rows.forEach(function (r, i) { rows[d.first_seq + i] = r; });
      rows = rows.filter(function () { return true; });
      panel.draw();
    });
    jes.addEventListener("status", function (ev) {
      var d = JSON.parse(ev.data);
      if (job && d.state !== job.state) { job.state = d.state; loadJob(); }
    });
    jes.addEventListener("end", function () {
      jes.close(); loadJob(); loadCheckpoints(); loadUsage();
    });
    panel.drawNow();
  }).catch(function (e) { clear(main).appendChild(el("p", { cls: "error", text: e.message })); });
  later(function () { if (job && ACTIVE[job.state]) { loadUsage(); loadCheckpoints(); } }, 3000);
  return {
    onEvent: function () {},
    close: function () { closed = true; if (logCtrl) logCtrl.abort(); if (jes) jes.close(); },
  };
}

// environment variables may hold secrets: show their names only
function redact(spec) {
  var out = JSON.parse(JSON.stringify(spec || {}));
  if (out.env_vars) Object.keys(out.env_vars).forEach(function (k) { out.env_vars[k] = "…"; });
  return out;
}
