"""Another process follows a server job by id: tandem.jobs.get(job_id).results()."""

import os
import sys

import tandem

tandem.init(address=os.environ["TANDEM_ADDRESS"])
job_id, flag = sys.argv[1], sys.argv[2]
h = tandem.jobs.get(job_id)
steps = []
for r in h.results():
    steps.append(r["step"])
    print("REPORT", r["step"], flush=True)
    if r["step"] == 0:
        print("STATUS_WHILE_RUNNING", h.status(), flush=True)
        open(flag, "w").close()  # the job goes on only now: results() streamed step 0 live
result = h.wait(timeout=60)
print("STEPS", steps)
print("FINAL", h.status(), result.metrics["step"], result.metrics["loss"])
