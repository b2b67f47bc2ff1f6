#!/usr/bin/env python3
"""The pods a Kubernetes manifest of deploy/kubernetes/ would make, for the `kubernetes` test tier.

No cluster runs here (docs/kubernetes.md, "Tests"): this reads a manifest and does what the Job or
JobSet controller and the kubelet would do for one pod of it, so that tests/kubernetes/ can start
that pod as a podman container in a network namespace of its own:

- Indexed Job: pod i of a Job J is hostname J-i in the Job's subdomain, with the completion-index
  annotation and labels, and JOB_COMPLETION_INDEX appended to every container's env (the Job
  controller). JobSet: Job S-R-r of replicated job R, pod i is S-R-r-i in subdomain S (or
  spec.network.subdomain), with JobSet's annotations (restart attempt 0).
- env: `value` with $(VAR) of variables defined above it, `valueFrom` fieldRef (metadata.name,
  .namespace, .labels['k'], .annotations['k'], status.podIP, spec.nodeName, ...), secretKeyRef and
  configMapKeyRef from the manifest's Secret and ConfigMap documents.
- command/args: $(VAR) expanded from the container's env as the kubelet does ($$ is a literal $,
  an undefined $(VAR) stays as written); command replaces the image's ENTRYPOINT, args its CMD.
- volumes: a Secret or ConfigMap volume is written as the kubelet's atomic writer lays it out (the
  files are symbolic links to ..data/, which links to a timestamped directory), owned by root and
  the pod's fsGroup with the mode the kubelet gives (defaultMode, plus group read with an fsGroup);
  a persistentVolumeClaim is a host directory shared by every pod (`--pvc-root/CLAIM`).

Usage:
  k8s_pods.py summary MANIFEST                     JSON: each pod's name, hostname, DNS names, index
  k8s_pods.py hosts MANIFEST --addresses IP,IP,...  NAME=IP,... for every DNS name of pod i at the
                                                   i-th address (what the headless Service answers)
  k8s_pods.py podman-args MANIFEST INDEX OPTIONS   NUL-separated arguments for `podman run`
    --image IMAGE --netns PATH --address IP --hosts NAME=IP[,NAME=IP...] --pvc-root DIR
    --files-root DIR (Secret/ConfigMap volumes are made under it) --name CONTAINER
    [--override-json FILE: merged into every ConfigMap key ending in .json, as a test's shortened
    config] [--replace-arg OLD --replacement NEW: the container argument OLD (after expansion)
    becomes NEW, for what this machine lacks, e.g. --nproc_per_node=gpu without a GPU]

PyTorchJob (kubeflow.org/v1): pods <job>-master-i and <job>-worker-i with the operator's labels and
environment (pytorchjob_pods), container `pytorch`, each pod's DNS name its own Service's.
"""
import argparse
import base64
import copy
import json
import os
import random
import re
import sys
import uuid

import yaml

NAMESPACE = "default"
CLUSTER_DOMAIN = "cluster.local"
CONTAINER = "dslaunch"  # the container of each example that runs dslaunch
PYTORCHJOB_CONTAINER = "pytorch"  # the name Kubeflow's operator requires in a PyTorchJob
PYTORCHJOB_PORT_NAME = "pytorchjob-port"
PYTORCHJOB_DEFAULT_PORT = 23456  # the operator's default when no container port has the name
_NAME_ALPHABET = "bcdfghjklmnpqrstvwxz2456789"  # Kubernetes' generated-name suffix characters


def fail(message):
    sys.stderr.write("k8s_pods.py: " + message + "\n")
    sys.exit(1)


def load(path):
    with open(path) as f:
        docs = [d for d in yaml.safe_load_all(f) if d]
    by_kind = {}
    for d in docs:
        by_kind.setdefault(d["kind"], []).append(d)
    return by_kind


def named(by_kind, kind, name, where):
    for d in by_kind.get(kind, []):
        if d["metadata"]["name"] == name:
            return d
    fail(f"{where}: {kind} '{name}' is not in the manifest")


def secret_data(secret):
    data = {k: base64.b64decode(v).decode() for k, v in (secret.get("data") or {}).items()}
    data.update(secret.get("stringData") or {})
    return data


