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
. "$here/tests/lib-podman.sh"
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
py=$here/tests/kubernetes/k8s.py
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
k8s_cleanup() {
        command -v podman >/dev/null || return 0
        podman ps -a --format '{{.Names}}' 2>/dev/null | grep "^$cprefix-" | xargs -r podman rm -f -t 0 >/dev/null 2>&1
        podman rmi -f "$timg" "localhost/$cprefix-probe" >/dev/null 2>&1
        return 0
}
trap 'k8s_cleanup; npf_cleanup' EXIT

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
           ! podman run -d --name "$cprefix-$name" "${npf_rt[@]}" "${extra[@]}" "${pargs[@]}" >/dev/null 2>>"$tmp/run.err"; then
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
        podman run --rm --network none "${npf_rt[@]}" "$timg" --version 2>/dev/null | grep -qF "npuprofd $version" || return 1
        test "$(podman run --rm --network none "${npf_rt[@]}" --entrypoint /bin/sh "$timg" -c '
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
        if NPUPROF_IMAGE_CACHE="$here/build/kubernetes" PODMAN_BUILD_OPTS="${npf_rt[*]}" \
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
        if podman run --rm --name "$cprefix-prepare" "${npf_rt[@]}" "${pargs[@]}" >"$tmp/prepare.out" 2>&1; then
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
if ! npf_podman_usable "$cprefix" || ! npf_mirror_reachable "$here/build/kubernetes" "base-*.tar"; then
        echo "test-kubernetes: the image and the pods not tried: $why_not ($((SECONDS - t0)) s)"
        echo "kubernetes: $passed passed, $failed failed"
        [ "$failed" -eq 0 ] && exit 77
        exit 1
fi
t_image && t_pods
echo "test-kubernetes: $((SECONDS - t0)) s in all"
echo "kubernetes: $passed passed, $failed failed"
[ "$failed" -eq 0 ]
