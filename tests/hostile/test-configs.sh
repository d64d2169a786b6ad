#!/usr/bin/env bash
# SPDX-License-Identifier: MIT
# The hostile battery: every broken profiler_config.json of tests/hostile/configs/ (all three
# dialects), each with the substrings its error must hold in NNN-name.expect, one a line
# ("line 3, column 14: steps", the allowed values...; "!no-position" for the few file-level
# errors that have no place). The few inputs too big for git are made by gen-big.py, and
# "@ROOT@" in an input stands for the daemon's output root.
#   tests/hostile/test-configs.sh BUILD_DIR [PATTERN]      (only the files whose name matches)
# Each file must be (a) refused by the real `npuprofctl validate` (exit 1, no crash, the
# expected text in its first error) and (b) refused by ONE real npuprofd, started once on a
# good configuration G (generation 1): the daemon reports that very version of the file as
# invalid with the same text, stays alive, and keeps generation 1 with exactly G in force.
# A good G2 then publishes generation 2.
set -u
build=${1:?usage: tests/hostile/test-configs.sh BUILD_DIR [PATTERN]}
pattern=${2:-*}
npuprofd=$build/npuprofd npuprofctl=$build/npuprofctl
for b in "$npuprofd" "$npuprofctl"; do
        [ -x "$b" ] || { echo "test-configs: $b is not built" >&2; exit 2; }
done
here=$(cd "$(dirname "$0")" && pwd)
configs=$here/configs

. "$here/../lib.sh"
npf_harness hostile
wait_ms=30000           # a bound for the slowest sanitizer build, never a measurement

root=$tmp/out dir=$tmp/conf in=$tmp/in
conf=$dir/profiler_config.json sock=$tmp/npuprofd.sock shm=npftest-hostile-$$-1 log=$tmp/daemon.log
mkdir -p "$root" "$dir" "$in"

ctl() { timeout 20 "$npuprofctl" --socket "$sock" --shm-name "$shm" "$@"; }

# One python3 for the whole run (a start costs more than a daemon's answer): it reads
# "status JSON" or "validate JSON" lines and answers two lines each: what the reply says,
# and its first error as "line L, column C: KEY: MESSAGE" (the parts it has).
viewer='
import json, sys
def render(e):
    if not e:
        return ""
    s = ""
    if e.get("line"):
        s += "line %d, column %d: " % (e["line"], e["column"])
    if e.get("key"):
        s += e["key"] + ": "
    return (s + e["message"]).replace("\n", "\\n")
for req in sys.stdin:
    kind, _, text = req.rstrip("\n").partition(" ")
    try:
        o = json.loads(text)
        if kind == "status":
            c = o["config"]
            head, e = "%s %s %s %s" % (c["state"], c["error_count"], c["generation"], c["path"]), c.get("error")
        else:
            e = o["errors"][0] if o.get("errors") else None
            head = "%s %s" % ("valid" if o["valid"] else "invalid",
                              "placed" if e and e.get("line") and e.get("column") else "unplaced")
    except Exception as x:
        head, e = "unreadable", {"message": repr(x)}
    print(head)
    print(render(e), flush=True)
'
coproc VIEWER { exec python3 -c "$viewer"; }
all_pids+=("$VIEWER_PID")

# view KIND JSON: ask the viewer; sets head and rendered.
view() {
        printf '%s %s\n' "$1" "${2//$'\n'/ }" >&"${VIEWER[1]}"
        IFS= read -r head <&"${VIEWER[0]}" && IFS= read -r rendered <&"${VIEWER[0]}"
}

# daemon_view: head is "STATE ERROR_COUNT GENERATION PATH" of `status --json`.
daemon_view() {
        local out
        out=$(ctl status --json 2>/dev/null) || { head=unreachable rendered=''; return 1; }
        view status "$out"
}

# holds TEXT EXPECT-FILE: every expected substring is in TEXT. Sets missing.
holds() {
        local want
        missing=''
        while IFS= read -r want; do
                case $want in ''|'!'*) continue ;; esac
                [[ $1 == *"$want"* ]] || missing+="[$want] "
        done <"$2"
        [ -z "$missing" ]
}

crashed() {     # crashed STATUS OUTPUT
        [ "$1" -ge 128 ] || grep -q 'Sanitizer\|runtime error:' <<<"$2"
}

alive() {
        local s
        s=$(sed 's/.*) //' "/proc/$dpid/stat" 2>/dev/null | cut -d' ' -f1)
        [ -n "$s" ] && [ "$s" != Z ]
}

# --- the daemon, once, on G --------------------------------------------------------------
printf '{\n  "start_step": 100,\n  "steps": 3,\n  "output_dir": "good"\n}\n' >"$conf"
"$npuprofd" --config "$conf" --shm-name "$shm" --socket "$sock" --output-root "$root" --log stderr \
        2>>"$log" &
dpid=$!
all_pids+=("$dpid")
published() { daemon_view && [ "$(cut -d' ' -f1,3 <<<"$head")" = "valid $1" ]; }
if ! wait_for published 1; then
        fail "npuprofd publishes G as generation 1" "$(tail -n 5 "$log")"
        echo "hostile: $passed passed, $failed failed"
        exit 1
fi
ok "npuprofd publishes G as generation 1"
good=$(ctl config --json)

