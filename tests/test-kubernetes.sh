#!/usr/bin/env bash
# SPDX-License-Identifier: MIT
# deploy/kubernetes, as far as a machine without a cluster can take it.
#
# The manifests: every object of both kustomizations (base/, configmap/) and every training
# pod of examples/ is read into the official models of the Kubernetes API (Debian's
# python3-kubernetes) and written back, so that an unknown field, a wrong type or a missing
# required field fails as the API server would refuse it; then what matters to npuprof is
# checked: the node's /dev/shm, the output root and libkineto's socket directory shared at
# the same paths by the DaemonSet and the pods, every path the daemon writes on a writable
# volume, read-only roots, no privilege escalation, all capabilities dropped but the
# opener's and the init container's, the daemon not root, resources, the image build-image
# makes. `kubectl kustomize` builds both, offline, where a kubectl is installed. The checks
# fail on the manifests broken on purpose, ten ways. A ConfigMap projected as the kubelet
# does and updated by its symbolic-link swap is seen by the real npuprofd within its poll.
#
# The image and the pods, where root may run podman and mmdebstrap may reach the mirror:
# make deb, deploy/kubernetes/build-image (its Debian base cached in build/kubernetes), then
# the DaemonSet's pod run by podman as the kubelet would run it (each hostPath a directory
# of a stand-in node under the test's directory, emptyDir and configMap volumes made as the
# kubelet makes them, the securityContext as podman options): the init container, the
# opener, the daemon; a rank of examples/native-pod.yaml (npuprof.Monitor) and, where
# tests/kineto/build.sh builds it, a libkineto job of examples/pytorch-pod.yaml; an edit of
# the shared file opens a window that each writes into the node's output root, listed by
# `npuprofctl status` in the daemon's container; a MindSpore job's 0600 object of another
# user is opened through the opener container.
#   tests/test-kubernetes.sh BUILD_DIR
# Ends with "kubernetes: N passed, N failed". Exit 77 (skipped), saying why, where the
# image cannot be built or run here, once the manifests' checks passed.
set -u
build=${1:?usage: tests/test-kubernetes.sh BUILD_DIR}
here=$(cd "$(dirname "$0")/.." && pwd)
. "$here/tests/lib.sh"
npf_plain_only test-kubernetes "$build" "builds its image from the plain build's packages only"
python=/usr/bin/python3
[ -x "$python" ] || python=python3
if ! "$python" -c 'import yaml, kubernetes' 2>/dev/null; then
        echo "test-kubernetes: $python cannot import yaml and kubernetes (Debian's python3-yaml, python3-kubernetes): not run"
        exit 77
fi
npf_harness k8s
kdir=$here/deploy/kubernetes
version=$(sed -n '1s/^[^(]*(\([^)]*\)).*/\1/p' "$here/debian/changelog")
image=localhost/npuprof:$version
t0=$SECONDS

# The manifests' reader and the kubelet's stand-in.
py=$tmp/k8s.py
cat >"$py" <<'PY'
"""The manifests of deploy/kubernetes, read as Kubernetes reads them, without a cluster.

    k8s.py validate KUST_DIR IMAGE              a kustomization (kustomize's resources, bases,
                                                configMapGenerator, namespace and strategic
                                                merge patches, done here), checked
    k8s.py validate-stream FILE IMAGE           what `kubectl kustomize` printed, checked the same
    k8s.py validate-example POD_FILE USE KUST_DIR   a training pod beside the DaemonSet of
                                                KUST_DIR: USE is kineto, legacy or native
    k8s.py mutations TOP WORK IMAGE NAME...     copies of deploy/kubernetes (TOP) in WORK, each
                                                broken on purpose one way, checked: NAME, a tab
                                                and the first problem found, or nothing
    k8s.py podman KUST_DIR|POD_FILE KIND/NAME CONTAINER HOST POD_DIR IMAGE NODE [COMMAND]
                                                podman run's options, NUL-separated, for that
                                                container as the kubelet would run it, with
                                                hostPath P at HOST/P, emptyDir and configMap
                                                volumes in POD_DIR (made here, as the kubelet
                                                makes them); the image and its arguments last
                                                (COMMAND, JSON, instead of the container's)
    k8s.py probe KUST_DIR KIND/NAME CONTAINER   the container's livenessProbe command, NUL-separated
    k8s.py configmap KUST_DIR NAME DIR [KEY=FILE]   the ConfigMap NAME as the kubelet projects
                                                it into DIR (..data links); with KEY=FILE, an
                                                update of it as the kubelet's atomic writer does

Every object is first read into the official models of the Kubernetes Python client (Debian's
python3-kubernetes) and written back: a field they do not know (a typo), a value of the wrong
type or a missing required field is an error, as the API server's validation would make it.
Prints each problem on a line of its own; exit 1 when there is one.
"""

import copy
import json
import os
import re
import shutil
import sys
import time

import yaml
from kubernetes import client

MODELS = {("v1", "Pod"): "V1Pod", ("apps/v1", "DaemonSet"): "V1DaemonSet",
          ("v1", "ConfigMap"): "V1ConfigMap", ("v1", "Namespace"): "V1Namespace"}
UID = 64042
# Capabilities each container of the DaemonSet may add, and nothing else (README.md).
CAPS = {"npuprofd": set(), "shmopen": {"DAC_OVERRIDE"}, "prepare": {"CHOWN", "FOWNER", "DAC_OVERRIDE"}}


def load(path):
    with open(path) as f:
        return [d for d in yaml.safe_load_all(f) if d is not None]


# --- kustomize, as much of it as the kustomizations here use ---------------------------------

def merge(base, patch, key=None):
    """A strategic merge patch: maps merged, null deletes, lists of maps merged by name."""
    if isinstance(base, dict) and isinstance(patch, dict):
        out = dict(base)
        for k, v in patch.items():
            if v is None:
                out.pop(k, None)
            elif k in out:
                out[k] = merge(out[k], v, k)
            else:
                out[k] = v
        return out
    if isinstance(base, list) and isinstance(patch, list) and all(isinstance(x, dict) for x in base + patch):
        mk = "mountPath" if key == "volumeMounts" else "name"
        if all(mk in x for x in base + patch):
            out = list(base)
            for p in patch:
                i = next((i for i, x in enumerate(out) if x[mk] == p[mk]), None)
                if i is None:
                    out.append(p)
                else:
                    out[i] = merge(out[i], p)
            return out
    return patch


