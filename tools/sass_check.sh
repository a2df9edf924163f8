#!/usr/bin/env bash
# tools/sass_check.sh: check that an instruction occurs (or, with --absent, does not
# occur) in the SASS that nvcc produced for one GPU architecture.
#
#   tools/sass_check.sh [--cuobjdump PATH] [--absent] FILE ARCH INSTRUCTION [FUNCTION_REGEX]
#
#   FILE         an object file (.o), a static library (.a: every member is read), a shared
#                library or an executable holding a CUDA fatbin
#   ARCH         sm_100a, 100a or sm100a: the SASS of that cubin (cuobjdump -sass -arch)
#   INSTRUCTION  a SASS opcode with its modifiers, e.g. F2FP.F16.E2M1.UNPACK_B; it matches
#                an instruction whose opcode is exactly this or this followed by more
#                ".MODIFIERS" (so F2FP matches every F2FP.*), with or without a predicate
#   FUNCTION_REGEX  optional extended regex (grep -E); only functions whose mangled or
#                demangled (c++filt) name matches are searched
#
# Exit status: 0 the check holds (the count per function is printed); 1 it does not
# (one line says so); 2 usage or input error (unreadable file, no SASS for ARCH, no
# function matching the regex: a check that looked at nothing never passes, --absent
# included); 77 no usable cuobjdump (ctest's SKIP_RETURN_CODE).
#
# cuobjdump is taken from, in this order: --cuobjdump PATH, $LOWP_CUOBJDUMP, PATH,
# /usr/local/cuda/bin, and the PyPI packages nvidia-cuda-cuobjdump / nvidia-cuda-nvdisasm
# in the project's .venv (tools/setup.sh installs them). cuobjdump needs nvdisasm to print
# SASS; it looks beside itself, on PATH and in $NVDISASM_PATH, and a cuobjdump without a
# reachable nvdisasm counts as unusable (an explicitly given one is an error instead).
set -euo pipefail

prog=sass_check
root=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
usage() {
  echo "usage: tools/sass_check.sh [--cuobjdump PATH] [--absent] FILE ARCH INSTRUCTION [FUNCTION_REGEX]" >&2
  exit 2
}
die() { echo "$prog: $*" >&2; exit 2; }

explicit=""
absent=0
while [ $# -gt 0 ]; do
  case "$1" in
    --cuobjdump) [ $# -ge 2 ] || usage; explicit=$2; shift 2 ;;
    --cuobjdump=*) explicit=${1#--cuobjdump=}; shift ;;
    --absent) absent=1; shift ;;
    -h|--help) sed -n '2,26p' "${BASH_SOURCE[0]}" | sed 's/^# \{0,1\}//'; exit 0 ;;
    --) shift; break ;;
    -*) echo "$prog: unknown option $1" >&2; usage ;;
    *) break ;;
  esac
done
[ $# -eq 3 ] || [ $# -eq 4 ] || usage
file=$1 arch=$2 instr=$3 fregex=${4:-}

[ -n "$file" ] || die "no FILE given (an empty object list from CMake?)"
if [ ! -f "$file" ] || [ ! -r "$file" ]; then die "$file: no such readable file (not built yet?)"; fi
case "$arch" in
  sm_[0-9]*) ;;
  sm[0-9]*) arch="sm_${arch#sm}" ;;
  [0-9]*) arch="sm_$arch" ;;
  *) die "ARCH '$arch' is not of the form sm_100a / 100a" ;;
esac
[[ "$arch" =~ ^sm_[0-9]+[a-z]?$ ]] || die "ARCH '$arch' is not of the form sm_100a / 100a"
[[ "$instr" =~ ^[A-Z0-9_][A-Z0-9_.]*$ ]] || die "INSTRUCTION '$instr' is not a SASS opcode such as F2FP.F16.E2M1.UNPACK_B"
if [ -n "$fregex" ]; then
  # grep -E exits 2 on a malformed regex: catch it here rather than matching nothing.
  rc=0; printf 'x\n' | grep -E -q -- "$fregex" 2>/dev/null || rc=$?
  [ "$rc" -le 1 ] || die "FUNCTION_REGEX '$fregex' is not a valid extended regex"
fi

# ---------------------------------------------------------------- find cuobjdump
# Usable: executable, and nvdisasm reachable the way cuobjdump looks for it.
has_nvdisasm() {
  [ -x "$(dirname "$1")/nvdisasm" ] && return 0
  command -v nvdisasm >/dev/null 2>&1 && return 0
  [ -n "${NVDISASM_PATH:-}" ] && { [ -x "$NVDISASM_PATH" ] || [ -x "$NVDISASM_PATH/nvdisasm" ]; } && return 0
  return 1
}
cuobjdump=""
if [ -n "$explicit" ]; then
  case "$explicit" in */*) ;; *) explicit=$(command -v "$explicit" 2>/dev/null || echo "$explicit") ;; esac
  [ -x "$explicit" ] || die "--cuobjdump $explicit: not an executable file"
  has_nvdisasm "$explicit" || die "--cuobjdump $explicit: no nvdisasm beside it, on PATH or in NVDISASM_PATH"
  cuobjdump=$explicit
else
  candidates=()
  [ -n "${LOWP_CUOBJDUMP:-}" ] && candidates+=("$LOWP_CUOBJDUMP")
  c=$(command -v cuobjdump 2>/dev/null || true); [ -n "$c" ] && candidates+=("$c")
  candidates+=(/usr/local/cuda/bin/cuobjdump)
  # nvidia-cuda-cuobjdump wheels: nvidia/cu13/bin (CUDA 13), nvidia/cuda_cuobjdump/bin (12).
  shopt -s nullglob
  for c in "$root"/.venv/lib/python3*/site-packages/nvidia/cu[0-9]*/bin/cuobjdump \
           "$root"/.venv/lib/python3*/site-packages/nvidia/cuda_cuobjdump/bin/cuobjdump; do
    candidates+=("$c")
  done
  shopt -u nullglob
  for c in "${candidates[@]}"; do
    if [ -x "$c" ] && has_nvdisasm "$c"; then cuobjdump=$c; break; fi
  done
  if [ -z "$cuobjdump" ]; then
    echo "$prog: SKIP: no usable cuobjdump (with nvdisasm) in --cuobjdump, \$LOWP_CUOBJDUMP, PATH, /usr/local/cuda/bin or $root/.venv; tools/setup.sh installs one from PyPI" >&2
    exit 77
  fi
