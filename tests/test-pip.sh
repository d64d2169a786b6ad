#!/usr/bin/env bash
# The Python binding installed the way researchers install Python packages: `pip install
# ./python` into a fresh virtual environment, offline (Debian's wheels of setuptools and
# wheel, /usr/share/python-wheels), and a wheel built. The installed package, given the
# build's library through NPUPROF_LIB, steps a Monitor under a real npuprofd on a private
# segment, socket and configuration directory: the window opens and closes at the steps the
# file names. Without a library, its error says what to do.
#   tests/test-pip.sh BUILD_DIR
set -u
build=${1:?usage: tests/test-pip.sh BUILD_DIR}
here=$(cd "$(dirname "$0")/.." && pwd)
. "$here/tests/lib.sh"
npf_plain_only test-pip "$build" "the plain build only: a sanitizer's library cannot be loaded into an uninstrumented Python"
npf_harness pip
case $build in /*) abs=$build ;; *) abs=$here/$build ;; esac
python=/usr/bin/python3
wheels=/usr/share/python-wheels
venv=$tmp/venv
shm=npftest-pip-$$-a
diag() { tail -n 20 "$tmp/pip.out" 2>/dev/null; }

for f in npuprofd npuprofctl libnpuprof.so; do
        [ -e "$abs/$f" ] || { echo "test-pip: $abs/$f is not built"; exit 1; }
done

# The user's pip configuration and a PYTHONPATH into the tree must not stand in for the install.
export PIP_CONFIG_FILE=/dev/null PIP_DISABLE_PIP_VERSION_CHECK=1
unset PYTHONPATH NPUPROF_LIB

# pip builds in the folder it is given (build/, npuprof.egg-info): a copy keeps the checkout clean.
mkdir "$tmp/src"
cp -r "$here/python" "$tmp/src/python"
if "$python" -m venv "$venv" >"$tmp/pip.out" 2>&1; then ok "a fresh virtual environment (python3 -m venv)"
else fail "python3 -m venv fails (Debian's python3-venv is needed)" "$(cat "$tmp/pip.out")"; fi
pip() { "$venv/bin/pip" "$@" --no-index --find-links "$wheels" >"$tmp/pip.out" 2>&1; }

if pip install "$tmp/src/python"; then ok "pip install ./python, offline (--no-index --find-links $wheels)"
else fail "pip install ./python fails offline (Debian's python3-setuptools-whl and python3-wheel-whl are needed)" "$(diag)"; fi
version=$(sed -n 's/^__version__ = "\(.*\)"$/\1/p' "$here/python/npuprof/__init__.py")
shown=$("$venv/bin/pip" show npuprof 2>/dev/null | sed -n 's/^Version: //p')
check "pip knows npuprof $version (pip show: ${shown:-nothing})" test "$shown" = "$version"
where=$(cd "$tmp" && "$venv/bin/python" -c 'import npuprof; print(npuprof.__file__)' 2>&1)
check "the venv imports its own copy ($where)" test "${where#"$venv"/}" != "$where"

mkdir "$tmp/wheel"
if pip wheel --no-deps -w "$tmp/wheel" "$tmp/src/python"; then ok "pip wheel ./python builds a wheel"
else fail "pip wheel ./python fails" "$(diag)"; fi
whl=$tmp/wheel/npuprof-$version-py3-none-any.whl
check "the wheel is npuprof-$version-py3-none-any.whl and holds the package" \
        sh -c "'$python' -m zipfile -l '$whl' | grep -q 'npuprof/_lib.py'"

# A real npuprofd on a private segment, socket and configuration directory: steps 4 to 6.
mkdir "$tmp/etc" "$tmp/out"
printf '{"start_step": 4, "steps": 3, "backend": "host"}\n' >"$tmp/etc/profiler_config.json"
"$abs/npuprofd" --config "$tmp/etc/profiler_config.json" --shm-name "$shm" --socket "$tmp/sock" \
        --output-root "$tmp/out" --analyze-jobs 0 --log stderr 2>"$tmp/daemon.log" &
all_pids+=($!)
ctl() { "$abs/npuprofctl" --socket "$tmp/sock" --shm-name "$shm" "$@"; }
published() { npf_json_holds 'import json, sys; o = json.loads(sys.argv[2])' 'o["config"]["generation"] >= 1' ctl status --json; }
eventually "npuprofd publishes the window (generation 1)" published

out=$(cd "$tmp" && NPUPROF_LIB=$abs/libnpuprof.so timeout 60 "$venv/bin/python" - "$shm" <<'PY' 2>&1
import json, sys
import npuprof

states = {}
with npuprof.Monitor(rank=5, shm_name=sys.argv[1], backend="host") as m:
    for step in range(1, 10):
        m.step(step)
        states[step] = m.info().state
    i = m.info()
print(json.dumps({"states": states, "start": i.window_start, "stop": i.window_stop, "attached": i.attached,
                  "output": i.output, "lib": npuprof._lib.library_path(), "file": npuprof.__file__}))
PY
)
result=$("$python" - "$out" "$abs/libnpuprof.so" "$venv" <<'PY'
import json, os, sys
try:
    o = json.loads(sys.argv[1].splitlines()[-1])
except (ValueError, IndexError):
    print("no result: " + sys.argv[1][-400:].replace("\n", " | ")); sys.exit()
s = {int(k): v for k, v in o["states"].items()}
problems = []
if o["lib"] != sys.argv[2]:
    problems.append("library %s, not NPUPROF_LIB's" % o["lib"])
if not o["file"].startswith(sys.argv[3] + "/"):
    problems.append("npuprof imported from %s" % o["file"])
if not o["attached"]:
    problems.append("never attached to the daemon's segment")
if [s[k] for k in (4, 5, 6)] != ["collecting"] * 3:
    problems.append("steps 4 to 6: %s" % [s[k] for k in (4, 5, 6)])
if any(s[k] == "collecting" for k in (1, 2, 3, 7, 8, 9)):
    problems.append("collecting outside 4 to 6: %s" % s)
if s[7] != "done" or s[9] != "done":
    problems.append("not done after step 6: %s" % s)
if (o["start"], o["stop"]) != (4, 6):
    problems.append("window %s..%s" % (o["start"], o["stop"]))
try:
    m = json.load(open(os.path.join(o["output"], "manifest.json")))
    if m.get("status") != "complete":
        problems.append("manifest status %r" % m.get("status"))
except (OSError, ValueError) as e:
    problems.append("no manifest: %s" % e)
print("; ".join(problems) if problems else "fine")
PY
)
check "the installed Monitor collects at steps 4, 5 and 6 exactly and closes at 7, manifest complete ($result)" \
        test "$result" = fine
check "its window directory is rank5_start4_stop6 under the output root" test -d "$tmp/out/rank5_start4_stop6"

# Without a library: the error names what to install or set. Asked for only where the
# system has no libnpuprof.so.0 of its own (a package or make install would be found).
missing=$(cd "$tmp" && "$venv/bin/python" -c '
import npuprof
try:
    npuprof.Monitor()
except npuprof.LibraryNotFound as e:
    print(e)' 2>&1)
if /sbin/ldconfig -p 2>/dev/null | grep -q 'libnpuprof\.so\.0 '; then
        skip "the error without a library: this system has a libnpuprof.so.0 installed"
else
        check "without a library, the error says to install libnpuprof0, make install, or set NPUPROF_LIB" \
                bash -c 'grep -q "libnpuprof.so.0 is not installed" <<<"$1" && grep -q "libnpuprof0" <<<"$1" && grep -q "apt install" <<<"$1" &&
                       grep -q "make install" <<<"$1" && grep -q "NPUPROF_LIB=" <<<"$1"' bash "$missing"
        echo "     | $missing"
fi
wrong=$(cd "$tmp" && NPUPROF_LIB=$tmp/nowhere/libnpuprof.so.0 "$venv/bin/python" -c '
import npuprof
try:
    npuprof.Monitor()
except npuprof.LibraryNotFound as e:
    print(e)' 2>&1)
check "an NPUPROF_LIB that cannot be loaded is named, with what to set instead" \
        bash -c 'grep -q "NPUPROF_LIB names a library that cannot be loaded" <<<"$1" && grep -q "nowhere/libnpuprof.so.0" <<<"$1" &&
               grep -q "unset it" <<<"$1"' bash "$wrong"
echo "     | $wrong"

echo "pip: $passed passed, $failed failed"
[ "$failed" -eq 0 ]
