/* tandem dashboard: talking to the server. The login cookie rides on every request
   (same origin); a write carries the CSRF value; a 401 goes back to the login page. */

export function cookie(name) {
  var m = document.cookie.match(new RegExp("(?:^|; )" + name + "=([^;]*)"));
  return m ? decodeURIComponent(m[1]) : "";
}
// Set when the page logs out: the logout answer clears the cookie while this page still
// runs, so a call made after it would only earn a 401 (and a console error).
var leaving = false;
export function leave() { leaving = true; }
export function api(path, opts) {
  if (leaving) return new Promise(function () { /* the page is going to /login */ });
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
