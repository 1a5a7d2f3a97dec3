#!/usr/bin/env bash
# pktfs's S3 endpoint against Garage on the same machine, with the same
# client (s3bench, bench/s3bench) and the same parameters, one run each:
#
# - small-object PUTs (4 KiB, distinct keys, SigV4-signed as the SDKs
#   sign them) at 16 and 256 connections: requests/s and each server's
#   own CPU time per request (utime + stime of its process, from /proc,
#   over the run);
# - one 1 GiB object uploaded in 16 MiB parts (4 at a time) and
#   downloaded as ranged GETs: MB/s each way.
#
# Paired: for each connection count pktfs runs, then Garage; each run on a
# fresh server (a new image, a new Garage), both on /dev/shm (the same
# medium: Garage's data and metadata, pktfs's image). The targets:
# small PUTs >= 3x Garage's req/s at 16 and 256 connections with the
# server's CPU per request <= 1/3 of Garage's; the 1 GiB upload and
# download >= 1.5x Garage.
#
#   bench/s3.sh [--secs 10] [--conns 16,256] [--size-mib 1024] [--part-mib 16]
#               [--parallel 4] [--checksum crc32|crc32c|none] [--payload signed|unsigned]
#               [--threads 1] [--only small|multipart] [--image-gib 8]
#               [--servers pktfs,garage]
#
# Writes bench/results/s3-<UTC stamp>.json (every run's s3bench output,
# the machine, the ratios and whether each target was met) and prints a
# table. GARAGE_BIN=path picks the garage binary (default: PATH, then
# ~/.cargo/bin/garage). PKTFS_SERVE_ARGS are pktfs serve's flags beyond
# the image and --s3: by default "--loops N" with N the CPUs, one event
# loop per CPU, as Garage's runtime runs a thread per CPU (pktfs's own
# default, a loop per two CPUs, leaves a CPU to a client on the same
# machine; an upload's MD5 and SHA-256 then have one core).
set -euo pipefail
cd "$(dirname "$0")/.."

secs=10 conns=16,256 size_mib=1024 part_mib=16 parallel=4 checksum=crc32 payload=signed
threads=1 only="" image_gib=8 servers=pktfs,garage
while [[ $# -gt 0 ]]; do
    case $1 in
        --secs) secs=$2 ;;
        --conns) conns=$2 ;;
        --size-mib) size_mib=$2 ;;
        --part-mib) part_mib=$2 ;;
        --parallel) parallel=$2 ;;
        --checksum) checksum=$2 ;;
        --payload) payload=$2 ;;
        --threads) threads=$2 ;;
        --only) only=$2 ;;
        --image-gib) image_gib=$2 ;;
        --servers) servers=$2 ;;
        -h|--help) sed -n '2,27p' "$0"; exit 0 ;;
        *) echo "bench/s3.sh: unknown option $1 (--help lists them)" >&2; exit 2 ;;
    esac
    shift 2
done

serve_args=${PKTFS_SERVE_ARGS-"--loops $(nproc)"}
garage_bin=${GARAGE_BIN:-$(command -v garage || echo "$HOME/.cargo/bin/garage")}
if [[ ! -x $garage_bin ]]; then
    echo "bench/s3.sh: garage is not installed (cargo install --locked garage --version 2.5.0 \\" >&2
    echo "    --no-default-features --features sqlite,system-libs; or GARAGE_BIN=path)" >&2
    exit 1
fi

cargo build --release -q -p pktfs -p pktfs-mkfs -p pktfs-s3bench
bin=target/release
rev=$(git rev-parse --short HEAD)
git diff --quiet HEAD -- . ':!bench/results' || rev="$rev+changes"
machine=$("$bin/pktfs" machine 2>/dev/null | head -1 | sed "s/^machine: //" || true)
garage_version=$("$garage_bin" --version 2>/dev/null | head -1 || true)
echo "machine: $machine"
echo "pktfs $rev; $garage_version ($garage_bin)"