def kustomize(d):
    with open(os.path.join(d, "kustomization.yaml")) as f:
        k = yaml.safe_load(f)
    objs = []
    for r in k.get("bases", []) + k.get("resources", []):
        p = os.path.join(d, r)
        objs += kustomize(p) if os.path.isdir(p) else load(p)
    for g in k.get("configMapGenerator", []):
        data = {}
        for f in g.get("files", []):
            with open(os.path.join(d, f)) as fh:
                data[os.path.basename(f)] = fh.read()
        objs.append({"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": g["name"]}, "data": data})
    if k.get("namespace"):
        for o in objs:
            if o.get("kind") != "Namespace":
                o.setdefault("metadata", {})["namespace"] = k["namespace"]
    for p in k.get("patchesStrategicMerge", []):
        for patch in load(os.path.join(d, p)):
            i = next(i for i, o in enumerate(objs) if o["kind"] == patch["kind"]
                     and o["metadata"]["name"] == patch["metadata"]["name"])
            objs[i] = merge(objs[i], patch)
    return objs


# --- the models ----------------------------------------------------------------------------

def same(a, b):
    if a == b:
        return True
    # A quantity or an int-or-string written as a number comes back as a string.
    return not isinstance(a, bool) and isinstance(a, (int, float)) and isinstance(b, str) and str(a) == b


def diff(orig, back, where, out):
    if isinstance(orig, dict):
        if not isinstance(back, dict):
            out.append("%s: not an object" % where)
            return
        for k, v in orig.items():
            if k not in back:
                if v not in (None, [], {}):
                    out.append("%s.%s: unknown field" % (where, k))
            else:
                diff(v, back[k], "%s.%s" % (where, k), out)
    elif isinstance(orig, list):
        if not isinstance(back, list) or len(orig) != len(back):
            out.append("%s: not a list" % where)
            return
        for i, (a, b) in enumerate(zip(orig, back)):
            diff(a, b, "%s[%d]" % (where, i), out)
    elif not same(orig, back):
        out.append("%s: %r is not a valid value here (read as %r)" % (where, orig, back))


def check_model(o, out):
    name = "%s/%s" % (o.get("kind"), (o.get("metadata") or {}).get("name"))
    model = MODELS.get((o.get("apiVersion"), o.get("kind")))
    if not model:
        out.append("%s: unknown apiVersion %s kind %s" % (name, o.get("apiVersion"), o.get("kind")))
        return
    api = client.ApiClient()
    try:
        # The client's own reader of the API server's answers (private, but the one it uses).
        back = api.sanitize_for_serialization(api._ApiClient__deserialize(copy.deepcopy(o), model))
    except (ValueError, TypeError, AttributeError) as e:
        out.append("%s: %s" % (name, e))
        return
    diff(o, back, name, out)


# --- what the DaemonSet must hold ------------------------------------------------------------

def arg(c, name):
    for a in c.get("args", []):
        if a.startswith(name + "="):
            return a.split("=", 1)[1]
    return None


def env(c, name):
    return next((e.get("value") for e in c.get("env", []) if e["name"] == name), None)


def under(path, mount):
    return path == mount or path.startswith(mount.rstrip("/") + "/")


def mount_of(c, path):
    """The volumeMount of @c holding @path (the deepest)."""
    ms = [m for m in c.get("volumeMounts", []) if under(path, m["mountPath"])]
    return max(ms, key=lambda m: len(m["mountPath"])) if ms else None


def host_path(spec, c, path):
    """@path of container @c on the node, when a hostPath volume holds it; else None."""
    m = mount_of(c, path)
    v = m and next((v for v in spec.get("volumes", []) if v["name"] == m["name"]), None)
    if not v or "hostPath" not in v:
        return None
    return v["hostPath"]["path"].rstrip("/") + path[len(m["mountPath"].rstrip("/")):]


def containers(spec):
    return spec.get("initContainers", []) + spec.get("containers", [])


def check_mounts(name, spec, out):
    vols = [v["name"] for v in spec.get("volumes", [])]
    if len(set(vols)) != len(vols):
        out.append("%s: two volumes of one name" % name)
    used = set()
    for c in containers(spec):
        paths = [m["mountPath"] for m in c.get("volumeMounts", [])]
        if len(set(paths)) != len(paths):
            out.append("%s: container %s mounts two volumes at one path" % (name, c["name"]))
        for m in c.get("volumeMounts", []):
            used.add(m["name"])
            if m["name"] not in vols:
                out.append("%s: container %s mounts %s, which is no volume" % (name, c["name"], m["name"]))
    for v in sorted(set(vols) - used):
        out.append("%s: volume %s is mounted nowhere" % (name, v))


