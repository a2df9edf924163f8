#!/bin/sh
# tests/fuzz/run_fuzz.sh BINARY SEEDS WORKDIR SECONDS DICT
# Runs one libFuzzer target for a bounded time on its seed corpus; passes when no crash,
# leak, timeout or sanitizer report is found. Exit 77 (CTest skip) when the target was not
# built because no clang with libFuzzer was found.
set -u
bin=$1 seeds=$2 work=$3 secs=$4 dict=$5
if [ -z "$bin" ] || [ ! -x "$bin" ]; then
  echo "fuzz: no clang with libFuzzer was found at configure time; skipped"
  exit 77
fi
rm -rf "$work"
mkdir -p "$work/corpus" "$work/artifacts"
# The first directory collects new inputs (build tree); the seeds are only read.
# -error_exitcode=1: libFuzzer's default, 77, would read as a CTest skip.
"$bin" -max_total_time="$secs" -timeout=10 -rss_limit_mb=2048 -malloc_limit_mb=512 \
  -max_len=65536 -error_exitcode=1 -timeout_exitcode=1 -print_final_stats=1 \
  -artifact_prefix="$work/artifacts/" -dict="$dict" "$work/corpus" "$seeds"
rc=$?
if [ "$rc" -ne 0 ]; then
  echo "fuzz: $bin failed (exit $rc); reproducer(s) in $work/artifacts/:"
  ls -l "$work/artifacts/"
fi
exit "$rc"