# One pod: what the controllers put into its metadata and spec, before the kubelet runs it.
def pods(by_kind):
    out = []
    for job in by_kind.get("Job", []):
        out += job_pods(job["metadata"]["name"], job["spec"], {}, job["spec"]["template"]["spec"].get("subdomain"))
    for js in by_kind.get("JobSet", []):
        name = js["metadata"]["name"]
        network = js["spec"].get("network") or {}
        subdomain = network.get("subdomain", name) if network.get("enableDNSHostnames", True) else None
        for rj in js["spec"]["replicatedJobs"]:
            for r in range(rj.get("replicas", 1)):
                job_name = f"{name}-{rj['name']}-{r}"
                annotations = {
                    "jobset.sigs.k8s.io/jobset-name": name,
                    "jobset.sigs.k8s.io/replicatedjob-name": rj["name"],
                    "jobset.sigs.k8s.io/job-index": str(r),
                    "jobset.sigs.k8s.io/restart-attempt": "0",
                }
                out += job_pods(job_name, rj["template"]["spec"], annotations, subdomain)
    for ptj in by_kind.get("PyTorchJob", []):
        out += pytorchjob_pods(ptj)
    if not out:
        fail("no Job, JobSet or PyTorchJob in the manifest")
    return out


def pytorchjob_port(template):
    for c in template["spec"]["containers"]:
        for p in c.get("ports", []):
            if p.get("name") == PYTORCHJOB_PORT_NAME:
                return p["containerPort"]
    return PYTORCHJOB_DEFAULT_PORT


def pytorchjob_pods(ptj):
    """What Kubeflow's training operator (kubeflow.org/v1) makes: pod <job>-master-i and
    <job>-worker-i, each with a Service of its name (DNS <name>), the replica labels, and the
    environment it sets: MASTER_ADDR/PORT, WORLD_SIZE, RANK and PET_MASTER_ADDR/PORT, PET_NNODES,
    PET_NODE_RANK (Master 0, then the workers) without an elasticPolicy; with one PET_RDZV_ENDPOINT
    (worker-0 at the pytorchjob-port), PET_RDZV_BACKEND, PET_NNODES (min:max), PET_MAX_RESTARTS,
    PET_RDZV_ID, PET_RDZV_CONF, and no node rank."""
    name = ptj["metadata"]["name"]
    spec = ptj["spec"]
    replicas = spec["pytorchReplicaSpecs"]
    elastic = spec.get("elasticPolicy")
    roles = [(r, replicas[r]) for r in ("Master", "Worker") if r in replicas]
    total = sum(rs.get("replicas", 1) for _, rs in roles)
    master_port = pytorchjob_port(roles[0][1]["template"])
    pods_ = []
    for role, rs in roles:
        for i in range(rs.get("replicas", 1)):
            if rs.get("restartPolicy") not in ("Never", "OnFailure", "Always", "ExitCode"):
                fail(f"PyTorchJob {name}: {role} restartPolicy {rs.get('restartPolicy')!r} is not one the operator takes")
            pod = copy.deepcopy(rs["template"])
            pod_name = f"{name}-{role.lower()}-{i}"
            meta = pod.setdefault("metadata", {})
            meta["name"] = pod_name
            meta["namespace"] = NAMESPACE
            meta.setdefault("annotations", {})
            meta.setdefault("labels", {}).update({
                "training.kubeflow.org/job-name": name,
                "training.kubeflow.org/replica-type": role.lower(),
                "training.kubeflow.org/replica-index": str(i),
            })
            pod["spec"]["hostname"] = pod_name
            index = len(pods_)
            if elastic:
                env = [
                    ("PET_RDZV_ENDPOINT", f"{name}-worker-0:{pytorchjob_port(replicas['Worker']['template'])}"),
                    ("PET_RDZV_BACKEND", elastic.get("rdzvBackend", "c10d")),
                    ("PET_NNODES", f"{elastic['minReplicas']}:{elastic['maxReplicas']}"),
                ]
                if "maxRestarts" in elastic:
                    env.append(("PET_MAX_RESTARTS", str(elastic["maxRestarts"])))
                if "rdzvId" in elastic:
                    env.append(("PET_RDZV_ID", elastic["rdzvId"]))
                if elastic.get("rdzvConf"):
                    env.append(("PET_RDZV_CONF", ",".join(f"{c['key']}={c['value']}" for c in elastic["rdzvConf"])))
            else:
                master = f"{name}-master-0"
                env = [("MASTER_ADDR", master), ("MASTER_PORT", str(master_port)), ("WORLD_SIZE", str(total)),
                       ("RANK", str(index)), ("PET_MASTER_ADDR", master), ("PET_MASTER_PORT", str(master_port)),
                       ("PET_NNODES", str(total)), ("PET_NODE_RANK", str(index))]
            for c in pod["spec"]["containers"]:
                c.setdefault("env", []).extend({"name": k, "value": v} for k, v in env)
            pod["index"] = index
            pod["container"] = PYTORCHJOB_CONTAINER
            pods_.append(pod)
    return pods_