fi
# The venv's nvdisasm sits beside its cuobjdump; put that first for cuobjdump's lookup.
PATH="$(dirname "$cuobjdump"):$PATH"
export PATH

tmp=$(mktemp -d "${TMPDIR:-/tmp}/sass_check.XXXXXX")
trap 'rm -rf "$tmp"' EXIT

# ---------------------------------------------------------------- dump
rc=0
"$cuobjdump" -sass -arch "$arch" "$file" >"$tmp/sass" 2>"$tmp/err" || rc=$?
if [ "$rc" != 0 ]; then
  die "$cuobjdump -sass -arch $arch $file failed (status $rc): $(grep -v '^$' "$tmp/err" | head -n 1)"
fi
if grep -q 'fatal' "$tmp/err"; then
  die "cuobjdump: $(grep -m1 'fatal' "$tmp/err")"
fi

# Split the dump into one record per function: member<TAB>function<TAB>count, where the
# member is the archive member ("member LIB:OBJ:" lines of an .a; empty otherwise), and
# only code sections for exactly $arch are read ("code for sm_100a").
awk -v arch="$arch" -v instr="$instr" -v file="$file" '
  function flush() { if (fn != "") printf "%s\t%s\t%d\n", member, fn, n; fn = ""; n = 0 }
  BEGIN { member = ""; fn = ""; n = 0; inarch = 0; sections = 0 }
  /^member / {   # "member /path/lib.a:obj.o:" -> "lib.a:obj.o"
    flush(); member = substr($0, 8); sub(/:$/, "", member); sub(/.*\//, "", member)
    inarch = 0; next }
  $1 == "code" && $2 == "for" {
    flush(); inarch = ($3 == arch); if (inarch) sections++; next }
  /^[ \t]*Function : / { flush(); if (inarch) { fn = $3 } next }
  fn != "" && $1 ~ /^\/\*[0-9a-f]+\*\/$/ {
    op = $2; if (op ~ /^@/) op = $3
    if (op == instr || index(op, instr ".") == 1) n++
  }
  END { flush(); if (sections == 0) exit 3 }
' "$tmp/sass" >"$tmp/funcs" || {
  rc=$?
  [ "$rc" = 3 ] && die "$file has no $arch SASS (was it built for $arch?)"
  die "could not parse cuobjdump output (awk status $rc)"
}
[ -s "$tmp/funcs" ] || die "$file has $arch code but no functions in it"

# Demangled names beside the mangled ones (c++filt from binutils, when present).
cut -f2 "$tmp/funcs" >"$tmp/mangled"
if command -v c++filt >/dev/null 2>&1; then
  c++filt <"$tmp/mangled" >"$tmp/demangled"
else
  cp "$tmp/mangled" "$tmp/demangled"
fi
paste "$tmp/funcs" "$tmp/demangled" >"$tmp/table"   # member, mangled, count, demangled

if [ -n "$fregex" ]; then
  { grep -n -E -- "$fregex" "$tmp/mangled" || true; grep -n -E -- "$fregex" "$tmp/demangled" || true; } |
    cut -d: -f1 | sort -n -u >"$tmp/lines"
  awk 'NR == FNR { keep[$1] = 1; next } keep[FNR]' "$tmp/lines" "$tmp/table" >"$tmp/sel"
  [ -s "$tmp/sel" ] || die "no $arch function in $file matches /$fregex/ ($(wc -l <"$tmp/table") functions there)"
  what="functions matching /$fregex/"
else
  cp "$tmp/table" "$tmp/sel"
  what="all functions"
fi

nfun=$(wc -l <"$tmp/sel")
total=$(awk -F'\t' '{ s += $3 } END { print s + 0 }' "$tmp/sel")
where="$arch SASS of $(basename "$file") ($what: $nfun)"
# Per-function counts, those with the instruction first.
awk -F'\t' -v i="$instr" '$3 > 0 {
    d = ($4 != $2) ? "  [" $4 "]" : ""
    m = ($1 != "") ? $1 ": " : ""
    printf "  %6d x %s in %s%s%s\n", $3, i, m, $2, d }' "$tmp/sel"

if [ "$absent" = 1 ]; then
  if [ "$total" = 0 ]; then
    echo "$prog: OK: $instr absent from the $where"
    exit 0
  fi
  echo "$prog: FAIL: $instr occurs $total times in the $where, expected none"
  exit 1
fi
if [ "$total" -gt 0 ]; then
  echo "$prog: OK: $instr occurs $total times in the $where"
  exit 0
fi
echo "$prog: FAIL: $instr not found in the $where"
exit 1
