# The official Python Kubernetes client (PyPI `kubernetes`) against the in-repo test API
# server, driven by tests/python_client.rs over stdin/stdout: LIST (all, paged, by field),
# a WATCH with bookmarks receiving the test's ADDED/MODIFIED/DELETED, and a watch from a
# compacted resourceVersion (410). Prints one RESULT line of JSON.
import json
import sys

from kubernetes import client, config, watch
from kubernetes.client.rest import ApiException


def say(*a):
    print(*a, flush=True)


config.load_kube_config(config_file=sys.argv[1])
v1 = client.CoreV1Api()
out = {}

pods = v1.list_pod_for_all_namespaces()
out["list"] = sorted(p.metadata.name for p in pods.items)
rv = pods.metadata.resource_version

names, pages, cont = [], 0, None
while True:
    kw = {"limit": 2}
    if cont:
        kw["_continue"] = cont
    page = v1.list_namespaced_pod("prod", **kw)
    names += [p.metadata.name for p in page.items]
    pages += 1
    cont = page.metadata._continue
    if not cont:
        break
out["paged"] = sorted(names)
out["pages"] = pages
out["field"] = sorted(
    p.metadata.name
    for p in v1.list_pod_for_all_namespaces(field_selector="spec.nodeName=vm1").items
)
say("LISTED", rv)

w = watch.Watch()
events, bookmark = [], None
for ev in w.stream(v1.list_namespaced_pod, "prod", resource_version=rv,
                   allow_watch_bookmarks=True, timeout_seconds=30):
    if ev["type"] == "BOOKMARK":
        if any(e[0] == "DELETED" for e in events):
            raw = ev["raw_object"]
            bookmark = {
                "kind": raw.get("kind"),
                "apiVersion": raw.get("apiVersion"),
                "rv": raw["metadata"]["resourceVersion"],
                "client_rv": w.resource_version,
            }
            w.stop()
        continue
    o = ev["object"]
    events.append([ev["type"], o.metadata.name, o.metadata.labels])
out["events"] = events
out["bookmark"] = bookmark
say("WATCHED")

sys.stdin.readline()  # the test compacts the server's history here
try:
    for ev in w.stream(v1.list_namespaced_pod, "prod", resource_version=rv, timeout_seconds=5):
        pass
    out["gone"] = "no error"
except ApiException as e:
    out["gone"] = {"status": e.status, "reason": e.reason}
say("RESULT", json.dumps(out))
