# Shell functions the bench scripts share (sourced by run.sh and ab.sh).

# Background work a load leaves behind (reconciliation polls, webhook fan-out,
# checkpoints) must not be charged to the next measurement: wait until the
# servers (PIDs given, else $SERVER) use under 5% of a core each for a second
# (at most 60 s).
wait_quiet() {
  local hz pids=("${@:-$SERVER}"); hz=$(getconf CLK_TCK)
  cpu() { local p t=0; for p in "${pids[@]}"; do t=$((t + $(awk '{print $14+$15}' /proc/$p/stat))); done; echo $t; }
  for _ in $(seq 60); do
    local a b; a=$(cpu); sleep 1; b=$(cpu)
    [ $(( (b - a) * 100 )) -lt $(( hz * 5 * ${#pids[@]} )) ] && return 0
  done
  # Measured anyway, and said: a non-zero status here would end a `set -e` script silently.
  echo "warning: the server was still busy after 60 s; measuring anyway" >&2
}

json_field() { python3 -c "import sys,json;print(json.load(sys.stdin)[sys.argv[1]])" "$1"; }

# Creates one payment through BASE with KEY and prints its id; retries for up
# to 30 s, since a component compiled for the first time (a cold cache) may
# still be loading. Prints nothing if none could be created.
first_payment() { # base, key, reference
  local id=
  for _ in $(seq 300); do
    id=$(curl -s -H "Authorization: Bearer $2" -H "Idempotency-Key: $(cat /proc/sys/kernel/random/uuid)" -H 'Content-Type: application/json' \
      -d '{"reference":"'"$3"'","amount":1500,"currency":"XOF","country":"BJ","operator":"mtn-bj","customer":{"phone":"+2290166000001"}}' \
      "$1/api/v1/collect/payments" | json_field id 2>/dev/null) && break
    sleep 0.1
  done
  echo "$id"
}