work=$(mktemp -d /dev/shm/pktfs-s3bench-XXXXXX)
server_pid=""
stop_server() {
    if [[ -n $server_pid ]]; then
        kill -INT "$server_pid" 2>/dev/null || true
        for _ in $(seq 100); do kill -0 "$server_pid" 2>/dev/null || break; sleep 0.1; done
        kill -KILL "$server_pid" 2>/dev/null || true
        wait "$server_pid" 2>/dev/null || true
        server_pid=""
    fi
}
cleanup() { stop_server; rm -rf "$work"; }
trap cleanup EXIT

# Wait until `$1` holds a line matching `$2` (at most 60 s); print it.
wait_line() {
    local i
    for i in $(seq 600); do
        if grep -m1 -E "$2" "$1" 2>/dev/null; then return 0; fi
        if ! kill -0 "$server_pid" 2>/dev/null; then break; fi
        sleep 0.1
    done
    echo "bench/s3.sh: no line matching '$2' from the server; its output:" >&2
    tail -20 "$1" >&2
    return 1
}

# Wait until process $1 has used no CPU for half a second (at most 60 s):
# a server that just opened its image is still faulting it in (pktfs
# populates the mapping in the background; on tmpfs that clears every
# page), and that work is not the requests'.
wait_idle() {
    local pid=$1 before after i
    cpu() { awk '{print $14 + $15}' "/proc/$pid/stat"; }
    before=$(cpu)
    for i in $(seq 120); do
        sleep 0.5
        after=$(cpu)
        if (( after - before <= 1 )); then return 0; fi
        before=$after
    done
    echo "bench/s3.sh: the server (pid $pid) never went idle" >&2
    return 1
}

# A fresh pktfs image on /dev/shm with a key, served with --s3: sets
# endpoint, region, key_id, secret, server_pid.
start_pktfs() {
    local d=$work/pktfs
    rm -rf "$d"; mkdir -p "$d"
    # Inodes for every object a run can make (a 4 KiB object per inode).
    "$bin/mkfs-pktfs" --size "${image_gib}G" --inodes $((image_gib * 200000)) "$d/img" >/dev/null
    local k
    k=$("$bin/pktfs" keys add "$d/img" bench --grant '*=rw' --json)
    key_id=$(python3 -c 'import json,sys; print(json.load(sys.stdin)["access_key_id"])' <<<"$k")
    secret=$(python3 -c 'import json,sys; print(json.load(sys.stdin)["secret_access_key"])' <<<"$k")
    # shellcheck disable=SC2086 # PKTFS_SERVE_ARGS: more serve flags, split on spaces
    "$bin/pktfs" serve "$d/img" --s3 127.0.0.1:0 $serve_args >"$d/out" 2>"$d/err" &
    server_pid=$!
    local line
    line=$(wait_line "$d/out" '^ *S3 +http://')
    endpoint=$(grep -oE 'http://[^ /]+' <<<"$line")
    wait_idle "$server_pid"
    region=us-east-1
}

