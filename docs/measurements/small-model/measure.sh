#!/bin/bash
# usage: [AGENTFLOW_CHECKOUT=DIR] [FIXTURE=REPO] TASK=JSON measure.sh OUTDIR  (the fixture repository copied fresh into OUTDIR/ws)
set -u
out=$1; rm -rf "$out"; mkdir -p "$out"; cp -r ${FIXTURE:-/tmp/fork-small-fixture} "$out/ws"
cd "${AGENTFLOW_CHECKOUT:-.}"
uptime > "$out/uptime.before"
export PATH="$PWD/.venv/bin:$PATH" PYTHONPATH=${AGENTFLOW_CHECKOUT:-.}
start=$(date +%s.%N)
( time "$PWD"/.venv/bin/python -m agentflow.cli.main run plan_code_search_small --workspace "$out/ws" \
   -m local:qwen2.5-coder-1.5b -o "$out/runs" --apply \
   -i "$TASK" ) \
   2> >("$PWD"/.venv/bin/python -u -c '
import sys, time
for line in sys.stdin:
    sys.stdout.write(f"{time.time():.1f} {line}"); sys.stdout.flush()' > "$out/stderr.ts") > "$out/stdout"
echo "exit $?" > "$out/exit"
uptime > "$out/uptime.after"
sleep 1
"$PWD"/.venv/bin/python - "$out" <<'PY'
import sys
out = sys.argv[1]
ts = [float(l.split(" ", 1)[0]) for l in open(f"{out}/stderr.ts") if l[:1].isdigit()]
gaps = [b - a for a, b in zip(ts, ts[1:])]
print(f"lines {len(ts)} span {ts[-1]-ts[0]:.0f}s max gap {max(gaps):.1f}s")
PY
cd "$out/ws" && git diff && "$PWD"/.venv/bin/python -m pytest -q 2>&1 | tail -1
