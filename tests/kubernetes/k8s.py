#!/usr/bin/env python3
# SPDX-License-Identifier: MIT
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