def check_daemonset(objs, image, out):
    ds = [o for o in objs if o.get("kind") == "DaemonSet" and o["metadata"]["name"] == "npuprofd"]
    if len(ds) != 1:
        out.append("no DaemonSet npuprofd")
        return
    ds = ds[0]
    spec = ds["spec"]["template"]["spec"]
    ns = ds["metadata"].get("namespace")
    nso = [o for o in objs if o.get("kind") == "Namespace" and o["metadata"]["name"] == ns]
    if not nso or (nso[0]["metadata"].get("labels") or {}).get("pod-security.kubernetes.io/enforce") != "privileged":
        out.append("the namespace %s is not there with pod-security enforce=privileged (hostPath volumes)" % ns)
    check_mounts("DaemonSet", spec, out)
    for k in ("hostPID", "hostIPC", "hostNetwork"):
        if spec.get(k):
            out.append("DaemonSet: %s is set" % k)
    if spec.get("automountServiceAccountToken") is not False:
        out.append("DaemonSet: the service account token is mounted (the daemon never talks to the API)")
    if ((spec.get("securityContext") or {}).get("seccompProfile") or {}).get("type") != "RuntimeDefault":
        out.append("DaemonSet: no seccompProfile RuntimeDefault")
    names = [c["name"] for c in containers(spec)]
    if sorted(names) != sorted(CAPS):
        out.append("DaemonSet: containers %s, not %s" % (names, sorted(CAPS)))
    for c in containers(spec):
        sc = c.get("securityContext") or {}
        caps = sc.get("capabilities") or {}
        who = "container %s" % c["name"]
        if sc.get("readOnlyRootFilesystem") is not True:
            out.append("%s: the root file system is not read-only" % who)
        if sc.get("allowPrivilegeEscalation") is not False:
            out.append("%s: privilege escalation is allowed" % who)
        if sc.get("privileged"):
            out.append("%s: privileged" % who)
        if caps.get("drop") != ["ALL"]:
            out.append("%s: does not drop ALL capabilities" % who)
        extra = set(caps.get("add") or []) - CAPS.get(c["name"], set())
        if extra:
            out.append("%s: adds capabilities %s" % (who, sorted(extra)))
        res = c.get("resources") or {}
        if not {"cpu", "memory"} <= set(res.get("requests") or {}) or "memory" not in (res.get("limits") or {}):
            out.append("%s: no cpu and memory requests and memory limit" % who)
        if c.get("image") != image:
            out.append("%s: image %s, not %s (build-image's)" % (who, c.get("image"), image))
    d = next((c for c in spec.get("containers", []) if c["name"] == "npuprofd"), None)
    if not d:
        return
    sc = d.get("securityContext") or {}
    if sc.get("runAsNonRoot") is not True or sc.get("runAsUser") != UID or sc.get("runAsGroup") != UID:
        out.append("npuprofd: not run as non-root user %d:%d (the image's npuprof)" % (UID, UID))
    # The paths the daemon writes, and those it shares with the ranks' pods at the same path.
    shm = mount_of(d, "/dev/shm")
    if not shm or shm["mountPath"] != "/dev/shm" or host_path(spec, d, "/dev/shm") != "/dev/shm":
        out.append("npuprofd: the node's /dev/shm is not mounted at /dev/shm")
    paths = {"--output-root": arg(d, "--output-root"), "--kineto-socket-dir": arg(d, "--kineto-socket-dir"),
             "--metrics-file": os.path.dirname(arg(d, "--metrics-file") or ""), "--fleet-dir": arg(d, "--fleet-dir"),
             "--shm-opener": os.path.dirname(arg(d, "--shm-opener") or ""),
             "--socket": os.path.dirname(arg(d, "--socket") or "/run/npuprof/npuprofd.sock"),
             "STATE_DIRECTORY": env(d, "STATE_DIRECTORY")}
    for what, p in paths.items():
        m = p and mount_of(d, p)
        if not m or m.get("readOnly"):
            out.append("npuprofd: %s %s is on no writable volume" % (what, p))
    for what in ("--output-root", "--kineto-socket-dir"):
        p = paths[what]
        if p and host_path(spec, d, p) != p:
            out.append("npuprofd: %s %s is not the node's %s (pods reach it there)" % (what, p, p))
    conf = arg(d, "--config")
    m = conf and mount_of(d, conf)
    v = m and next(v for v in spec["volumes"] if v["name"] == m["name"])
    if not v or m["mountPath"] != os.path.dirname(conf):
        out.append("npuprofd: --config %s is not in a volume mounted at its directory" % conf)
    elif "configMap" in v:
        if m.get("subPath"):
            out.append("npuprofd: the ConfigMap is mounted by subPath: updates never reach it")
        cm = [o for o in objs if o.get("kind") == "ConfigMap" and o["metadata"]["name"] == v["configMap"]["name"]]
        if not cm or os.path.basename(conf) not in cm[0].get("data", {}):
            out.append("npuprofd: no ConfigMap %s with %s" % (v["configMap"]["name"], os.path.basename(conf)))
    elif "hostPath" not in v:
        out.append("npuprofd: --config comes from neither the node (shared file system) nor a ConfigMap")
    # The opener's socket: one volume, the daemon's and the opener's, and the path it listens on.
    o = next((c for c in spec["containers"] if c["name"] == "shmopen"), None)
    sock = arg(d, "--shm-opener")
    if o and sock:
        mo, md = mount_of(o, sock), mount_of(d, sock)
        if not mo or not md or mo["name"] != md["name"] or "--listen=\"$s\"" not in " ".join(o.get("command", [])) \
                or ("s=%s" % sock) not in " ".join(o.get("command", [])):
            out.append("shmopen: does not listen on npuprofd's --shm-opener %s in a volume they share" % sock)
    # The init container makes what the daemon writes into, with the tmpfiles.d lines of its ConfigMap.
    p = next((c for c in spec.get("initContainers", []) if c["name"] == "prepare"), None)
    if p:
        lines = ""
        for f in p.get("command", [])[2:]:
            m = mount_of(p, f)
            v = m and next(v for v in spec["volumes"] if v["name"] == m["name"])
            if v and "configMap" in v:
                cm = [o for o in objs if o.get("kind") == "ConfigMap" and o["metadata"]["name"] == v["configMap"]["name"]]
                lines += (cm[0].get("data", {}) if cm else {}).get(os.path.basename(f), "")
        for need in (paths["--socket"], paths["--metrics-file"]):
            if not re.search(r"^\S+\s+%s\s" % re.escape(need), lines, re.M):
                out.append("prepare: its tmpfiles.d lines do not make %s" % need)
            elif host_path(spec, p, need) != host_path(spec, d, need):
                out.append("prepare: %s is not the daemon's" % need)


def validate(objs, image):
    out = []
    for o in objs:
        check_model(o, out)
    if not out:
        check_daemonset(objs, image, out)
    return out


# --- a training pod beside the DaemonSet ---------------------------------------------------

def check_example(pod, use, objs):
    out = []
    check_model(pod, out)
    if out:
        return out
    ds = next(o for o in objs if o.get("kind") == "DaemonSet")
    dspec = ds["spec"]["template"]["spec"]
    d = next(c for c in dspec["containers"] if c["name"] == "npuprofd")
    spec = pod["spec"]
    check_mounts("Pod", spec, out)
    root = arg(d, "--output-root")
    for c in spec["containers"]:
        if use == "kineto":
            sock = arg(d, "--kineto-socket-dir")
            if env(c, "KINETO_USE_DAEMON") is None:
                out.append("%s: no KINETO_USE_DAEMON" % c["name"])
            if env(c, "KINETO_IPC_SOCKET_DIR") != sock:
                out.append("%s: KINETO_IPC_SOCKET_DIR is not npuprofd's --kineto-socket-dir %s" % (c["name"], sock))
            elif host_path(spec, c, sock) != host_path(dspec, d, sock):
                out.append("%s: %s is not the node's directory the daemon serves" % (c["name"], sock))
            if env(c, "KINETO_ONDEMAND_TRACE_DIR") != root:
                out.append("%s: KINETO_ONDEMAND_TRACE_DIR is not the output root %s" % (c["name"], root))
        else:
            if host_path(spec, c, "/dev/shm") != "/dev/shm" or mount_of(c, "/dev/shm")["mountPath"] != "/dev/shm":
                out.append("%s: the node's /dev/shm is not mounted at /dev/shm" % c["name"])
        if host_path(spec, c, root) != host_path(dspec, d, root):
            out.append("%s: the output root %s is not the node's %s" % (c["name"], root, host_path(dspec, d, root)))
        m = mount_of(c, root)
        if m and m.get("readOnly"):
            out.append("%s: the output root is read-only" % c["name"])
        if use == "legacy" and env(c, "TZ") != env(d, "TZ"):
            out.append("%s: TZ %s, not npuprofd's %s (the objects' hour)" % (c["name"], env(c, "TZ"), env(d, "TZ")))
    return out


# --- broken on purpose ---------------------------------------------------------------------

def dump(path, docs):
    with open(path, "w") as f:
        yaml.safe_dump_all(docs, f, sort_keys=False)