# A fresh single-node Garage with its data and metadata on /dev/shm, a key
# allowed to make buckets: sets endpoint, region, key_id, secret,
# server_pid.
start_garage() {
    local d=$work/garage
    rm -rf "$d"; mkdir -p "$d"
    local base port
    # Ports below the ephemeral range, free when checked.
    for _ in $(seq 50); do
        base=$((20000 + RANDOM % 10000))
        port=$base
        if ! (echo >/dev/tcp/127.0.0.1/$base) 2>/dev/null \
            && ! (echo >/dev/tcp/127.0.0.1/$((base + 1))) 2>/dev/null \
            && ! (echo >/dev/tcp/127.0.0.1/$((base + 3))) 2>/dev/null; then break; fi
    done
    cat >"$d/garage.toml" <<EOF
metadata_dir = "$d/meta"
data_dir = "$d/data"
db_engine = "sqlite"
replication_factor = 1
rpc_bind_addr = "127.0.0.1:$((port + 1))"
rpc_public_addr = "127.0.0.1:$((port + 1))"
rpc_secret = "$(head -c 32 /dev/urandom | od -An -tx1 | tr -d ' \n')"
[s3_api]
s3_region = "garage"
api_bind_addr = "127.0.0.1:$port"
root_domain = ".s3.garage.localhost"
[admin]
api_bind_addr = "127.0.0.1:$((port + 3))"
EOF
    local g=("$garage_bin" -c "$d/garage.toml")
    RUST_LOG=garage=warn "$garage_bin" -c "$d/garage.toml" server >"$d/out" 2>&1 &
    server_pid=$!
    local id=""
    for _ in $(seq 300); do
        id=$("${g[@]}" node id -q 2>/dev/null) && break
        kill -0 "$server_pid" 2>/dev/null || break
        sleep 0.1
    done
    if [[ -z $id ]]; then
        echo "bench/s3.sh: garage did not start; its output:" >&2
        tail -20 "$d/out" >&2
        return 1
    fi
    "${g[@]}" layout assign -z dc1 -c 1G "${id%@*}" >/dev/null
    "${g[@]}" layout apply --version 1 >/dev/null
    local k
    k=$("${g[@]}" key create bench)
    key_id=$(awk '/Key ID/ {print $NF}' <<<"$k")
    secret=$(awk '/Secret key/ {print $NF}' <<<"$k")
    "${g[@]}" key allow --create-bucket bench >/dev/null
    endpoint=http://127.0.0.1:$port
    region=garage
    # Ready when the S3 port answers.
    for _ in $(seq 300); do
        if (echo >/dev/tcp/127.0.0.1/$port) 2>/dev/null; then
            wait_idle "$server_pid"
            return 0
        fi
        sleep 0.1
    done
    echo "bench/s3.sh: garage's S3 port $port never answered" >&2
    return 1
}

results=$work/runs.jsonl
: >"$results"
# s3bench against the running server; its JSON, tagged, goes to the runs.
bench() { # server args...
    local server=$1
    shift
    local out
    out=$("$bin/s3bench" --endpoint "$endpoint" --region "$region" \
        --access-key-id "$key_id" --secret-access-key "$secret" \
        --bucket bench --create-bucket --server-pid "$server_pid" \
        --checksum "$checksum" --payload "$payload" "$@")
    python3 -c 'import json,sys; r=json.loads(sys.argv[1]); r["server"]=sys.argv[2]; print(json.dumps(r))' \
        "$out" "$server" >>"$results"
}

