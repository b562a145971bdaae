/* tandem dashboard: the jobs view — filters, the paged list, live state and progress. */

import { api } from "./api.js";
import { ACTIVE, STATES, mayStop, stopJob, whyNot } from "./jobctl.js";
import { later, main } from "./state.js";
import { badge, clear, debounce, el, fmtDur, fmtNum, fmtRes, sparkline } from "./ui.js";


// The why column: the job's reason, then how often it was preempted and, unless the reason
// already says it (a preempted run waiting to resume does), why the last time.
function whyText(job) {
  let preempted = "";
  if (job.preemptions) {
    preempted = "preempted " + job.preemptions + "×";
    if (job.preempted && !(job.reason || "").includes(job.preempted)) preempted += ": " + job.preempted;
  }
  return [job.reason, preempted].filter(Boolean).join(" · ");
}

export function jobsView(params) {
  var state = { offset: +(params.offset || 0), limit: 50, states: params.state ? params.state.split(",") : [],
    name: params.name || "", tag: params.tag || "", rows: {} };
  main.appendChild(el("h1", { text: "Jobs" }));
  var counts = el("p", { cls: "muted", id: "job-counts" });
  main.appendChild(counts);
  var stateBoxes = STATES.map(function (s) {
    var cb = el("input", { type: "checkbox", value: s, id: "f-" + s });
    if (state.states.indexOf(s) >= 0) cb.checked = true;
    return el("label", {}, [cb, " " + s]);
  });
  var nameIn = el("input", { type: "text", placeholder: "name (exact)", id: "f-name", value: state.name });
  var tagIn = el("input", { type: "text", placeholder: "tag", id: "f-tag", value: state.tag });
  var form = el("form", { cls: "filters", id: "job-filters", onsubmit: function (e) {
    e.preventDefault();
    state.states = stateBoxes.map(function (l) { return l.firstChild; }).filter(function (c) { return c.checked; }).map(function (c) { return c.value; });
    state.name = nameIn.value.trim(); state.tag = tagIn.value.trim(); state.offset = 0;
    load();
  } }, stateBoxes.concat([nameIn, tagIn, el("button", { type: "submit", text: "Filter" })]));
  main.appendChild(form);
  var table = el("table", { id: "jobs" });
  var thead = el("tr", {}, ["Job", "State", "Owner", "Priority", "Progress", "Resources", "Age", "Duration", "Why / error", ""].map(function (h) { return el("th", { text: h }); }));
  table.appendChild(el("thead", {}, [thead]));
  var tbody = el("tbody");
  table.appendChild(tbody);
  main.appendChild(table);
  var pager = el("div", { cls: "pager" });
  main.appendChild(pager);

  function progressCell(td, p) {
    clear(td);
    if (!p || (!p.iteration && p.value === null)) { td.appendChild(el("span", { cls: "muted", text: "–" })); return; }
    td.appendChild(el("span", { cls: "mono", text: "it " + p.iteration + (p.epoch !== null && p.epoch !== undefined ? " · epoch " + p.epoch : "") + (p.metric ? "  " + p.metric + "=" + fmtNum(p.value) : "") + " " }));
    td.appendChild(sparkline(p.spark));
  }
  function actionCell(td, job) {
    clear(td);
    if (!ACTIVE[job.state]) return;
    if (!mayStop(job)) {
      td.appendChild(el("button", { cls: "danger", text: job.state === "PENDING" ? "Cancel" : "Stop",
        "data-stop": job.job_id, disabled: "disabled", title: whyNot(job) }));
      return;
    }
    td.appendChild(el("button", { cls: "danger", text: job.state === "PENDING" ? "Cancel" : "Stop",
      "data-stop": job.job_id, onclick: function () {
        stopJob(job).then(function (r) { if (r) { job.state = r.state; render(job); } })
          .catch(function (e) { alert("Could not stop: " + e.message); });
      } }));
  }
  function render(job) {
    var r = state.rows[job.job_id];
    if (!r) return;
    clear(r.state).appendChild(badge(job.state));
    actionCell(r.action, job);
  }
  function row(job) {
    var tds = {
      name: el("td", {}, [el("a", { href: "#/job/" + encodeURIComponent(job.job_id), text: job.name }), el("div", { cls: "muted mono", text: job.job_id })]),
      state: el("td", {}, [badge(job.state)]),
      owner: el("td", { cls: "owner", text: job.owner || "" }),
      priority: el("td", { cls: "num", text: job.priority }),
      progress: el("td"),
      res: el("td", { text: fmtRes(job.resources) }),
      age: el("td", { cls: "num" }), dur: el("td", { cls: "num" }),
      error: el("td", { cls: job.error ? "err" : (job.state === "RUNNING" && !job.preemptions ? "muted" : "why"), title: job.error || job.reason || "", text: job.error || whyText(job) }),
      action: el("td"),
    };
    progressCell(tds.progress, job.progress);
    actionCell(tds.action, job);
    var tr = el("tr", { "data-job": job.job_id }, Object.keys(tds).map(function (k) { return tds[k]; }));
    state.rows[job.job_id] = { job: job, tr: tr, state: tds.state, progress: tds.progress, action: tds.action, age: tds.age, dur: tds.dur };
    return tr;
  }
  function tick() {
    var now = Date.now() / 1000;
    Object.keys(state.rows).forEach(function (id) {
      var r = state.rows[id], j = r.job;
      r.age.textContent = fmtDur(now - j.submitted_at);
      r.dur.textContent = j.started_at ? fmtDur((j.ended_at && !ACTIVE[j.state] ? j.ended_at : now) - j.started_at) : "";
    });
  }
  function query() {
    var q = ["limit=" + state.limit, "offset=" + state.offset];
    state.states.forEach(function (s) { q.push("state=" + s); });
    if (state.name) q.push("name=" + encodeURIComponent(state.name));
    if (state.tag) q.push("tag=" + encodeURIComponent(state.tag));
    return q.join("&");
  }
  function load() {
    return api("/api/dashboard/jobs?" + query()).then(function (page) {
      clear(tbody); state.rows = {};
      page.jobs.forEach(function (j) { tbody.appendChild(row(j)); });
      if (!page.jobs.length) tbody.appendChild(el("tr", {}, [el("td", { colspan: 10, cls: "muted", text: "No jobs match." })]));
      tick();
      clear(pager);
      pager.appendChild(el("button", { text: "← Newer", disabled: state.offset ? null : "disabled", onclick: function () { state.offset = Math.max(0, state.offset - state.limit); load(); } }));
      pager.appendChild(el("span", { cls: "muted", text: "jobs " + (page.jobs.length ? state.offset + 1 : 0) + "–" + (state.offset + page.jobs.length) + " · server " + page.server_ms + " ms" }));
      pager.appendChild(el("button", { text: "Older →", disabled: page.has_more ? null : "disabled", onclick: function () { state.offset += state.limit; load(); } }));
    }).catch(function (e) { clear(tbody).appendChild(el("tr", {}, [el("td", { colspan: 9, cls: "error", text: String(e.message) })])); });
  }
  function loadCounts() {
    api("/api/dashboard/summary").then(function (s) {
      var a = s.active || {};
      counts.textContent = "running " + (a.RUNNING || 0) + (a.RESTARTING ? " · restarting " + a.RESTARTING : "") + " · queued " + (a.PENDING || 0) + " · cluster " + fmtRes(s.resources);
    }).catch(function () {});
  }
  var reload = debounce(function () { load(); loadCounts(); }, 400);
  load(); loadCounts();
  later(tick, 1000);
  return {
    onEvent: function (kind, data) {
      if (kind === "job") {
        var r = state.rows[data.job_id];
        if (r) {
          r.job.state = data.state;
          if (data.state === "RUNNING" && !r.job.started_at) r.job.started_at = data.time;
          if (!ACTIVE[data.state]) r.job.ended_at = data.time;
          render(r.job);
          if (!ACTIVE[data.state]) reload();  // its error and final metric
        } else if (state.offset === 0) reload();
        loadCounts();
      } else if (kind === "progress") {
        Object.keys(data).forEach(function (id) {
          var r = state.rows[id];
          if (r) { r.job.progress = data[id]; progressCell(r.progress, data[id]); }
        });
      }
    },
  };
}