def job_pods(job_name, spec, extra_annotations, subdomain):
    if spec.get("completionMode") != "Indexed":
        fail(f"Job {job_name}: completionMode is not Indexed; the test needs a pod per index")
    count = spec.get("parallelism", spec.get("completions", 1))
    pods_ = []
    for i in range(count):
        pod = copy.deepcopy(spec["template"])
        meta = pod.setdefault("metadata", {})
        # The Job controller names a pod <job>-<index>-<5 random characters>: every replacement
        # of an index has a name of its own (its hostname stays <job>-<index>).
        meta["name"] = f"{job_name}-{i}-" + "".join(random.choice(_NAME_ALPHABET) for _ in range(5))
        meta["namespace"] = NAMESPACE
        meta.setdefault("annotations", {}).update(extra_annotations)
        meta["annotations"]["batch.kubernetes.io/job-completion-index"] = str(i)
        meta.setdefault("labels", {}).update({
            "job-name": job_name,
            "batch.kubernetes.io/job-name": job_name,
            "batch.kubernetes.io/job-completion-index": str(i),
        })
        pod["spec"]["hostname"] = f"{job_name}-{i}"
        if subdomain:
            pod["spec"]["subdomain"] = subdomain
        for c in pod["spec"]["containers"]:
            c.setdefault("env", []).append({
                "name": "JOB_COMPLETION_INDEX",
                "valueFrom": {"fieldRef": {"fieldPath": "metadata.annotations['batch.kubernetes.io/job-completion-index']"}},
            })
        pod["index"] = i
        pods_.append(pod)
    return pods_


def dns_names(pod):
    """The names a pod's own /etc/hosts and the cluster's DNS give it: hostname.subdomain[.ns.svc.domain]."""
    host = pod["spec"]["hostname"]
    sub = pod["spec"].get("subdomain")
    if pod.get("container") == PYTORCHJOB_CONTAINER:  # the operator's Service of the pod's own name
        return [f"{host}.{NAMESPACE}.svc.{CLUSTER_DOMAIN}", f"{host}.{NAMESPACE}.svc", host]
    if not sub:
        return [host]
    return [f"{host}.{sub}.{NAMESPACE}.svc.{CLUSTER_DOMAIN}", f"{host}.{sub}", host]


_REF = re.compile(r"\$\$|\$\(([A-Za-z_][A-Za-z0-9_.-]*)\)")


def expand(text, env):
    """The kubelet's $(VAR) expansion: $$ is $, a defined $(VAR) its value, anything else as written."""
    def one(m):
        if m.group(0) == "$$":
            return "$"
        return env.get(m.group(1), m.group(0))
    return _REF.sub(one, text)


_FIELD = re.compile(r"^metadata\.(labels|annotations)\['([^']+)'\]$")