def mutate(src, dst, name):
    shutil.copytree(src, dst)
    dsf = os.path.join(dst, "base", "daemonset.yaml")
    docs = load(dsf)
    spec = docs[0]["spec"]["template"]["spec"]
    d = next(c for c in spec["containers"] if c["name"] == "npuprofd")
    if name == "typo":
        d["volumeMounts"][0]["mountpath"] = d["volumeMounts"][0].pop("mountPath")
    elif name == "no-shm":
        d["volumeMounts"] = [m for m in d["volumeMounts"] if m["mountPath"] != "/dev/shm"]
    elif name == "writable-root":
        d["securityContext"]["readOnlyRootFilesystem"] = False
    elif name == "cap":
        d["securityContext"]["capabilities"]["add"] = ["SYS_ADMIN"]
    elif name == "root":
        d["securityContext"]["runAsUser"] = 0
    elif name == "output-root":
        v = next(v for v in spec["volumes"] if (v.get("hostPath") or {}).get("path") == "/var/lib/npuprof")
        v["hostPath"]["path"] = "/srv/npuprof"
    elif name == "bool":
        d["securityContext"]["allowPrivilegeEscalation"] = "no"
    elif name == "yaml":
        with open(dsf) as f:
            text = f.read()
        with open(dsf, "w") as f:
            f.write(text.replace("      containers:\n", "      containers:\n\t- name: x\n", 1))
        return
    elif name == "example-no-shm":
        p = os.path.join(dst, "examples", "torch-npu-pod.yaml")
        pod = load(p)[0]
        pod["spec"]["volumes"] = [v for v in pod["spec"]["volumes"] if v["name"] != "dev-shm"]
        for c in pod["spec"]["containers"]:
            c["volumeMounts"] = [m for m in c["volumeMounts"] if m["name"] != "dev-shm"]
        dump(p, [pod])
        return
    elif name == "example-kineto-dir":
        p = os.path.join(dst, "examples", "pytorch-pod.yaml")
        pod = load(p)[0]
        next(e for e in pod["spec"]["containers"][0]["env"] if e["name"] == "KINETO_IPC_SOCKET_DIR")["value"] = "/tmp"
        dump(p, [pod])
        return
    else:
        raise SystemExit("no mutation %s" % name)
    dump(dsf, docs)


# --- as the kubelet runs a container -------------------------------------------------------

def project(data, target):
    """A ConfigMap's data into @target as the kubelet's atomic writer lays it out, or updated."""
    os.makedirs(target, exist_ok=True)
    old = os.readlink(os.path.join(target, "..data")) if os.path.islink(os.path.join(target, "..data")) else None
    ts = os.path.join(target, time.strftime("..%Y_%m_%d_%H_%M_%S.", time.gmtime()) + str(time.time_ns() % 10**9))
    os.mkdir(ts, 0o755)
    for k, v in data.items():
        with open(os.path.join(ts, k), "w") as f:
            f.write(v)
        os.chmod(os.path.join(ts, k), 0o644)
        if not os.path.lexists(os.path.join(target, k)):
            os.symlink(os.path.join("..data", k), os.path.join(target, k))
    os.symlink(os.path.basename(ts), os.path.join(target, "..data_tmp"))
    os.rename(os.path.join(target, "..data_tmp"), os.path.join(target, "..data"))
    if old:
        shutil.rmtree(os.path.join(target, old))


def expand(s, env_map):
    return re.sub(r"\$\$|\$\(([A-Za-z_][A-Za-z0-9_]*)\)",
                  lambda m: "$" if m.group(0) == "$$" else env_map.get(m.group(1), m.group(0)), s)


def podman(objs, kind_name, cname, host, poddir, image, node, command=None):
    kind, name = kind_name.split("/")
    o = next(o for o in objs if o["kind"] == kind and o["metadata"]["name"] == name)
    spec = o["spec"]["template"]["spec"] if kind == "DaemonSet" else o["spec"]
    c = next(c for c in containers(spec) if c["name"] == cname)
    sc = dict((spec.get("securityContext") or {}), **(c.get("securityContext") or {}))
    a = []
    if sc.get("runAsNonRoot") and not sc.get("runAsUser"):
        raise SystemExit("%s: runAsNonRoot without a runAsUser other than 0: the kubelet would not start it" % cname)
    if "runAsUser" in sc:
        a += ["--user", "%d:%d" % (sc["runAsUser"], sc.get("runAsGroup", 0))]
    if sc.get("readOnlyRootFilesystem"):
        a += ["--read-only", "--read-only-tmpfs=false"]
    if sc.get("allowPrivilegeEscalation") is False:
        a += ["--security-opt", "no-new-privileges"]
    if sc.get("privileged"):
        a += ["--privileged"]
    for cap in (sc.get("capabilities") or {}).get("drop") or []:
        a += ["--cap-drop", cap]
    for cap in (sc.get("capabilities") or {}).get("add") or []:
        a += ["--cap-add", cap]
    a += ["--pid", "host"] if spec.get("hostPID") else []
    a += ["--ipc", "host"] if spec.get("hostIPC") else []
    a += ["--network", "host" if spec.get("hostNetwork") else "none"]
    env_map = {}
    for e in c.get("env", []):
        if "value" in e:
            env_map[e["name"]] = expand(e["value"], env_map)
        elif (e.get("valueFrom") or {}).get("fieldRef", {}).get("fieldPath") == "spec.nodeName":
            env_map[e["name"]] = node
        else:
            raise SystemExit("%s: env %s: not supported here" % (cname, e["name"]))
        a += ["--env", "%s=%s" % (e["name"], env_map[e["name"]])]
    vols = {v["name"]: v for v in spec.get("volumes", [])}
    for m in c.get("volumeMounts", []):
        v = vols[m["name"]]
        if "hostPath" in v:
            src = host + v["hostPath"]["path"]
            t = v["hostPath"].get("type", "")
            if t == "DirectoryOrCreate":
                os.makedirs(src, 0o755, exist_ok=True)
            elif t == "Directory" and not os.path.isdir(src):
                raise SystemExit("%s: hostPath type check failed: %s is not a directory" % (cname, v["hostPath"]["path"]))
        elif "emptyDir" in v:
            src = os.path.join(poddir, "emptydir", m["name"])
            if not os.path.isdir(src):
                os.makedirs(src)
                os.chmod(src, 0o777)
        elif "configMap" in v:
            src = os.path.join(poddir, "configmap", m["name"])
            if not os.path.isdir(src):
                cm = next(x for x in objs if x["kind"] == "ConfigMap" and x["metadata"]["name"] == v["configMap"]["name"])
                project(cm.get("data", {}), src)
        else:
            raise SystemExit("%s: volume %s: not supported here" % (cname, m["name"]))
        if m.get("subPath"):
            src = os.path.join(src, m["subPath"])
        a += ["--volume", "%s:%s%s" % (src, m["mountPath"], ":ro" if m.get("readOnly") else "")]
    if command is not None:
        c = dict(c, command=json.loads(command), args=[])
    if c.get("command"):
        a += ["--entrypoint", json.dumps([expand(x, env_map) for x in c["command"]])]
    a += [image] + [expand(x, env_map) for x in c.get("args", [])]
    return a


