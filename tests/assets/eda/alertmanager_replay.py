"""Test double of the ansible.eda.alertmanager event source (ansible.eda is not installable
here: it comes from Galaxy). It reads an Alertmanager webhook payload (the real
``webhook_configs`` body: ``{"version": "4", "status": ..., "alerts": [{"status",
"labels", "annotations", "startsAt", ...}]}``) from the file ``args["payload"]`` and puts
on the queue what the real source puts for each alert with ``data_alerts_path: alerts``,
``data_host_path: labels.host`` and ``skip_original_data: true``:
``{"alert": alert, "meta": {"endpoint": ..., "headers": {}, "hosts": [host]}}`` (the host
with any ``:port`` removed, as ``clean_host`` does); then it asks the engine to shut down.
Every event it put is appended, one JSON line each, to ``args["log"]``."""

import asyncio
import json


async def main(queue, args):
    with open(args["payload"]) as handle:
        payload = json.load(handle)
    for alert in payload.get("alerts") or []:
        host = (alert.get("labels") or {}).get("host")
        hosts = [host.split(":")[0]] if host else []
        event = {"alert": alert,
                 "meta": {"endpoint": args.get("endpoint", "endpoint"), "headers": {},
                          "hosts": hosts}}
        with open(args["log"], "a") as log:
            log.write(json.dumps(event) + "\n")
        await queue.put(event)
    await asyncio.sleep(float(args.get("settle", 0.5)))
    await queue.put({"shutdown": True})
