/* tandem dashboard: the page's building blocks — making elements, formatting numbers,
   sizes, durations and times, state badges, sparklines, tables, the confirm dialog. */

export function el(tag, attrs, children) {
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
export function clear(node) { while (node.firstChild) node.removeChild(node.firstChild); return node; }
export function fmtNum(v) {
  if (v === null || v === undefined || v === "") return "";
  if (typeof v !== "number") return String(v);
  if (Number.isInteger(v)) return String(v);
  var a = Math.abs(v);
  if (a !== 0 && (a < 1e-3 || a >= 1e6)) return v.toExponential(3);
  return v.toPrecision(4).replace(/\.?0+$/, "");
}
export function fmtBytes(b) {
  if (b === null || b === undefined) return "";
  var u = ["B", "KiB", "MiB", "GiB", "TiB"], i = 0;
  while (b >= 1024 && i < u.length - 1) { b /= 1024; i++; }
  return (i ? b.toFixed(1) : b) + " " + u[i];
}
export function fmtDur(s) {
  if (s === null || s === undefined) return "";
  if (s < 60) return s.toFixed(s < 10 ? 1 : 0) + " s";
  if (s < 3600) return Math.floor(s / 60) + " m " + Math.floor(s % 60) + " s";
  if (s < 86400) return Math.floor(s / 3600) + " h " + Math.floor((s % 3600) / 60) + " m";
  return Math.floor(s / 86400) + " d " + Math.floor((s % 86400) / 3600) + " h";
}
export function fmtTime(t) {
  if (!t) return "";
  var d = new Date(t * 1000);
  return d.toLocaleString();
}
export function fmtRes(res) {
  if (!res) return "";
  return Object.keys(res).sort().map(function (k) {
    return k + " " + (k === "memory" ? fmtBytes(res[k]) : fmtNum(res[k]));
  }).join(" · ");
}
export function badge(state) { return el("span", { cls: "badge s-" + state, text: state }); }
export function sparkline(values, w, h) {
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
export function debounce(fn, ms) {
  var t = null;
  return function () { if (t) return; t = setTimeout(function () { t = null; fn(); }, ms); };
}
export function confirmDialog(text, yesLabel) {
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
export function table(headers, rows, id) {
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