EXAMPLES = (("pytorch", "kineto"), ("torch-npu", "legacy"), ("mindspore", "legacy"), ("native", "native"))


def validate_tree(top, image):
    """Every check of the manifests under @top (a copy of deploy/kubernetes)."""
    out = []
    for d in ("base", "configmap"):
        out += ["%s/: %s" % (d, p) for p in validate(kustomize(os.path.join(top, d)), image)]
    if out:
        return out
    for name, use in EXAMPLES:
        f = os.path.join(top, "examples", name + "-pod.yaml")
        out += ["examples/%s-pod.yaml: %s" % (name, p)
                for p in check_example(load(f)[0], use, kustomize(os.path.join(top, "base")))]
    return out


def mutations(top, work, image, names):
    """Each mutation of @names on a copy of @top, and the first problem found, or none."""
    for name in names:
        dst = os.path.join(work, "broken-" + name)
        mutate(top, dst, name)
        try:
            problems = validate_tree(dst, image)
        except (OSError, yaml.YAMLError, KeyError, StopIteration) as e:
            problems = ["cannot read the manifests: %s: %s" % (type(e).__name__, str(e).splitlines()[0])]
        print("%s\t%s" % (name, problems[0] if problems else ""))


def objects(path):
    return kustomize(path) if os.path.isdir(path) else load(path)


def report(problems):
    for p in problems:
        print(p)
    sys.exit(1 if problems else 0)


def main(argv):
    cmd = argv[1]
    if cmd == "validate":
        report(validate(kustomize(argv[2]), argv[3]))
    elif cmd == "validate-stream":
        report(validate(load(argv[2]), argv[3]))
    elif cmd == "validate-example":
        report(check_example(load(argv[2])[0], argv[3], kustomize(argv[4])))
    elif cmd == "mutations":
        mutations(argv[2], argv[3], argv[4], argv[5:])
    elif cmd == "podman":
        sys.stdout.write("\0".join(podman(objects(argv[2]), *argv[3:10])) + "\0")
    elif cmd == "probe":
        o = next(o for o in objects(argv[2]) if "%s/%s" % (o["kind"], o["metadata"]["name"]) == argv[3])
        c = next(c for c in containers(o["spec"]["template"]["spec"]) if c["name"] == argv[4])
        sys.stdout.write("\0".join(c["livenessProbe"]["exec"]["command"]) + "\0")
    elif cmd == "configmap":
        cm = next(x for x in kustomize(argv[2]) if x["kind"] == "ConfigMap" and x["metadata"]["name"] == argv[3])
        data = dict(cm.get("data", {}))
        for kv in argv[5:]:
            k, f = kv.split("=", 1)
            with open(f) as fh:
                data[k] = fh.read()
        project(data, argv[4])
    else:
        raise SystemExit("unknown command %s" % cmd)


if __name__ == "__main__":
    try:
        main(sys.argv)
    except (OSError, yaml.YAMLError, KeyError, StopIteration) as e:
        print("cannot read the manifests: %s: %s" % (type(e).__name__, e))
        sys.exit(1)
PY
k8s() { "$python" "$py" "$@"; }

# valid NAME CMD...: CMD prints nothing and succeeds, or this fails with what it printed.
valid() {
        local name=$1 out
        shift
        if out=$("$@" 2>&1); then ok "$name"; else fail "$name" "$out"; fi
}

# --- the manifests ---------------------------------------------------------------------------

# The manifests broken on purpose, each a way the checks must find.
declare -A broken=([typo]="a misspelt field" [yaml]="a tab in the YAML" [bool]="a string for a boolean"
        [no-shm]="the daemon without /dev/shm" [writable-root]="a writable root file system"
        [cap]="CAP_SYS_ADMIN added" [root]="the daemon as root" [output-root]="the output root elsewhere on the node"
        [example-no-shm]="a torch_npu pod without /dev/shm" [example-kineto-dir]="a PyTorch pod polling another directory")
broken_order=(typo yaml bool no-shm writable-root cap root output-root example-no-shm example-kineto-dir)

t_manifests() {
        local d e m found kver
        for d in base configmap; do
                valid "$d/: every object valid for the API, the DaemonSet's mounts, security, resources and image ($image)" \
                        k8s validate "$kdir/$d" "$image"
        done
        for e in pytorch:kineto torch-npu:legacy mindspore:legacy native:native; do
                valid "examples/${e%%:*}-pod.yaml: valid; the node's paths it needs for a ${e#*:} job are the DaemonSet's" \
                        k8s validate-example "$kdir/examples/${e%%:*}-pod.yaml" "${e#*:}" "$kdir/base"
        done
        if command -v kubectl >/dev/null; then
                kver=$(kubectl version --client 2>/dev/null | grep -o 'v[0-9][0-9.]*[0-9A-Za-z+.-]*' | head -n 1)
                for d in base configmap; do
                        if kubectl kustomize "$kdir/$d" >"$tmp/kustomize-$d.yaml" 2>"$tmp/kustomize-$d.err"; then
                                valid "kubectl kustomize $d/ builds offline (kubectl $kver), and its output is valid" \
                                        k8s validate-stream "$tmp/kustomize-$d.yaml" "$image"
                        else
                                fail "kubectl kustomize $d/ fails" "$(cat "$tmp/kustomize-$d.err")"
                        fi
                done
        else
                skip "kubectl is not installed: kustomize's own build of base/ and configmap/ not tried"
        fi
        check "the image's npuprof uid is the DaemonSet's runAsUser (64042) in Containerfile and build-image" \
                sh -c "grep -q '^ARG NPUPROF_UID=64042\$' '$kdir/Containerfile' && grep -q 'NPUPROF_UID:-64042}' '$kdir/build-image'"
        k8s mutations "$kdir" "$tmp" "$image" "${broken_order[@]}" >"$tmp/broken.out" 2>&1
        for m in "${broken_order[@]}"; do
                found=$(sed -n "s/^$m\t//p" "$tmp/broken.out")
                if [ -n "$found" ]; then
                        ok "broken on purpose (${broken[$m]}): found: $found"
                else
                        fail "broken on purpose (${broken[$m]}): not found" "$(cat "$tmp/broken.out")"
                fi
        done
}

