#!/bin/bash
# tools/lowp_mpi.sh: one shard per MPI rank (or Slurm task), and rank 0 merges.
#
#   mpirun -n N tools/lowp_mpi.sh [--timeout S] DIR LOWP COMMAND... [RUN OPTIONS] [-- MERGE OPTIONS]
#   e.g. mpirun -n 2 tools/lowp_mpi.sh run1 build/lowp gpu conform --cases 20000 -- --report r.md --result r.json
#
# Every rank asks `LOWP rank` for its shard K/N (the one reading of the launcher's
# environment, tools/cli_parse.h lowp_cli_env_shard; 0/1 outside a launcher) and runs
#   LOWP COMMAND... RUN OPTIONS --shard K/N --result DIR/shard-K-of-N.json
# (the GPU commands select GPU local rank mod visible count, tools/gpu_rank.h). Rank 0 then
# waits, at most S seconds (default 3600; LOWP_MPI_TIMEOUT), for the other N-1 results and
# runs
#   LOWP COMMAND... --merge DIR/shard-0-of-N.json ... DIR/shard-(N-1)-of-N.json MERGE OPTIONS
# whose report and result are byte for byte those of one unsharded run (tools/shard.h).
# COMMAND is the words before the first option (conform, gpu conform, attn-sweep).
#
# Why a script and no MPI library: lowp keeps no MPI dependency, the shards already share
# nothing but their files, and a wait on files works the same under mpirun, srun and by
# hand. A result appears whole or not at all (lowp writes "<name>.tmp.<pid>" and renames),
# so rank 0 never reads a partial one under its final name. A rank whose shard cannot run
# (exit other than 0, a pass, or 1, a result with failures) leaves DIR/shard-K-of-N.failed
# holding its exit status, and rank 0 stops waiting and exits with it; the others exit 0
# once their result is written (a non-zero exit would make mpirun kill rank 0 mid-wait;
# the merged result carries every failure). Each rank removes its own stale files first;
# give each run a DIR of its own all the same (a shard of another run with other options
# would make the merge refuse the set; one of an identical run is identical). Across hosts
# DIR must be on a file system every rank shares.
#
# Exit: rank 0 the merge's status (0 all pass, 1 a failure), or a failed shard's; 2 on bad
# usage or a timeout (one line on stderr). Other ranks: 0, or their failed shard's status.
set -u

me=lowp_mpi.sh
die() { echo "$me: $*" >&2; exit 2; }

timeout=${LOWP_MPI_TIMEOUT:-3600}
if [ "${1-}" = "--timeout" ]; then
  [ $# -ge 2 ] || die "--timeout needs seconds"
  timeout=$2
  shift 2
fi
case $timeout in '' | *[!0-9]*) die "--timeout / LOWP_MPI_TIMEOUT: '$timeout' is not a whole number of seconds" ;; esac
[ $# -ge 3 ] || die "usage: $me [--timeout S] DIR LOWP COMMAND... [RUN OPTIONS] [-- MERGE OPTIONS]"
dir=$1 lowp=$2
# a path, or a name on PATH
lowp=$(command -v "$lowp") && [ -x "$lowp" ] || die "'$2' is not an executable lowp (a path or a name on PATH)"
shift 2

# COMMAND (the words before the first option), RUN OPTIONS (up to "--"), MERGE OPTIONS
words=() run=() merge=()
while [ $# -gt 0 ] && [ "${1#-}" = "$1" ]; do words+=("$1"); shift; done
[ ${#words[@]} -ge 1 ] || die "no lowp command before the options"
while [ $# -gt 0 ] && [ "$1" != "--" ]; do run+=("$1"); shift; done
[ $# -gt 0 ] && shift
merge=("$@")
for a in "${run[@]}"; do
  case $a in --shard | --result | --merge)
    die "$a is the script's (it gives each rank --shard K/N --result DIR/shard-K-of-N.json)" ;;
  esac
done

shard=$("$lowp" rank) || exit 2
case $shard in shard=*/*) ;; *) die "'$lowp rank' printed '$shard', not shard=K/N" ;; esac
shard=${shard#shard=}
k=${shard%/*} n=${shard#*/}

mkdir -p "$dir" || die "cannot make the folder '$dir'"
res=$dir/shard-$k-of-$n.json
rm -f "$res" "$dir/shard-$k-of-$n.failed"
# one shard of one (no launcher) is a whole run to lowp, and `lowp conform` alone writes
# its default report: the merge below writes the reports here
quiet=()
[ "$n" = 1 ] && [ "${words[*]}" = conform ] && quiet=(--no-report)
"$lowp" "${words[@]}" "${run[@]}" "${quiet[@]}" --shard "$k/$n" --result "$res"
rc=$?
if [ $rc -gt 1 ] || [ ! -f "$res" ]; then
  [ $rc -le 1 ] && rc=2
  # written whole and renamed, like the results: rank 0 never reads it half-written
  echo "$rc" > "$dir/shard-$k-of-$n.failed.tmp.$$" && mv -f "$dir/shard-$k-of-$n.failed.tmp.$$" "$dir/shard-$k-of-$n.failed"
  echo "$me: rank $k/$n: '$lowp ${words[*]}' exited $rc" >&2
  exit $rc
fi
[ "$k" -eq 0 ] || exit 0

# rank 0: wait for every shard's result (or a failure), then merge
files=()
waited=0
s=0
while [ $s -lt "$n" ]; do
  f=$dir/shard-$s-of-$n
  if [ -f "$f.failed" ]; then
    frc=$(cat "$f.failed")
    echo "$me: shard $s/$n failed (exit $frc): no merge" >&2
    exit "$frc"
  fi
  if [ -f "$f.json" ]; then
    files+=("$f.json")
    s=$((s + 1))
    continue
  fi
  [ $waited -lt "$timeout" ] ||
    die "rank 0 waited ${timeout} s for '$f.json' (shard $s of $n) after its own shard: not there (LOWP_MPI_TIMEOUT, --timeout)"
  sleep 1
  waited=$((waited + 1))
done
exec "$lowp" "${words[@]}" --merge "${files[@]}" "${merge[@]}"