# --- the battery -----------------------------------------------------------------------
declare -A cat_files cat_validate cat_daemon
categories=()
count=0 validate_ms=0 daemon_ms=0
start_ms=$(now_ms)
for expect in "$configs"/$pattern.expect; do
        base=$(basename "$expect" .expect)
        name=${base#*-}
        category=${name%%-*}
        [ -n "${cat_files[$category]:-}" ] || { categories+=("$category"); cat_files[$category]=0
                                                 cat_validate[$category]=0 cat_daemon[$category]=0; }
        cat_files[$category]=$((cat_files[$category] + 1))
        count=$((count + 1))
        file=$in/$base.json
        if [ -e "$configs/$base.json" ]; then
                sed "s|@ROOT@|$root|g" "$configs/$base.json" >"$file"
        elif ! python3 "$here/gen-big.py" "$name" "$file"; then
                fail "$base: gen-big.py cannot make it"
                continue
        fi

        # (a) npuprofctl validate, in text and as JSON.
        t0=$(now_ms)
        text=$("$npuprofctl" validate --output-root "$root" "$file" 2>&1)
        text_rc=$?
        json=$("$npuprofctl" validate --output-root "$root" --json "$file" 2>&1)
        json_rc=$?
        validate_ms=$((validate_ms + $(now_ms) - t0))
        view validate "$json"
        first=$head
        if crashed "$text_rc" "$text" || crashed "$json_rc" "$json"; then
                fail "$base: validate crashed (exit $text_rc / $json_rc)" "$(head -c 2000 <<<"$text$json")"
        elif [ "$text_rc" != 1 ] || [ "$json_rc" != 1 ] || [[ $first != invalid* ]]; then
                fail "$base: validate exits $text_rc / $json_rc ($first), not 1 and invalid" "$(head -c 600 <<<"$text")"
        elif ! grep -Fq "$file" <<<"$text" || ! grep -q ': error: ' <<<"$text"; then
                fail "$base: validate's text names neither the file nor an error" "$(head -c 600 <<<"$text")"
        elif [[ $first != *" placed" ]] && ! grep -qx '!no-position' "$expect"; then
                fail "$base: validate's error has no line and column" "$rendered"
        elif ! holds "$rendered" "$expect"; then
                fail "$base: validate's error lacks $missing" "$rendered"
        else
                passed=$((passed + 1)) cat_validate[$category]=$((cat_validate[$category] + 1))
        fi

        # (b) the daemon: the file renamed over the watched one, reported as this version, refused.
        t0=$(now_ms)
        cp "$file" "$dir/.incoming~" && mv -f "$dir/.incoming~" "$conf"
        reported() { daemon_view && [ "$head" = "invalid $count 1 $conf" ] && holds "$rendered" "$expect"; }
        if ! wait_for reported; then
                fail "$base: npuprofd does not report it as invalid version $count with the expected text" \
                        "$(daemon_view; echo "$head: $rendered"; tail -n 3 "$log")"
        elif ! alive; then
                fail "$base: npuprofd died" "$(tail -n 5 "$log")"
        elif [ "$(ctl config --json)" != "$good" ]; then
                fail "$base: npuprofd no longer has G, generation 1, in force" "$(ctl config --json | head -c 600)"
        else
                passed=$((passed + 1)) cat_daemon[$category]=$((cat_daemon[$category] + 1))
        fi
        daemon_ms=$((daemon_ms + $(now_ms) - t0))
        rm -f "$file"
done
battery_ms=$(($(now_ms) - start_ms))

# --- G2 after all that: the daemon still publishes ----------------------------------------
printf '{\n  "start_step": 200,\n  "steps": 2,\n  "output_dir": "good2"\n}\n' >"$dir/.incoming~"
mv -f "$dir/.incoming~" "$conf"
if wait_for published 2 && ctl config --json | grep -q "\"prof_dir\":\"$root/good2\"" &&
   ctl config --json | grep -q '"start_step":200'; then
        ok "a good G2 after the battery publishes generation 2"
else
        fail "a good G2 after the battery publishes generation 2" "$(daemon_view; echo "$head"; tail -n 5 "$log")"
fi
if alive && ! grep -q 'Sanitizer\|runtime error:' "$log"; then
        ok "npuprofd ran the whole battery without a crash or a sanitizer report"
else
        fail "npuprofd ran the whole battery without a crash or a sanitizer report" "$(tail -n 20 "$log")"
fi
# The log is written by a thread of the daemon's own: wait for the second line, then count.
wait_for test "$(grep -c 'published generation' "$log")" -ge 2
if [ "$(grep -c 'published generation' "$log")" = 2 ]; then
        ok "npuprofd published exactly twice: G and G2"
else
        fail "npuprofd published exactly twice: G and G2" "$(grep 'published generation' "$log")"
fi

echo
printf '%-12s %6s %9s %8s\n' category files validate daemon
for c in "${categories[@]}"; do
        printf '%-12s %6d %9d %8d\n' "$c" "${cat_files[$c]}" "${cat_validate[$c]}" "${cat_daemon[$c]}"
done
printf '%-12s %6d\n' total "$count"
echo "battery: $count files in $battery_ms ms; validate (text + json) $((validate_ms / (count ? count : 1))) ms" \
     "a file, daemon (rename to refusal seen) $((daemon_ms / (count ? count : 1))) ms a file"
echo "hostile: $passed passed, $failed failed"
[ "$failed" -eq 0 ]