# A ConfigMap volume as the kubelet projects it (profiler_config.json -> ..data/... ->
# ..TIMESTAMP/), updated as its atomic writer does (a new ..TIMESTAMP, ..data_tmp renamed
# over ..data): inotify on the directory names no profiler_config.json, and the daemon's
# stat polling, which follows the links, sees the new file within --poll-interval (1 s, the
# DaemonSet's).
t_configmap_swap() {
        local cm=$tmp/configmap sock=$tmp/cm.sock shm=npftest-k8s-$$-cm log=$tmp/cm.log dpid t
        if [ ! -x "$build/npuprofd" ]; then
                fail "configmap: $build/npuprofd is not built"
                return
        fi
        k8s configmap "$kdir/configmap" npuprof-config "$cm"
        mkdir -p "$tmp/cm-out"
        "$build/npuprofd" --config "$cm/profiler_config.json" --shm-name "$shm" --socket "$sock" \
                --output-root "$tmp/cm-out" --analyze-jobs 0 --no-kineto --log stderr 2>"$log" &
        dpid=$!
        all_pids+=("$dpid")
        cmjs() { npf_json_holds 'import json, sys; o = json.loads(sys.argv[2])' "$1" \
                timeout 10 "$build/npuprofctl" --socket "$sock" --shm-name "$shm" config --json; }
        eventually "configmap: the daemon reads the projected file (profiling off, generation 1)" \
                cmjs "o['generation'] == 1 and not o['config']['window']['enabled']"
        printf '{"start_step": 1000, "steps": 5}\n' >"$tmp/cm-new.json"
        k8s configmap "$kdir/configmap" npuprof-config "$cm" profiler_config.json="$tmp/cm-new.json"
        t=$(now_ms)
        wait_ms=3000 eventually "configmap: the kubelet's update (..data swapped) is published within 3 s" \
                cmjs "o['generation'] == 2 and o['config']['window']['start_step'] == 1000"
        echo "     | published $(($(now_ms) - t)) ms after the swap"
        kill -TERM "$dpid"
        wait "$dpid"
        check "configmap: the daemon stops cleanly" test $? -eq 0
}

# --- the image and the pods, under podman -----------------------------------------------------

cprefix=npftest-k8s-$$
timg=localhost/$cprefix:$version
rt=()
k8s_cleanup() {
        command -v podman >/dev/null || return 0
        podman ps -a --format '{{.Names}}' 2>/dev/null | grep "^$cprefix-" | xargs -r podman rm -f -t 0 >/dev/null 2>&1
        podman rmi -f "$timg" "localhost/$cprefix-probe" >/dev/null 2>&1
        return 0
}
trap 'k8s_cleanup; npf_cleanup' EXIT

# podman_usable: whether root may build and run containers here: sets rt, the options podman
# needs on this machine (runc where crun refuses cgroups v1 beside v2 controllers; limits no
# higher than this process's, where raising them is not allowed), or why_not.
podman_usable() {
        local t h candidates opts
        why_not=''
        [ "$(id -u)" -eq 0 ] || { why_not="needs root (podman's storage, files of several users in the node's directories)"; return 1; }
        for t in podman mmdebstrap dpkg-buildpackage; do
                command -v "$t" >/dev/null || { why_not="$t is not installed (Debian's podman, mmdebstrap, dpkg-dev)"; return 1; }
        done
        # A one-file image to try the runtime with: ldconfig, which is statically linked.
        mkdir -p "$tmp/probe"
        cp "$(command -v ldconfig || echo /sbin/ldconfig)" "$tmp/probe/ldconfig"
        if ! tar -C "$tmp/probe" -cf - ldconfig | podman import --quiet - "localhost/$cprefix-probe" >/dev/null 2>"$tmp/probe.err"; then
                why_not="podman cannot import an image: $(tail -n 1 "$tmp/probe.err")"
                return 1
        fi
        h=$(ulimit -Hn)
        [ "$h" = unlimited ] || [ "$h" -gt 1048576 ] && h=1048576
        candidates=("" "--ulimit nofile=$h:$h --ulimit nproc=4096:4096" "--runtime runc --cgroup-manager cgroupfs"
                "--runtime runc --cgroup-manager cgroupfs --ulimit nofile=$h:$h --ulimit nproc=4096:4096")
        for opts in "${candidates[@]}"; do
                read -r -a rt <<<"$opts"
                if podman run --rm --network none --read-only --cap-drop ALL --security-opt no-new-privileges \
                        "${rt[@]}" "localhost/$cprefix-probe" /ldconfig --version >/dev/null 2>"$tmp/probe.err"; then
                        return 0
                fi
        done
        why_not="podman cannot run a container here, whatever the runtime and limits: $(grep -v 'level=warning' "$tmp/probe.err" | tail -n 1)"
        return 1
}