def field(pod, path, address):
    m = _FIELD.match(path)
    if m:
        value = pod["metadata"].get(m.group(1), {}).get(m.group(2))
        if value is None:
            fail(f"pod {pod['metadata']['name']}: fieldRef {path} names nothing")
        return value
    simple = {
        "metadata.name": pod["metadata"]["name"],
        "metadata.namespace": NAMESPACE,
        "metadata.uid": pod["metadata"].setdefault("uid", str(uuid.UUID(int=random.getrandbits(128), version=4))),
        "spec.nodeName": pod["spec"]["hostname"] + "-node",
        "spec.serviceAccountName": pod["spec"].get("serviceAccountName", "default"),
        "status.podIP": address,
        "status.hostIP": address,
    }
    if path not in simple:
        fail(f"pod {pod['metadata']['name']}: fieldRef {path} is not emulated by this test")
    return simple[path]


def container_env(by_kind, pod, container, address):
    env = {}
    order = []
    for e in container.get("env", []):
        name = e["name"]
        if "value" in e:
            value = expand(str(e["value"]), env)
        else:
            src = e["valueFrom"]
            if "fieldRef" in src:
                value = field(pod, src["fieldRef"]["fieldPath"], address)
            elif "secretKeyRef" in src:
                ref = src["secretKeyRef"]
                value = secret_data(named(by_kind, "Secret", ref["name"], name))[ref["key"]]
            elif "configMapKeyRef" in src:
                ref = src["configMapKeyRef"]
                value = named(by_kind, "ConfigMap", ref["name"], name)["data"][ref["key"]]
            else:
                fail(f"env {name}: valueFrom {list(src)} is not emulated by this test")
        if name not in env:
            order.append(name)
        env[name] = value
    return [(k, env[k]) for k in order]


def merge(base, override):
    for k, v in override.items():
        if isinstance(v, dict) and isinstance(base.get(k), dict):
            merge(base[k], v)
        else:
            base[k] = v
    return base


def write_atomic_volume(root, files, mode, gid):
    """The kubelet's atomic-writer layout: root/KEY -> ..data/KEY, ..data -> ..TIMESTAMP/."""
    os.makedirs(root, exist_ok=True)
    stamp = "..2026_01_01_00_00_00.000000001"
    os.makedirs(os.path.join(root, stamp))
    for key, content in files.items():
        path = os.path.join(root, stamp, key)
        with open(path, "w") as f:
            f.write(content)
        os.chown(path, 0, gid if gid is not None else 0)
        os.chmod(path, mode)
        os.symlink(os.path.join("..data", key), os.path.join(root, key))
    os.symlink(stamp, os.path.join(root, "..data"))
    os.chmod(root, 0o755)


def volume_args(by_kind, pod, container, opts):
    spec = pod["spec"]
    security = spec.get("securityContext") or {}
    fs_group = security.get("fsGroup")
    volumes = {v["name"]: v for v in spec.get("volumes", [])}
    args = []
    for mount in container.get("volumeMounts", []):
        v = volumes.get(mount["name"])
        if v is None:
            fail(f"volumeMount {mount['name']}: no such volume in the pod")
        ro = ":ro" if mount.get("readOnly") else ""
        if "persistentVolumeClaim" in v:
            claim = v["persistentVolumeClaim"]["claimName"]
            named(by_kind, "PersistentVolumeClaim", claim, mount["name"])
            host = os.path.join(opts.pvc_root, claim)
            os.makedirs(host, exist_ok=True)
            if fs_group is not None:  # the kubelet gives the volume to the fsGroup (setgid, group rw)
                os.chown(host, 0, fs_group)
                os.chmod(host, 0o2775)
            args += ["-v", f"{host}:{mount['mountPath']}{ro}"]
        elif "secret" in v or "configMap" in v:
            kind = "secret" if "secret" in v else "configMap"
            src = v[kind]
            if kind == "secret":
                files = secret_data(named(by_kind, "Secret", src["secretName"], mount["name"]))
            else:
                files = dict(named(by_kind, "ConfigMap", src["name"], mount["name"]).get("data") or {})
                if opts.override_json:
                    with open(opts.override_json) as f:
                        override = json.load(f)
                    for key in files:
                        if key.endswith(".json"):
                            files[key] = json.dumps(merge(json.loads(files[key]), override), indent=2) + "\n"
            mode = src.get("defaultMode", 0o644)
            if fs_group is not None:
                mode |= 0o440  # the kubelet's read-only volume ownership: group read for the fsGroup
            host = os.path.join(opts.files_root, pod["metadata"]["name"], mount["name"])
            write_atomic_volume(host, files, mode, fs_group)
            args += ["-v", f"{host}:{mount['mountPath']}:ro"]
        elif "emptyDir" in v:
            host = os.path.join(opts.files_root, pod["metadata"]["name"], mount["name"])
            os.makedirs(host, exist_ok=True)
            os.chmod(host, 0o777)
            args += ["-v", f"{host}:{mount['mountPath']}{ro}"]
        else:
            fail(f"volume {mount['name']}: kind {list(v)} is not emulated by this test")
    return args


