# Shared by bench/paired.sh, bench/interleaved.sh, bench/instructions.sh
# and bench/syscalls.sh, which source it from the repository's root:
# netbench built at a revision and at this tree, the machine line, the wrk
# script of 1 KiB PUTs, the order of a pair's halves.

# args USAGE OPTS ARGS...: the revision first (into `rev`), then `--NAME
# VALUE` for each NAME of the space-separated OPTS (into $NAME, whose
# default the script set); anything else prints USAGE and exits 2.
args() {
    local usage=$1 opts=" $2 " name
    shift 2
    if [[ $# -lt 1 || $1 == -* ]]; then
        echo "usage: $usage" >&2
        exit 2
    fi
    rev=$1
    shift
    while [[ $# -gt 0 ]]; do
        name=${1#--}
        if [[ $1 != --* || $opts != *" $name "* || $# -lt 2 ]]; then
            echo "$0: unknown option or no value: $1" >&2
            echo "usage: $usage" >&2
            exit 2
        fi
        printf -v "$name" %s "$2"
        shift 2
    done
}

# Exit unless every command named is on PATH.
need() {
    local t
    for t in "$@"; do
        command -v "$t" >/dev/null || { echo "$0: $t is missing" >&2; exit 1; }
    done
}

# This tree's short revision, with "+changes" where it differs from HEAD
# outside bench/results (what "after" measures).
tree_rev() {
    local r
    r=$(git rev-parse --short HEAD)
    git diff --quiet HEAD -- . ':!bench/results' || r="$r+changes"
    echo "$r"
}

# build_at REV: netbench built at REV in a worktree of its own (removed on
# exit, its target directory kept beside it); `built` names the binary.
# (Not printed: in a command substitution the worktree would not reach
# the EXIT trap.)
worktrees=()
remove_worktrees() {
    local w
    for w in "${worktrees[@]}"; do git worktree remove --force "$w"; done
}
trap remove_worktrees EXIT
build_at() {
    local wt
    wt=$(mktemp -d /tmp/pktfs-bench-XXXXXX)
    git worktree add -q --detach "$wt" "$1"
    worktrees+=("$wt")
    (cd "$wt" && CARGO_TARGET_DIR="$wt-target" cargo build --release -q -p pktfs-netbench) >&2
    built="$wt-target/release/netbench"
}

# netbench_before REV: `before_bin`, PAIRED_BEFORE_BIN when set, else built.
netbench_before() {
    before_bin=${PAIRED_BEFORE_BIN:-}
    if [[ -z $before_bin ]]; then
        build_at "$1"
        before_bin=$built
    fi
}

# `after_bin`: netbench built from this tree.
netbench_here() {
    cargo build --release -q -p pktfs-netbench
    after_bin=target/release/netbench
}

# `machine`: what `pktfs machine` says of this one (its first line).
machine_line() {
    machine=$(cargo run --release -q -p pktfs --bin pktfs -- machine 2>/dev/null | head -1 | sed "s/^machine: //" || true)
    echo "machine: $machine"
}

# netbench_sides: `before` (REV from args) and `after` (`after_rev` when
# set, else this tree) with their netbench binaries: PAIRED_BEFORE_BIN and
# PAIRED_AFTER_BIN when set, else built.
netbench_sides() {
    before=$(git rev-parse --short "$rev")
    netbench_before "$before"
    if [[ -n ${after_rev:-} ]]; then
        after=$(git rev-parse --short "$after_rev")
        after_bin=${PAIRED_AFTER_BIN:-}
        if [[ -z $after_bin ]]; then
            build_at "$after"
            after_bin=$built
        fi
    else
        after=$(tree_rev)
        netbench_here
    fi
}

# netbench_pair: `before` (REV from args) and `after` (this tree), their
# netbench binaries, and the machine line, all printed.
netbench_pair() {
    after_rev=
    netbench_sides
    machine_line
    echo "before: $before ($before_bin)   after: $after ($after_bin)"
}

# wrk's script of 1 KiB PUTs to /k/0 .. /k/63, in turn: the one netbench
# gives wrk.
put_lua=bench/netbench/put.lua

# halves I ORDER: the order pair I's halves run in. abba turns every even
# pair round, so whatever the run just ahead leaves behind (sockets in
# TIME_WAIT, a warm or cold cache, the host's drift) falls on both sides
# alike; ab always runs before first.
halves() {
    if [[ $2 == abba ]] && (($1 % 2 == 0)); then echo "after before"; else echo "before after"; fi
}
