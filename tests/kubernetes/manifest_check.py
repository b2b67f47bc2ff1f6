#!/usr/bin/env python3
"""Checks every manifest of deploy/kubernetes/ as YAML and against what its controller requires
(docs/kubernetes.md, "Tests"). No cluster: the field names and values the examples promise.

  manifest_check.py DIR    exit 0 and one line per file, or exit 1 naming file, document and field
"""
import glob
import os
import sys

import yaml

errors = []


def need(cond, where, what):
    if not cond:
        errors.append(f"{where}: {what}")


def pod_templates(doc):
    kind = doc["kind"]
    if kind == "Job":
        yield doc["spec"]["template"], "dslaunch"
    elif kind == "JobSet":
        for rj in doc["spec"]["replicatedJobs"]:
            yield rj["template"]["spec"]["template"], "dslaunch"
    elif kind == "PyTorchJob":
        for rs in doc["spec"]["pytorchReplicaSpecs"].values():
            yield rs["template"], "pytorch"


def check_workload(doc, where):
    kind, spec = doc["kind"], doc["spec"]
    labels = doc["metadata"].get("labels") or {}
    need(labels.get("kueue.x-k8s.io/queue-name"), where, "no kueue.x-k8s.io/queue-name label")
    if kind == "Job":
        need(spec.get("ttlSecondsAfterFinished", 0) > 0, where, "no spec.ttlSecondsAfterFinished")
        need(spec.get("activeDeadlineSeconds", 0) > 0, where, "no spec.activeDeadlineSeconds")
    elif kind == "JobSet":
        need(spec.get("ttlSecondsAfterFinished", 0) > 0, where, "no spec.ttlSecondsAfterFinished")
        for rj in spec["replicatedJobs"]:
            need(rj["template"]["spec"].get("activeDeadlineSeconds", 0) > 0, where,
                 f"replicatedJobs[{rj['name']}]: no activeDeadlineSeconds")
    elif kind == "PyTorchJob":
        need(doc["apiVersion"] == "kubeflow.org/v1", where, "apiVersion is not kubeflow.org/v1")
        run = spec.get("runPolicy") or {}
        need(run.get("ttlSecondsAfterFinished", 0) > 0, where, "no runPolicy.ttlSecondsAfterFinished")
        need(run.get("activeDeadlineSeconds", 0) > 0, where, "no runPolicy.activeDeadlineSeconds")
        for role, rs in spec["pytorchReplicaSpecs"].items():
            need(role in ("Master", "Worker"), where, f"pytorchReplicaSpecs.{role}: not Master or Worker")
            need(rs.get("restartPolicy") == "ExitCode", where, f"{role}: restartPolicy is not ExitCode")
        elastic = spec.get("elasticPolicy")
        if elastic:
            need("Master" not in spec["pytorchReplicaSpecs"], where, "elastic: worker-0 hosts the rendezvous, no Master")
            need(1 <= elastic["minReplicas"] <= elastic["maxReplicas"], where, "elasticPolicy: min > max")
    for template, container_name in pod_templates(doc):
        pod = template["spec"]
        containers = {c["name"]: c for c in pod["containers"]}
        need(container_name in containers, where, f"no container named {container_name}")
        c = containers.get(container_name, {})
        env = {e["name"]: e.get("value") for e in c.get("env", [])}
        ports = {p.get("name"): p["containerPort"] for p in c.get("ports", [])}
        if kind == "PyTorchJob":
            need("pytorchjob-port" in ports, where, "no container port named pytorchjob-port")
            need(env.get("PET_EXIT_CODES") == "kubeflow", where,
                 "PET_EXIT_CODES is not kubeflow: 75 and 76 would fail the job under restartPolicy ExitCode")
            need(ports.get("pytorchjob-port") != 29400 or doc["spec"].get("elasticPolicy"), where,
                 "pytorchjob-port is dslaunch's endpoint port 29400 (it is PET_MASTER_PORT, the workers' MASTER_PORT)")
        args = c.get("args", [])
        if "--status_port=8080" in args:
            need("--status_bind=0.0.0.0" in args, where, "status page bound to loopback: no scraper reaches it")
            need(ports.get("metrics") == 8080, where, "no container port 'metrics' 8080 for the PodMonitor")
        limits = (c.get("resources") or {}).get("limits") or {}
        if "nvidia.com/gpu" in limits:
            mounts = {m["mountPath"]: m["name"] for m in c.get("volumeMounts", [])}
            vols = {v["name"]: v for v in pod.get("volumes", [])}
            shm = vols.get(mounts.get("/dev/shm"), {}).get("emptyDir") or {}
            need(shm.get("medium") == "Memory", where, "GPU pod without a memory-backed /dev/shm")
            need(any(t.get("key") == "nvidia.com/gpu" for t in pod.get("tolerations", [])), where,
                 "GPU pod without a toleration for nvidia.com/gpu")


def check_podmonitor(doc, docs, where):
    need(doc["apiVersion"] == "monitoring.coreos.com/v1", where, "apiVersion is not monitoring.coreos.com/v1")
    ports = [e.get("port") for e in doc["spec"]["podMetricsEndpoints"]]
    need(ports and all(p == "metrics" for p in ports), where, "podMetricsEndpoints do not name port 'metrics'")
    need(all(e.get("path") == "/metrics" for e in doc["spec"]["podMetricsEndpoints"]), where, "path is not /metrics")
    need(doc["spec"]["selector"].get("matchLabels"), where, "no selector.matchLabels")


def main():
    files = sorted(glob.glob(os.path.join(sys.argv[1], "*.yaml")))
    need(files, sys.argv[1], "no manifests")
    for f in files:
        try:
            docs = [d for d in yaml.safe_load_all(open(f)) if d]
        except yaml.YAMLError as e:
            errors.append(f"{f}: not YAML: {e}")
            continue
        for i, d in enumerate(docs):
            where = f"{os.path.basename(f)}: document {i + 1} ({d.get('kind')} {d.get('metadata', {}).get('name')})"
            for key in ("apiVersion", "kind", "metadata"):
                need(key in d, where, f"no {key}")
            if d.get("kind") in ("Job", "JobSet", "PyTorchJob"):
                check_workload(d, where)
            elif d.get("kind") == "PodMonitor":
                check_podmonitor(d, docs, where)
        print(f"{os.path.basename(f)}: {', '.join(d['kind'] for d in docs)}")
    if errors:
        print("\n".join(errors), file=sys.stderr)
        sys.exit(1)


if __name__ == "__main__":
    main()