def the_container(pod):
    wanted = pod.get("container", CONTAINER)
    for c in pod["spec"]["containers"]:
        if c["name"] == wanted:
            return c
    fail(f"pod {pod['metadata']['name']}: no container named {wanted}")


def podman_args(by_kind, pod, opts):
    c = the_container(pod)
    env = container_env(by_kind, pod, c, opts.address)
    values = dict(env)
    command = [expand(x, values) for x in c.get("command", [])]
    args = [expand(str(x), values) for x in c.get("args", [])]
    if opts.replace_arg:
        if opts.replace_arg not in args or opts.replacement is None:
            fail(f"--replace-arg {opts.replace_arg!r}: not one of the container's arguments, or no --replacement")
        args = [opts.replacement if a == opts.replace_arg else a for a in args]
    spec = pod["spec"]
    security = spec.get("securityContext") or {}
    out = ["--name", opts.name, "--network", f"ns:{opts.netns}", "--hostname", spec["hostname"]]
    for name in dns_names(pod):
        out += ["--add-host", f"{name}:{opts.address}"]
    for pair in filter(None, (opts.hosts or "").split(",")):
        name, ip = pair.split("=", 1)
        out += ["--add-host", f"{name}:{ip}"]
    if "runAsUser" in security:
        out += ["--user", f"{security['runAsUser']}:{security.get('runAsGroup', security['runAsUser'])}"]
    if "fsGroup" in security:
        out += ["--group-add", str(security["fsGroup"])]
    for k, v in env:
        out += ["--env", f"{k}={v}"]
    if c.get("workingDir"):
        out += ["--workdir", c["workingDir"]]
    out += volume_args(by_kind, pod, c, opts)
    if command:
        out += ["--entrypoint", json.dumps(command)]
    out += [opts.image] + args
    return out


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("what", choices=["summary", "hosts", "podman-args"])
    ap.add_argument("manifest")
    ap.add_argument("index", nargs="?", type=int)
    for o in ["image", "netns", "address", "addresses", "hosts", "pvc-root", "files-root", "name", "override-json", "replace-arg", "replacement"]:
        ap.add_argument("--" + o)
    opts = ap.parse_args()
    by_kind = load(opts.manifest)
    all_pods = pods(by_kind)
    if opts.what == "summary":
        out = []
        for p in all_pods:
            c = the_container(p)
            out.append({
                "index": p["index"], "name": p["metadata"]["name"], "hostname": p["spec"]["hostname"],
                "dns_names": dns_names(p),
                "termination_grace_period": p["spec"].get("terminationGracePeriodSeconds", 30),
                "args": c.get("args", []),
            })
        json.dump(out, sys.stdout, indent=1)
        print()
        return
    if opts.what == "hosts":
        addresses = (opts.addresses or "").split(",")
        print(",".join(f"{n}={addresses[p['index']]}" for p in all_pods if p["index"] < len(addresses)
                       for n in dns_names(p)))
        return
    if opts.index is None or not 0 <= opts.index < len(all_pods):
        fail(f"podman-args: index {opts.index} is not one of the manifest's {len(all_pods)} pods")
    for name in ["image", "netns", "address", "pvc_root", "files_root", "name"]:
        if getattr(opts, name) is None:
            fail(f"podman-args needs --{name.replace('_', '-')}")
    sys.stdout.write("\0".join(podman_args(by_kind, all_pods[opts.index], opts)) + "\0")


if __name__ == "__main__":
    main()