# The mirror, unless a base made in the last week is cached.
mirror_reachable() {
        local url=${MIRROR:-http://deb.debian.org/debian}
        [ -n "$(find "$here/build/kubernetes" -maxdepth 1 -name 'base-*.tar' -mtime -7 2>/dev/null)" ] && return 0
        "$python" -c 'import sys, urllib.request; urllib.request.urlopen(sys.argv[1], timeout=15)' \
                "$url/dists/${SUITE:-bookworm}/Release" >/dev/null 2>"$tmp/mirror.err" && return 0
        why_not="the Debian mirror $url cannot be reached to make the image's base: $(tail -n 1 "$tmp/mirror.err")"
        return 1
}

node=$tmp/node          # the stand-in node's root: hostPath P is $node/P
dsdir=$tmp/pod-npuprofd # the DaemonSet pod's emptyDir and configMap volumes

# pod_args SOURCE KIND/NAME CONTAINER POD_DIR [COMMAND]: sets pargs, podman run's options for
# that container, the image (the test's) and its arguments last.
pod_args() {
        local src=$1 obj=$2 c=$3 pd=$4
        shift 4
        mapfile -d '' -t pargs < <(k8s podman "$src" "$obj" "$c" "$node" "$pd" "$timg" node-a "$@" 2>"$tmp/pod_args.err")
        [ ${#pargs[@]} -gt 0 ] || { cat "$tmp/pod_args.err"; return 1; }
}

# pod_start NAME SOURCE KIND/NAME CONTAINER POD_DIR [COMMAND]: that container started, detached,
# as $cprefix-NAME, with the podman options in extra besides its own.
extra=()
pod_start() {
        local name=$1
        shift
        if ! pod_args "$@" >"$tmp/run.err" 2>&1 ||
           ! podman run -d --name "$cprefix-$name" "${rt[@]}" "${extra[@]}" "${pargs[@]}" >/dev/null 2>>"$tmp/run.err"; then
                fail "$name: cannot be started as the kubelet would" "$(grep -v level=warning "$tmp/run.err")"
                return 1
        fi
}

ctl() { podman exec "$cprefix-npuprofd" npuprofctl "$@" 2>/dev/null; }
quiet() { "$@" >/dev/null 2>&1; }

py_prelude='
import json, sys
o = json.loads(sys.argv[2])
R = o.get("ranks") or []
W = (o.get("windows") or {}).get("recent") or []
K = o.get("kineto") or {}
L = {p["publisher"]: p for p in (o.get("legacy") or {}).get("publishers") or []}
'
js() { npf_json_holds "$py_prelude" "$1" ctl status --json; }

diag() {
        echo "status: $(ctl status --json | head -c 1500)"
        local c
        for c in npuprofd shmopen rank kineto; do
                podman logs "$cprefix-$c" 2>&1 | grep -v 'level=warning' | tail -n 6 | sed "s/^/$c: /"
        done
}

# image_has: the test's image answers npuprofd --version, as uid 64042, and holds the
# programs the DaemonSet's containers run, the Python binding and the time zones.
image_has() {
        podman run --rm --network none "${rt[@]}" "$timg" --version 2>/dev/null | grep -qF "npuprofd $version" || return 1
        test "$(podman run --rm --network none "${rt[@]}" --entrypoint /bin/sh "$timg" -c '
                id -u
                for p in systemd-tmpfiles systemd-socket-activate npuprof-shmopen npuprofctl npuprof-replay python3; do
                        command -v $p >/dev/null || echo "no $p"
                done
                python3 -c "import npuprof" || echo "no npuprof module"
                test -e /usr/share/zoneinfo/Asia/Shanghai || echo "no tzdata"' 2>/dev/null)" = 64042
}

t_image() {
        local t=$SECONDS
        if make -s -C "$here" deb DEBDIR="$tmp/deb" >"$tmp/deb.out" 2>&1; then
                ok "make deb builds the packages ($((SECONDS - t)) s)"
        else
                fail "make deb fails" "$(grep -v '^cc \|^	' "$tmp/deb.out" | tail -n 25)"
                return 1
        fi
        t=$SECONDS
        if NPUPROF_IMAGE_CACHE="$here/build/kubernetes" PODMAN_BUILD_OPTS="${rt[*]}" \
                "$kdir/build-image" --tag "$timg" "$tmp/deb" >"$tmp/image.out" 2>&1; then
                ok "build-image builds $timg from them ($((SECONDS - t)) s; $(grep -o 'base .*(cached)\|making the base' "$tmp/image.out" | head -n 1))"
        else
                fail "build-image fails" "$(tail -n 25 "$tmp/image.out")"
                return 1
        fi
        check "the image runs npuprofd $version as npuprof (uid 64042), with what the DaemonSet runs and tzdata" image_has
}

t_pods() {
        local hour wdir fake='' status probe f
        mkdir -p "$node/dev/shm" "$node/shared/npuprof/fleet"
        chmod 1777 "$node/dev/shm"
        printf '{"steps": 5}\n' >"$node/shared/npuprof/profiler_config.json"
        # The operator's part (README.md): the fleet directory writable by the daemon's uid.
        chown 64042:64042 "$node/shared/npuprof/fleet"

        # The init container, then the two others, as the kubelet starts the pod.
        pod_args "$kdir/base" DaemonSet/npuprofd prepare "$dsdir" || { fail "prepare: cannot be run"; return; }
        if podman run --rm --name "$cprefix-prepare" "${rt[@]}" "${pargs[@]}" >"$tmp/prepare.out" 2>&1; then
                ok "prepare (the init container: root, CHOWN, FOWNER, DAC_OVERRIDE, read-only root) runs systemd-tmpfiles"
        else
                fail "prepare fails" "$(grep -v level=warning "$tmp/prepare.out")"
        fi
        check "... the node's /var/lib/npuprof is npuprof's 0755, its output root 1777, /run/npuprof npuprof's" \
                test "$(stat -c '%u %a' "$node/var/lib/npuprof" "$node/var/lib/npuprof/output" "$node/run/npuprof" | tr '\n' ' ')" = "64042 755 64042 1777 64042 755 "
        check "... and node_exporter's textfile directory has an ACL for npuprof" \
                "$python" -c 'import os, sys; sys.exit(0 if "system.posix_acl_access" in os.listxattr(sys.argv[1]) else 1)' \
                "$node/var/lib/prometheus/node-exporter"
        pod_start shmopen "$kdir/base" DaemonSet/npuprofd shmopen "$dsdir"
        pod_start npuprofd "$kdir/base" DaemonSet/npuprofd npuprofd "$dsdir" || return
        wait_ms=10000 eventually "npuprofd answers npuprofctl status in its container: uid 64042, the shared file, valid" \
                js "o['daemon']['uid'] == 64042 and o['config']['path'] == '/etc/npuprof/config/profiler_config.json' and o['config']['state'] == 'valid'"
        check "... with no capability and no way to gain one (CapEff 0, NoNewPrivs 1), its root read-only" \
                sh -c "podman exec '$cprefix-npuprofd' cat /proc/1/status 2>/dev/null | grep -qx 'CapEff:[[:space:]]*0000000000000000' &&
                        podman exec '$cprefix-npuprofd' cat /proc/1/status 2>/dev/null | grep -qx 'NoNewPrivs:[[:space:]]*1' &&
                        ! podman exec '$cprefix-npuprofd' touch /tmp/npftest 2>/dev/null"
        mapfile -d '' -t probe < <(k8s probe "$kdir/base" DaemonSet/npuprofd npuprofd)
        check "... its livenessProbe (${probe[*]}) succeeds" quiet podman exec "$cprefix-npuprofd" "${probe[@]}"
        check "... its segment is in the node's /dev/shm, the rank table 0666" \
                test "$(stat -c %a "$node/dev/shm/npuprof.ranks" 2>/dev/null)" = 666 -a -f "$node/dev/shm/npuprof.ctl"
        check "... libkineto's endpoint is the node's /run/npuprof/kineto/dynolog, in a directory made 1777" \
                test -S "$node/run/npuprof/kineto/dynolog" -a "$(stat -c %a "$node/run/npuprof/kineto")" = 1777
        hour=$(TZ=UTC date +%Y%m%d%H)
        check "... --legacy: torch_npu's object of this hour (TZ=UTC) is in the node's /dev/shm, 0666" \
                test "$(stat -c %a "$node/dev/shm/DynamicProfileNpuShm$hour" 2>/dev/null)" = 666
        eventually "... the metrics are in node_exporter's textfile directory, npuprof_up 1" \
                grep -qx 'npuprof_up 1' "$node/var/lib/prometheus/node-exporter/npuprof.prom"
        eventually "... the fleet record is in the shared fleet directory, named after the node" \
                test -s "$node/shared/npuprof/fleet/node-a.json"
        eventually "... its opener listens in the pod's emptyDir, the socket opened to the daemon's uid (0666)" \
                test "$(stat -c %a "$dsdir/emptydir/shmopen/sock" 2>/dev/null)" = 666

        # A rank of examples/native-pod.yaml, its program a Python training loop, as root, as
        # the processes of most training images run (the test's image would make it npuprof).
        extra=(--user 0:0)
        pod_start rank "$kdir/examples/native-pod.yaml" Pod/train-native train "$tmp/pod-native" \
                '["python3", "-c", "import npuprof, time\nm = npuprof.Monitor(backend=\"host\")\nfor s in range(1, 10**9):\n    m.step(s)\n    time.sleep(0.01)\n"]'
        eventually "a rank in a pod of examples/native-pod.yaml is listed by the daemon's npuprofctl status, stepping, no pid (no hostPID)" \
                js "len(R) == 1 and R[0]['rank'] == 0 and R[0]['step'] > 10 and R[0]['pid'] is None"

        # A PyTorch job of examples/pytorch-pod.yaml: fake-torch, built against the real
        # libkineto, and the C++ runtime it needs, stand in for the job's image; it polls
        # every second (KINETO_CONFIG) rather than libkineto's five.
        if "$here/tests/kineto/build.sh" >"$tmp/kineto-build.out" 2>&1; then
                fake=$here/build/kineto/fake-torch
                printf 'ON_DEMAND_CONFIG_UPDATE_INTERVAL_SECS=1\n' >"$tmp/kineto.conf"
                extra=(--user 0:0 --volume "$fake:/usr/local/bin/fake-torch:ro" --volume "$tmp/kineto.conf:/etc/kineto.conf:ro"
                        --env KINETO_CONFIG=/etc/kineto.conf)
                for f in $(ldd "$fake" | awk '$3 ~ /^\// && $1 ~ /^libstdc\+\+/ { print $3 }'); do
                        extra+=(--volume "$f:$f:ro")
                done
                pod_start kineto "$kdir/examples/pytorch-pod.yaml" Pod/train-pytorch train "$tmp/pod-pytorch" \
                        '["/usr/local/bin/fake-torch", "--steps", "1000000", "--step-ms", "20"]'
                wait_ms=15000 eventually "a libkineto job in a pod of examples/pytorch-pod.yaml polls the daemon through the node's socket directory" \
                        js "len(K['clients']) == 1 and K['clients'][0]['polls'] >= 1 and K['clients'][0]['host_pid'] is None"
        elif [ $? -eq 77 ]; then
                skip "the libkineto job: $(tail -n 1 "$tmp/kineto-build.out")"
        else
                fail "tests/kineto/build.sh fails" "$(tail -n 20 "$tmp/kineto-build.out")"
        fi

        # Someone edits the shared file (a temporary file renamed over it, as editors save).
        printf '{"start_step": "next", "steps": 5}\n' >"$node/shared/npuprof/.profiler_config.json.new"
        mv "$node/shared/npuprof/.profiler_config.json.new" "$node/shared/npuprof/profiler_config.json"
        wait_ms=15000 eventually "an edit of the shared file opens a window: the rank's is done" \
                js "any(w['rank'] == 0 and w['outcome'] == 'done' and w['backend'] == 'host' for w in W)"
        wdir=$(npf_json_print "$py_prelude" '[w["output"] for w in W if w["rank"] == 0][0]' ctl status --json)
        check "... its window directory ($wdir) is in the node's output root, with its trace and a complete manifest" \
                "$python" -c 'import json, sys; m = json.load(open(sys.argv[1] + "/manifest.json")); sys.exit(0 if m["status"] == "complete" and m["rank"] == 0 and any(f["name"] == "trace.json" for f in m["files"]) else 1)' \
                "$node$wdir"
        eventually "... the daemon analyses it into STATE_DIRECTORY (the window is root's, the daemon 64042)" \
                js "[w for w in W if w['rank'] == 0][0]['analysis']['state'] == 'done' and [w for w in W if w['rank'] == 0][0]['analysis']['report'].startswith('/var/lib/npuprof/analysis/')"
        check "... and the report is on the node" \
                test -s "$node/var/lib/npuprof/analysis/${wdir#/var/lib/npuprof/output/}/report.json"
        check "... torch_npu's object of the hour holds the window for unmodified torch_npu jobs" \
                "$python" -c 'import json, sys; b = open(sys.argv[1], "rb").read()[4:].rstrip(b"\0 ").decode(); sys.exit(0 if json.loads(b).get("is_valid") is True else 1)' \
                "$node/dev/shm/DynamicProfileNpuShm$hour"
        if [ -n "$fake" ]; then
                wait_ms=20000 eventually "... the libkineto job's window is done, libkineto's trace in the node's output root" \
                        js "any(w['backend'] == 'kineto' and w['outcome'] == 'done' for w in W)"
                wdir=$(npf_json_print "$py_prelude" '[w["output"] for w in W if w["backend"] == "kineto"][0]' ctl status --json)
                check "... $wdir holds kineto's *.pt.trace.json" \
                        sh -c "ls '$node$wdir' | grep -q '\\.pt\\.trace\\.json\$'"
        fi

        # A MindSpore job's own object, 0600, of a job running as uid 1000: neither the
        # daemon's (64042, no capability) nor root's, so that only the opener's
        # CAP_DAC_OVERRIDE opens it (a root job's object the root opener opens as its owner).
        podman exec --user 1000:1000 "$cprefix-rank" python3 -c 'import os, sys; fd = os.open("/dev/shm/DynamicProfileShm" + sys.argv[1], os.O_CREAT | os.O_EXCL | os.O_RDWR, 0o600); os.ftruncate(fd, 28)' \
                "$hour" 2>/dev/null
        eventually "a MindSpore job's 0600 object, of uid 1000, is driven through the opener container (CAP_DAC_OVERRIDE alone)" \
                js "any(x['name'] == 'DynamicProfileShm$hour' and x['via_opener'] for x in L['mindspore-packed']['objects'])"

        podman stop -t 10 "$cprefix-npuprofd" >/dev/null 2>&1
        status=$(podman inspect --format '{{.State.ExitCode}}' "$cprefix-npuprofd" 2>/dev/null)
        check "the daemon's container stops cleanly on SIGTERM (exit $status), its last metrics npuprof_up 0" \
                sh -c "test '$status' = 0 && grep -qx 'npuprof_up 0' '$node/var/lib/prometheus/node-exporter/npuprof.prom'"
        check "its log has no error and no write that failed" \
                sh -c "! podman logs '$cprefix-npuprofd' 2>&1 | grep -v level=warning | grep -E ' error: |cannot write|Permission denied'"
}

t_manifests
t_configmap_swap
if ! podman_usable || ! mirror_reachable; then
        echo "test-kubernetes: the image and the pods not tried: $why_not ($((SECONDS - t0)) s)"
        echo "kubernetes: $passed passed, $failed failed"
        [ "$failed" -eq 0 ] && exit 77
        exit 1
fi
t_image && t_pods
echo "test-kubernetes: $((SECONDS - t0)) s in all"
echo "kubernetes: $passed passed, $failed failed"
[ "$failed" -eq 0 ]