if [[ $only != multipart ]]; then
    for c in ${conns//,/ }; do
        for server in ${servers//,/ }; do
            echo "small PUTs, $c connections, ${secs} s: $server"
            "start_$server"
            bench "$server" put-small --conns "$c" --secs "$secs" --size-bytes 4096 --threads "$threads"
            stop_server
        done
    done
fi
if [[ $only != small ]]; then
    for server in ${servers//,/ }; do
        echo "multipart, $size_mib MiB in $part_mib MiB parts, $parallel at a time: $server"
        "start_$server"
        bench "$server" multipart --size-mib "$size_mib" --part-mib "$part_mib" --parallel "$parallel"
        stop_server
    done
fi

mkdir -p bench/results
stamp=$(date -u +%Y%m%dT%H%M%SZ)
dst=bench/results/s3-$stamp.json
python3 - "$results" "$dst" "$machine" "$rev" "$garage_version" "$secs" "$checksum" "$payload" "$threads" "$serve_args" <<'EOF'
import json, sys
src, dst, machine, rev, garage, secs, checksum, payload, threads, serve_args = sys.argv[1:]
runs = [json.loads(l) for l in open(src) if l.strip()]
def find(server, op, conns=None):
    for r in runs:
        if r["server"] == server and r["op"] == op and (conns is None or r.get("conns") == conns):
            return r
def ratio(a, b):
    return a / b if a is not None and b not in (None, 0) else None
targets = []
rows = []
errors = sum(r.get("errors", 0) for r in runs)
for conns in sorted({r["conns"] for r in runs if r["op"] == "put-small"}):
    p, g = find("pktfs", "put-small", conns), find("garage", "put-small", conns)
    if not p or not g:
        continue
    rr = ratio(p["req_s"], g["req_s"])
    cr = ratio(p["server_cpu_us_per_req"], g["server_cpu_us_per_req"])
    rows.append((f"4 KiB PUT, {conns} conns: req/s", p["req_s"], g["req_s"], rr, "req/s"))
    rows.append((f"4 KiB PUT, {conns} conns: server CPU per request", p["server_cpu_us_per_req"], g["server_cpu_us_per_req"], cr, "us"))
    rows.append((f"4 KiB PUT, {conns} conns: p99", p["p99_us"], g["p99_us"], ratio(p["p99_us"], g["p99_us"]), "us"))
    # Near 100% of one CPU per client thread: the client, not the server,
    # set the pace (it shares the machine).
    busy = lambda r: 100 * r["client_cpu_s"] / r["elapsed_s"] if r["elapsed_s"] else None
    rows.append((f"4 KiB PUT, {conns} conns: client CPU, % of one CPU", busy(p), busy(g), None, "%"))
    targets.append({"target": f"4 KiB PUT req/s at {conns} conns >= 3x Garage", "ratio": rr, "met": rr is not None and rr >= 3})
    targets.append({"target": f"server CPU per 4 KiB PUT at {conns} conns <= 1/3 of Garage's", "ratio": cr, "met": cr is not None and cr <= 1 / 3})
p, g = find("pktfs", "multipart"), find("garage", "multipart")
if p and g:
    for what, key in (("upload", "upload_mb_s"), ("download", "download_mb_s")):
        r = ratio(p[key], g[key])
        rows.append((f"{p['size_bytes'] >> 20} MiB multipart {what}", p[key], g[key], r, "MB/s"))
        cpu = lambda x: x.get(f"{what}_server_cpu_s")
        rows.append((f"{p['size_bytes'] >> 20} MiB multipart {what}: server CPU", cpu(p), cpu(g), ratio(cpu(p), cpu(g)), "s"))
        ccpu = lambda x: x.get(f"{what}_client_cpu_s")
        rows.append((f"{p['size_bytes'] >> 20} MiB multipart {what}: client CPU", ccpu(p), ccpu(g), None, "s"))
        targets.append({"target": f"1 GiB multipart {what} >= 1.5x Garage", "ratio": r, "met": r is not None and r >= 1.5})
out = {
    "benchmark": "bench/s3.sh", "rev": rev, "machine": machine, "garage": garage,
    "setup": {
        "pktfs": f"pktfs serve IMAGE --s3 ADDR {serve_args} (its default I/O: io_uring where usable), a fresh image on /dev/shm per run, durable before each answer",
        "garage": "one node, SQLite metadata (the engine .ci/run builds), data and metadata on /dev/shm, a fresh one per run, its default (no) fsync",
    },
    "client": {"tool": "s3bench", "secs": float(secs), "checksum": checksum, "payload": payload, "client_threads": int(threads)},
    "runs": runs,
    "ratios": [{"measurement": w, "pktfs": a, "garage": b, "pktfs_over_garage": r, "unit": u} for w, a, b, r, u in rows],
    "targets": targets,
    "errors": errors,
}
json.dump(out, open(dst, "w"), indent=1)
fmt = lambda v: "-" if v is None else (f"{v:.2f}" if v < 100 else f"{v:.0f}")
print(f"\nmachine: {machine}")
print(f"client: s3bench, payload {payload}, checksum {checksum}, {threads} client thread(s), {secs} s per small-PUT run")
print("| measurement | pktfs | garage | pktfs/garage |")
print("|---|---|---|---|")
for w, a, b, r, u in rows:
    print(f"| {w} | {fmt(a)} {u} | {fmt(b)} {u} | {fmt(r)}x |")
print()
for t in targets:
    print(f"| {t['target']} | {fmt(t['ratio'])}x | {'met' if t['met'] else 'MISSED'} |")
if errors:
    print(f"\nWARNING: {errors} requests failed or were answered wrongly (see the runs' first_error)")
print(f"\nwritten: {dst}")
EOF
