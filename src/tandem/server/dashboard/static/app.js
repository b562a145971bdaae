/* tandem dashboard: one page, hash routes, live over server-sent events.
   No build step, no network access beyond this server: charts use the vendored uPlot. */
(function () {
  "use strict";

  // ------------------------------------------------------------------ helpers
  var main = document.getElementById("main");
  var STATES = ["PENDING", "RUNNING", "RESTARTING", "FINISHED", "FAILED", "STOPPED"];
  var ACTIVE = { PENDING: 1, RUNNING: 1, RESTARTING: 1 };
  var COLORS = ["#2f6fed", "#e8590c", "#2b8a3e", "#c2255c", "#7048e8", "#0b7285", "#e67700",
    "#5c940d", "#862e9c", "#364fc7", "#a61e4d", "#087f5b"];
  var summary = { mode: "server" };
  var view = null;  // the current view: { name, onEvent(kind, data), close() }
  var timers = [];
  var charts = [];

  function el(tag, attrs, children) {
    var e = document.createElement(tag);
    if (attrs) for (var k in attrs) {
      if (k === "text") e.textContent = attrs[k];
      else if (k === "cls") e.className = attrs[k];
      else if (k.slice(0, 2) === "on") e.addEventListener(k.slice(2), attrs[k]);
      else if (attrs[k] !== null && attrs[k] !== undefined) e.setAttribute(k, attrs[k]);
    }
    (children || []).forEach(function (c) {
      if (c === null || c === undefined) return;
      e.appendChild(typeof c === "string" || typeof c === "number" ? document.createTextNode(String(c)) : c);
    });
    return e;
  }
  function clear(node) { while (node.firstChild) node.removeChild(node.firstChild); return node; }
  function cookie(name) {
    var m = document.cookie.match(new RegExp("(?:^|; )" + name + "=([^;]*)"));
    return m ? decodeURIComponent(m[1]) : "";
  }
  function api(path, opts) {
    opts = opts || {};
    var headers = { "Accept": "application/json" };
    if (opts.method && opts.method !== "GET") headers["X-Tandem-CSRF"] = cookie("tandem_csrf");
    return fetch(path, { method: opts.method || "GET", headers: headers, credentials: "same-origin" })
      .then(function (r) {
        if (r.status === 401) { location.href = "/login"; throw new Error("not logged in"); }
        return r.json().then(function (body) {
          var d = body && body.detail;
          if (!r.ok) throw new Error(d ? (typeof d === "string" ? d : JSON.stringify(d)) : r.statusText);
          return body;
        });
      });
  }
  function fmtNum(v) {
    if (v === null || v === undefined || v === "") return "";
    if (typeof v !== "number") return String(v);
    if (Number.isInteger(v)) return String(v);
    var a = Math.abs(v);
    if (a !== 0 && (a < 1e-3 || a >= 1e6)) return v.toExponential(3);
    return v.toPrecision(4).replace(/\.?0+$/, "");
  }
  function fmtBytes(b) {
    if (b === null || b === undefined) return "";
    var u = ["B", "KiB", "MiB", "GiB", "TiB"], i = 0;
    while (b >= 1024 && i < u.length - 1) { b /= 1024; i++; }
    return (i ? b.toFixed(1) : b) + " " + u[i];
  }
  function fmtDur(s) {
    if (s === null || s === undefined) return "";
    if (s < 60) return s.toFixed(s < 10 ? 1 : 0) + " s";
    if (s < 3600) return Math.floor(s / 60) + " m " + Math.floor(s % 60) + " s";
    if (s < 86400) return Math.floor(s / 3600) + " h " + Math.floor((s % 3600) / 60) + " m";
    return Math.floor(s / 86400) + " d " + Math.floor((s % 86400) / 3600) + " h";
  }
  function fmtTime(t) {
    if (!t) return "";
    var d = new Date(t * 1000);
    return d.toLocaleString();
  }
  function fmtRes(res) {
    if (!res) return "";
    return Object.keys(res).sort().map(function (k) {
      return k + " " + (k === "memory" ? fmtBytes(res[k]) : fmtNum(res[k]));
    }).join(" · ");
  }
  function badge(state) { return el("span", { cls: "badge s-" + state, text: state }); }
  function sparkline(values, w, h) {
    w = w || 90; h = h || 22;
    var ns = "http://www.w3.org/2000/svg";
    var svg = document.createElementNS(ns, "svg");
    svg.setAttribute("width", w); svg.setAttribute("height", h); svg.setAttribute("class", "spark");
    var vals = (values || []).filter(function (v) { return typeof v === "number" && isFinite(v); });
    if (vals.length < 2) return svg;
    var lo = Math.min.apply(null, vals), hi = Math.max.apply(null, vals), span = hi - lo || 1;
    var pts = vals.map(function (v, i) {
      return (i * (w - 2) / (vals.length - 1) + 1).toFixed(1) + "," + (h - 2 - (v - lo) * (h - 4) / span).toFixed(1);
    }).join(" ");
    var pl = document.createElementNS(ns, "polyline");
    pl.setAttribute("points", pts); pl.setAttribute("fill", "none");
    pl.setAttribute("stroke", "#2f6fed"); pl.setAttribute("stroke-width", "1.5");
    svg.appendChild(pl);
    return svg;
  }
  function later(fn, ms) { var t = setInterval(fn, ms); timers.push(t); return t; }
  function debounce(fn, ms) {
    var t = null;
    return function () { if (t) return; t = setTimeout(function () { t = null; fn(); }, ms); };
  }
  function confirmDialog(text, yesLabel) {
    var dlg = document.getElementById("confirm");
    document.getElementById("confirm-text").textContent = text;
    document.getElementById("confirm-yes").textContent = yesLabel || "Stop";
    return new Promise(function (resolve) {
      dlg.addEventListener("close", function h() {
        dlg.removeEventListener("close", h); resolve(dlg.returnValue === "ok");
      });
      dlg.showModal();
    });
  }
  // Who is logged in (summary.user) may stop a job: an admin any, a member its own, a viewer none.
  function mayStop(job) {
    var u = summary.user;
    if (!u) return true;
    return u.role === "admin" || (u.role === "member" && (job.owner || "admin") === u.name);
  }
  function whyNot(job) {
    var u = summary.user || {};
    return u.role === "viewer" ? "viewers only read" : "this job belongs to " + (job.owner || "admin") + "; members stop only their own";
  }
  function stopJob(job) {
    var pending = job.state === "PENDING";
    var what = pending ? "Cancel the pending job " : "Stop the running job ";
    return confirmDialog(what + job.name + " (" + job.job_id + ")?" +
      (pending ? " It leaves the queue." : " Its workers are stopped; checkpoints stay."),
      pending ? "Cancel job" : "Stop job").then(function (ok) {
      if (!ok) return null;
      return api("/api/jobs/" + encodeURIComponent(job.job_id) + "/stop?by=dashboard", { method: "POST" });
    });
  }

  // ------------------------------------------------------------------ charts (uPlot)
  // Several (x, y) series with different x values, on one x axis.
  function align(series) {
    var xs = {};
    series.forEach(function (s) { s.x.forEach(function (x) { xs[x] = 1; }); });
    var X = Object.keys(xs).map(Number).sort(function (a, b) { return a - b; });
    var idx = {}; X.forEach(function (x, i) { idx[x] = i; });
    var data = [X];
    series.forEach(function (s) {
      var ys = new Array(X.length).fill(null);
      s.x.forEach(function (x, i) { ys[idx[x]] = s.y[i]; });
      data.push(ys);
    });
    return data;
  }
  function lineChart(target, opts) {
    // opts: {title, series: [{label, x, y, color, points, dash, fill}], xlabel, ylabel, time, height, yfmt}
    clear(target);
    var cs = getComputedStyle(target);
    var inner = target.clientWidth - parseFloat(cs.paddingLeft || 0) - parseFloat(cs.paddingRight || 0);
    var width = Math.max(280, (inner || 600) - 2);
    var series = opts.series.filter(function (s) { return s.x.length; });
    if (!series.length) { target.appendChild(el("p", { cls: "muted", text: opts.empty || "No data yet." })); return null; }
    var data = align(series);
    var useries = [{ label: opts.xlabel || "x" }];
    series.forEach(function (s, i) {
      var color = s.color || COLORS[i % COLORS.length];
      var u = { label: s.label, stroke: color, width: 1.6, spanGaps: true, points: { show: s.x.length < 3 } };
      if (s.dash) u.dash = [6, 4];
      if (s.fill) u.fill = s.fill;
      if (s.points) { u.paths = function () { return null; }; u.points = { show: true, size: 9, fill: color, stroke: color }; u.width = 0; }
      if (opts.yfmt) u.value = function (self, v) { return v === null ? "" : opts.yfmt(v); };
      useries.push(u);
    });
    var axes = [{ label: opts.xlabel || "" }, { label: opts.ylabel || "", size: 70 }];
    if (opts.yfmt) axes[1].values = function (self, ticks) { return ticks.map(opts.yfmt); };
    if (opts.xint) axes[0].incrs = [1, 2, 5, 10, 20, 50, 100, 200, 500, 1000, 2000, 5000, 10000, 20000, 50000];
    var hooks = {};
    if (opts.markers && opts.markers.length) {
      // marks drawn on the plot (e.g. scheduler decisions): several may share one x
      hooks.draw = [function (u) {
        var ctx = u.ctx; ctx.save();
        opts.markers.forEach(function (m) {
          var cx = u.valToPos(m.x, "x", true), cy = u.valToPos(m.y, "y", true);
          ctx.beginPath(); ctx.fillStyle = m.color || "#d93025"; ctx.strokeStyle = "#fff";
          ctx.lineWidth = 1.5 * devicePixelRatio;
          ctx.arc(cx, cy, 5 * devicePixelRatio, 0, 2 * Math.PI); ctx.fill(); ctx.stroke();
        });
        ctx.restore();
      }];
    }
    var u = new uPlot({
      title: opts.title, width: width, height: opts.height || 240, series: useries, axes: axes, hooks: hooks,
      scales: { x: { time: !!opts.time } }, legend: { show: true }, cursor: { drag: { x: true, y: false } },
    }, data, target);
    charts.push(u);
    return u;
  }

  // ------------------------------------------------------------------ live stream
  var es = null;
  // One long-lived stream at a time per page (browsers allow 6 connections per server):
  // the jobs and cluster views use the global stream, a job's page its own streams.
  function disconnect() {
    if (es) { es.close(); es = null; }
    var live = document.getElementById("live");
    if (summary.mode === "server") { live.textContent = "refreshes every few s"; live.className = "live"; }
  }
  function connect() {
    if (summary.mode !== "server" || es) return;
    var live = document.getElementById("live");
    es = new EventSource("/api/dashboard/events");
    es.addEventListener("hello", function () { live.textContent = "live"; live.className = "live on"; });
    es.onerror = function () { live.textContent = "reconnecting"; live.className = "live off"; };
    ["job", "progress", "cluster"].forEach(function (kind) {
      es.addEventListener(kind, function (ev) {
        var data; try { data = JSON.parse(ev.data); } catch (e) { return; }
        if (view && view.onEvent) view.onEvent(kind, data);
      });
    });
  }

  // ------------------------------------------------------------------ jobs view
  function jobsView(params) {
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
        error: el("td", { cls: job.error ? "err" : (job.state === "RUNNING" && !job.preemptions ? "muted" : "why"), title: job.error || job.reason || "", text: job.error || [job.reason, job.preemptions ? "preempted " + job.preemptions + "×: " + job.preempted : ""].filter(Boolean).join(" · ") }),
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
        counts.textContent = "running " + ((a.RUNNING || 0) + (a.RESTARTING || 0)) + " · queued " + (a.PENDING || 0) + " · cluster " + fmtRes(s.resources);
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

  // ------------------------------------------------------------------ one job
  function metricKeys(rows) {
    var keys = {};
    rows.forEach(function (r) { for (var k in r) if (typeof r[k] === "number") keys[k] = 1; });
    return Object.keys(keys).sort();
  }
  function xOf(r, i) { return typeof r.training_iteration === "number" ? r.training_iteration : i + 1; }
  function defaultKey(keys) {
    var pref = ["loss", "val_loss", "valid_loss", "mean_loss", "accuracy", "val_accuracy", "score"];
    for (var i = 0; i < pref.length; i++) if (keys.indexOf(pref[i]) >= 0) return pref[i];
    var skip = { training_iteration: 1, time_total_s: 1, time_this_iter_s: 1, timestamp: 1, epoch: 1, step: 1 };
    for (var j = 0; j < keys.length; j++) if (!skip[keys[j]]) return keys[j];
    return keys[0];
  }
  // A metric chart with a key chooser and other runs overlaid. getRuns() -> [{label, rows}]
  function metricPanel(container, getRuns, addOverlay) {
    var keySel = el("select", { id: "metric-key" });
    var chartDiv = el("div", { cls: "chart", id: "metric-chart" });
    var bar = el("div", { cls: "row" }, [el("label", { for: "metric-key", text: "Metric " }), keySel]);
    if (addOverlay) bar.appendChild(addOverlay);
    container.appendChild(bar);
    container.appendChild(chartDiv);
    var chosen = null, lastKeys = "";
    keySel.addEventListener("change", function () { chosen = keySel.value; draw(); });
    function draw() {
      var runs = getRuns();
      var keys = metricKeys([].concat.apply([], runs.map(function (r) { return r.rows; })));
      if (keys.join() !== lastKeys) {
        lastKeys = keys.join();
        clear(keySel);
        keys.forEach(function (k) { keySel.appendChild(el("option", { value: k, text: k })); });
      }
      if (!chosen || keys.indexOf(chosen) < 0) chosen = defaultKey(keys);
      keySel.value = chosen || "";
      var series = runs.map(function (run) {
        var x = [], y = [];
        run.rows.forEach(function (r, i) { if (typeof r[chosen] === "number") { x.push(xOf(r, i)); y.push(r[chosen]); } });
        return { label: run.label, x: x, y: y };
      });
      lineChart(chartDiv, { title: chosen, series: series, xlabel: "training_iteration", xint: true, ylabel: chosen, empty: "No reports yet." });
    }
    return { draw: debounce(draw, 250), drawNow: draw };
  }

  function logPanes(container) {
    var panes = {};
    var grid = el("div", { cls: "logs", id: "logs" });
    container.appendChild(grid);
    function pane(rank) {
      if (!panes[rank]) {
        var pre = el("pre", { cls: "log", id: "log-rank-" + rank });
        var box = el("div", {}, [el("div", { cls: "muted", text: "rank " + rank }), pre]);
        var keys = Object.keys(panes).map(Number).concat([+rank]).sort(function (a, b) { return a - b; });
        var pos = keys.indexOf(+rank);
        grid.insertBefore(box, grid.children[pos] || null);
        panes[rank] = pre;
      }
      return panes[rank];
    }
    function add(rank, text) {
      var pre = pane(rank);
      var stick = pre.scrollTop + pre.clientHeight >= pre.scrollHeight - 20;
      pre.appendChild(document.createTextNode(text));
      if (pre.textContent.length > 400000) pre.textContent = pre.textContent.slice(-200000);
      if (stick) pre.scrollTop = pre.scrollHeight;
    }
    return { add: add, pane: pane };
  }

  function jobView(id) {
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
  function table(headers, rows, id) {
    var t = el("table", { id: id || null });
    t.appendChild(el("thead", {}, [el("tr", {}, headers.map(function (h) { return el("th", { text: h }); }))]));
    var tb = el("tbody");
    rows.forEach(function (r) {
      tb.appendChild(el("tr", {}, r.map(function (c) {
        if (c instanceof Node) return el("td", {}, [c]);
        return el("td", { cls: typeof c === "number" ? "num" : "", text: typeof c === "number" ? fmtNum(c) : (c === null || c === undefined ? "" : String(c)) });
      })));
    });
    if (!rows.length) tb.appendChild(el("tr", {}, [el("td", { colspan: headers.length, cls: "muted", text: "None." })]));
    t.appendChild(tb);
    return t;
  }
  function checkpointTable(cks, latest) {
    var keys = metricKeys(cks.map(function (c) { return c.metrics || {}; })).filter(function (k) { return k !== "training_iteration"; }).slice(0, 6);
    return table(["iteration", "path"].concat(keys).concat(["saved"]), cks.map(function (c) {
      return [c.iteration, el("span", { cls: "mono", text: c.path + (c.path === latest ? "  (latest)" : "") + (c.deleted ? "  (deleted)" : "") })]
        .concat(keys.map(function (k) { return (c.metrics || {})[k]; })).concat([c.time ? fmtTime(c.time) : ""]);
    }), "checkpoints-table");
  }

  // ------------------------------------------------------------------ cluster view
  function clusterView() {
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
      if (window.tandemTeam) { var gb = window.tandemTeam.groupsBox(sch); if (gb) schedDiv.appendChild(gb); }
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

  // ------------------------------------------------------------------ experiments
  function experimentsView() {
    main.appendChild(el("h1", { text: "Experiments" }));
    var exDiv = el("div", { id: "experiments" }); main.appendChild(exDiv);
    main.appendChild(el("h2", { text: "Runs" }));
    var runDiv = el("div", { id: "runs" }); main.appendChild(runDiv);
    api("/api/dashboard/experiments").then(function (d) {
      var owned = d.experiments.some(function (e) { return "owner" in e; });
      exDiv.appendChild(table(["experiment"].concat(owned ? ["owner"] : []).concat(["trials", "states", "metric", "best", "updated", "folder"]), d.experiments.map(function (e) {
        return [el("a", { href: "#/experiment/" + e.id, text: e.name })].concat(owned ? [e.owner || ""] : []).concat([e.num_trials,
          Object.keys(e.status).map(function (s) { return s + " " + e.status[s]; }).join(", "),
          e.metric ? e.metric + " (" + e.mode + ")" : "", e.best, fmtTime(e.updated), el("span", { cls: "mono muted", text: e.path })]);
      }), "experiments-table"));
    }).catch(function (e) { exDiv.appendChild(el("p", { cls: "error", text: e.message })); });
    api("/api/dashboard/runs").then(function (d) {
      runDiv.appendChild(table(["run", "last report", "updated", "folder"], d.runs.map(function (r) {
        var keys = Object.keys(r.metrics).slice(0, 5);
        return [el("a", { href: "#/run/" + r.id, text: r.name }), keys.map(function (k) { return k + "=" + fmtNum(r.metrics[k]); }).join("  ") + (r.failed ? "  (failed)" : ""), fmtTime(r.updated), el("span", { cls: "mono muted", text: r.path })];
      }), "runs-table"));
    }).catch(function () {});
    return {};
  }

  function parallelCoordinates(target, trials, configKeys, metric, mode) {
    clear(target);
    var ns = "http://www.w3.org/2000/svg";
    var dims = configKeys.concat(metric ? [metric] : []);
    var data = trials.map(function (t) {
      var o = {}; configKeys.forEach(function (k) { o[k] = t.config[k]; });
      if (metric) o[metric] = t.best !== null && t.best !== undefined ? t.best : (t.last || {})[metric];
      return o;
    });
    if (!dims.length || !data.length) { target.appendChild(el("p", { cls: "muted", text: "No trials yet." })); return; }
    var W = Math.max(500, target.clientWidth || 900), H = 320, top = 28, bottom = 24, left = 50, right = 60;
    var svg = document.createElementNS(ns, "svg");
    svg.setAttribute("width", W); svg.setAttribute("height", H); svg.setAttribute("id", "parallel-coordinates");
    var scales = {};
    dims.forEach(function (k) {
      var vals = data.map(function (d) { return d[k]; }).filter(function (v) { return v !== null && v !== undefined; });
      var numeric = vals.length && vals.every(function (v) { return typeof v === "number"; });
      if (numeric) {
        var lo = Math.min.apply(null, vals), hi = Math.max.apply(null, vals);
        scales[k] = { num: true, lo: lo, hi: hi, f: function (v) { return (hi === lo) ? 0.5 : (v - lo) / (hi - lo); } };
      } else {
        var cats = []; vals.forEach(function (v) { v = String(v); if (cats.indexOf(v) < 0) cats.push(v); }); cats.sort();
        scales[k] = { num: false, cats: cats, f: function (v) { return cats.length < 2 ? 0.5 : cats.indexOf(String(v)) / (cats.length - 1); } };
      }
    });
    var xs = dims.map(function (k, i) { return left + i * (W - left - right) / Math.max(1, dims.length - 1); });
    function y(k, v) { return top + (1 - scales[k].f(v)) * (H - top - bottom); }
    var ms = metric ? scales[metric] : null;
    function color(v) {
      if (!ms || !ms.num || v === undefined || v === null) return "#9aa3b2";
      var f = ms.f(v); if (mode === "min") f = 1 - f;  // better = greener
      var r = Math.round(220 - 180 * f), g = Math.round(60 + 140 * f), b = Math.round(60 + 40 * f);
      return "rgb(" + r + "," + g + "," + b + ")";
    }
    data.forEach(function (d, i) {
      var pts = dims.map(function (k, j) { return (d[k] === undefined || d[k] === null) ? null : xs[j].toFixed(1) + "," + y(k, d[k]).toFixed(1); }).filter(Boolean);
      var p = document.createElementNS(ns, "path");
      p.setAttribute("d", "M" + pts.join("L")); p.setAttribute("class", "l");
      p.setAttribute("stroke", color(metric ? d[metric] : null));
      var title = document.createElementNS(ns, "title");
      title.textContent = trials[i].name + ": " + dims.map(function (k) { return k + "=" + fmtNum(d[k]); }).join(", ");
      p.appendChild(title);
      svg.appendChild(p);
    });
    dims.forEach(function (k, j) {
      var g = document.createElementNS(ns, "g"); g.setAttribute("class", "axis");
      var ln = document.createElementNS(ns, "line");
      ln.setAttribute("x1", xs[j]); ln.setAttribute("x2", xs[j]); ln.setAttribute("y1", top); ln.setAttribute("y2", H - bottom);
      g.appendChild(ln);
      function text(x, yy, s, anchor, weight) {
        var t = document.createElementNS(ns, "text"); t.setAttribute("x", x); t.setAttribute("y", yy);
        t.setAttribute("text-anchor", anchor || "middle"); if (weight) t.setAttribute("font-weight", weight);
        t.textContent = s; g.appendChild(t);
      }
      text(xs[j], 14, k, "middle", "600");
      var s = scales[k];
      if (s.num) { text(xs[j] + 4, top + 4, fmtNum(s.hi), "start"); text(xs[j] + 4, H - bottom, fmtNum(s.lo), "start"); }
      else s.cats.forEach(function (c) { text(xs[j] + 4, y(k, c) + 4, c, "start"); });
      svg.appendChild(g);
    });
    target.appendChild(svg);
  }

  function experimentView(id) {
    var metric = null, exp = null, sortKey = "index", sortDir = 1;
    var head = el("div"); main.appendChild(head);
    var bar = el("div", { cls: "row" }); main.appendChild(bar);
    var keySel = el("select", { id: "exp-metric" });
    bar.appendChild(el("label", { for: "exp-metric", text: "Metric " })); bar.appendChild(keySel);
    keySel.addEventListener("change", function () { metric = keySel.value; load(); });
    main.appendChild(el("h2", { text: "Trials" }));
    var tDiv = el("div", { id: "trials" }); main.appendChild(tDiv);
    main.appendChild(el("div", { cls: "grid2" }, [
      el("div", {}, [el("h2", { text: "Best so far" }), el("div", { cls: "card", id: "best-so-far" })]),
      el("div", {}, [el("h2", { text: "Learning curves" }), el("div", { cls: "card", id: "curves" }), el("div", { cls: "legend-dec muted", id: "decisions" })]),
    ]));
    main.appendChild(el("h2", { text: "Parallel coordinates" }));
    var pcDiv = el("div", { cls: "card pc", id: "pc" }); main.appendChild(pcDiv);
    function better(a, b) { return exp.mode === "min" ? a < b : a > b; }
    function drawTrials() {
      var cfg = exp.config_keys;
      var cols = [["index", "#"], ["name", "trial"], ["status", "state"]].concat(cfg.map(function (k) { return ["config/" + k, k]; }))
        .concat([["last", "last " + (metric || "")], ["best", "best " + (metric || "")], ["iters", "iterations"]]);
      function val(t, key) {
        if (key.indexOf("config/") === 0) return t.config[key.slice(7)];
        if (key === "last") return (t.last || {})[metric];
        if (key === "iters") return (t.last || {}).training_iteration;
        return t[key];
      }
      var ts = exp.trials.slice().sort(function (a, b) {
        var x = val(a, sortKey), y = val(b, sortKey);
        if (x === y) return 0; if (x === undefined || x === null) return 1; if (y === undefined || y === null) return -1;
        return (x < y ? -1 : 1) * sortDir;
      });
      var t = el("table", { id: "trials-table" });
      t.appendChild(el("thead", {}, [el("tr", {}, cols.map(function (c) {
        return el("th", { cls: "sort", "data-key": c[0], text: c[1] + (sortKey === c[0] ? (sortDir > 0 ? " ▲" : " ▼") : ""), onclick: function () {
          if (sortKey === c[0]) sortDir = -sortDir; else { sortKey = c[0]; sortDir = 1; }
          drawTrials();
        } });
      }))]));
      var tb = el("tbody");
      var shown = ts.slice(0, 500);
      if (ts.length > shown.length) tDiv.setAttribute("data-more", ts.length - shown.length);
      shown.forEach(function (tr) {
        tb.appendChild(el("tr", {}, cols.map(function (c) {
          var v = val(tr, c[0]);
          if (c[0] === "status") return el("td", {}, [badge(v), tr.error ? el("div", { cls: "err", title: tr.error, text: tr.error }) : null]);
          if (c[0] === "name") return el("td", {}, [tr.run_id ? el("a", { href: "#/run/" + tr.run_id, text: v }) : v]);
          return el("td", { cls: typeof v === "number" ? "num" : "", text: typeof v === "number" ? fmtNum(v) : (v === undefined || v === null ? "" : String(v)) });
        })));
      });
      t.appendChild(tb);
      clear(tDiv).appendChild(t);
      if (ts.length > shown.length) tDiv.appendChild(el("p", { cls: "muted", text: "Showing " + shown.length + " of " + ts.length + " trials in this order; sort by another column to see others." }));
    }
    function drawCharts() {
      var ts = exp.trials.slice().sort(function (a, b) { return a.index - b.index; });
      var xs = [], ys = [], bx = [], by = [], best = null;
      ts.forEach(function (t) {
        if (t.best === null || t.best === undefined) return;
        xs.push(t.index); ys.push(t.best);
        if (best === null || better(t.best, best)) best = t.best;
        bx.push(t.index); by.push(best);
      });
      lineChart(document.getElementById("best-so-far"), { xlabel: "trial", xint: true, ylabel: metric, height: 260, series: [
        { label: "trial's best", x: xs, y: ys, points: true, color: "#9aa3b2" },
        { label: "best so far", x: bx, y: by, color: "#2b8a3e" }] });
      var series = [], marks = [], notes = [];
      ts.forEach(function (t) {
        if (!t.rows.length) return;  // the server sends the best trials' curves only
        var x = [], y = [];
        t.rows.forEach(function (r, i) { if (typeof r[metric] === "number") { x.push(xOf(r, i)); y.push(r[metric]); } });
        series.push({ label: t.name, x: x, y: y });
        (t.decisions || []).forEach(function (d) {
          var i = x.indexOf(d.iteration); if (i < 0) i = x.length - 1; if (i < 0) return;
          marks.push({ x: x[i], y: y[i], color: d.action === "STOP" ? "#d93025" : "#7048e8" }); notes.push(t.name + " @" + d.iteration + ": " + d.action + (d.reason ? " (" + d.reason + ")" : ""));
        });
      });
      lineChart(document.getElementById("curves"), { title: exp.trials.length > exp.curves_shown ? "the " + exp.curves_shown + " best of " + exp.trials.length + " trials" : null, xlabel: "training_iteration", xint: true, ylabel: metric, height: 260, series: series, markers: marks });
      var dec = clear(document.getElementById("decisions"));
      if (notes.length) dec.appendChild(el("details", {}, [el("summary", { text: notes.length + " scheduler decision(s): dots on the curves (red: stop, purple: pause / exploit)" }), el("ul", {}, notes.map(function (n) { return el("li", { text: n }); }))]));
      parallelCoordinates(pcDiv, exp.trials, exp.config_keys, metric, exp.mode);
    }
    function load() {
      return api("/api/dashboard/experiments/" + id + (metric ? "?metric=" + encodeURIComponent(metric) : "")).then(function (e) {
        exp = e; metric = e.metric;
        clear(head).appendChild(el("div", { cls: "row" }, [el("h1", { text: e.name }), el("span", { cls: "muted mono", text: e.path })]));
        clear(keySel); e.metrics.forEach(function (k) { keySel.appendChild(el("option", { value: k, text: k })); });
        keySel.value = metric || "";
        drawTrials(); drawCharts();
      });
    }
    load().catch(function (e) { main.appendChild(el("p", { cls: "error", text: e.message })); });
    later(function () {
      if (exp && exp.trials.some(function (t) { return t.status === "RUNNING" || t.status === "PENDING"; })) load().catch(function () {});
    }, 3000);
    return {};
  }

  function runView(id) {
    var head = el("div"); main.appendChild(head);
    var sum = el("div", { cls: "card kv" }); main.appendChild(sum);
    main.appendChild(el("h2", { text: "Metrics" }));
    var mcard = el("div", { cls: "card" }); main.appendChild(mcard);
    var run = null;
    var panel = metricPanel(mcard, function () { return run ? [{ label: run.name, rows: run.rows }] : []; }, null);
    main.appendChild(el("h2", { text: "Logs" }));
    var logs = logPanes(main);
    main.appendChild(el("h2", { text: "Checkpoints" }));
    var ck = el("div"); main.appendChild(ck);
    main.appendChild(el("h2", { text: "Config" }));
    var cfg = el("pre", { cls: "card mono" }); main.appendChild(cfg);
    api("/api/dashboard/runs/" + id).then(function (r) {
      run = r;
      head.appendChild(el("div", { cls: "row" }, [el("h1", { text: r.name }), r.error ? badge("FAILED") : null]));
      [["folder", r.path], ["reports", r.rows.length]].forEach(function (kv) { sum.appendChild(el("div", { text: kv[0] })); sum.appendChild(el("div", { cls: "mono", text: String(kv[1]) })); });
      if (r.error) { sum.appendChild(el("div", { text: "error" })); sum.appendChild(el("pre", { cls: "log", text: r.error })); }
      Object.keys(r.logs).sort(function (a, b) { return a - b; }).forEach(function (k) { logs.add(k, r.logs[k]); });
      ck.appendChild(checkpointTable(r.checkpoints, null));
      cfg.textContent = JSON.stringify(r.config, null, 2);
      panel.drawNow();
    }).catch(function (e) { main.appendChild(el("p", { cls: "error", text: e.message })); });
    return {};
  }

  // ------------------------------------------------------------------ models
  function modelsView() {
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

  window.tandemUI = { el: el, api: api, clear: clear, table: table, fmtTime: fmtTime, fmtRes: fmtRes, later: later };  // for team.js

  // ------------------------------------------------------------------ router
  function route() {
    timers.forEach(clearInterval); timers = [];
    charts.forEach(function (c) { try { c.destroy(); } catch (e) { /* gone */ } }); charts = [];
    if (view && view.close) view.close();
    clear(main);
    var h = (location.hash || "#/jobs").slice(2);
    var q = {}, qi = h.indexOf("?");
    if (qi >= 0) { h.slice(qi + 1).split("&").forEach(function (kv) { var p = kv.split("="); q[p[0]] = decodeURIComponent(p[1] || ""); }); h = h.slice(0, qi); }
    var parts = h.split("/");
    var name = parts[0] || (summary.mode === "server" ? "jobs" : "experiments");
    if (summary.mode !== "server" && (name === "jobs" || name === "cluster" || name === "job")) name = "experiments";
    document.querySelectorAll("#nav a").forEach(function (a) {
      a.classList.toggle("active", a.getAttribute("data-view") === name || (name === "job" && a.getAttribute("data-view") === "jobs") ||
        ((name === "experiment" || name === "run") && a.getAttribute("data-view") === "experiments"));
    });
    document.title = "tandem · " + name;
    if (name === "jobs" || name === "cluster") connect(); else disconnect();
    if (name === "jobs") view = jobsView(q);
    else if (name === "job") view = jobView(parts[1]);
    else if (name === "cluster") view = clusterView();
    else if (name === "experiments") view = experimentsView();
    else if (name === "experiment") view = experimentView(parts[1]);
    else if (name === "run") view = runView(parts[1]);
    else if (name === "models") view = modelsView();
    else if (name === "audit" && window.tandemTeam) view = window.tandemTeam.auditView(main, q);
    else { main.appendChild(el("p", { text: "No such page." })); view = null; }
  }

  api("/api/dashboard/summary").then(function (s) {
    summary = s;
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
  window.addEventListener("resize", debounce(route, 300));
})();
