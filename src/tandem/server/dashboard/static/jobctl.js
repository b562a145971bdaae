/* tandem dashboard: a job's states, who may stop it, and stopping it (after asking). */

import { api } from "./api.js";
import { page } from "./state.js";
import { confirmDialog } from "./ui.js";

export var STATES = ["PENDING", "RUNNING", "RESTARTING", "FINISHED", "FAILED", "STOPPED"];
export var ACTIVE = { PENDING: 1, RUNNING: 1, RESTARTING: 1 };
export function mayStop(job) {
  var u = page.summary.user;
  if (!u) return true;
  return u.role === "admin" || (u.role === "member" && (job.owner || "admin") === u.name);
}
export function whyNot(job) {
  var u = page.summary.user || {};
  return u.role === "viewer" ? "viewers only read" : "this job belongs to " + (job.owner || "admin") + "; members stop only their own";
}
export function stopJob(job) {
  var pending = job.state === "PENDING";
  var what = pending ? "Cancel the pending job " : "Stop the running job ";
  return confirmDialog(what + job.name + " (" + job.job_id + ")?" +
    (pending ? " It leaves the queue." : " Its workers are stopped; checkpoints stay."),
    pending ? "Cancel job" : "Stop job").then(function (ok) {
    if (!ok) return null;
    return api("/api/jobs/" + encodeURIComponent(job.job_id) + "/stop?by=dashboard", { method: "POST" });
  });
}
