#!/bin/bash
# Runs the fuzzers of a -Dfuzz=true build one after another, each for RTCTL_FUZZ_SECONDS (default 60).
#   tests/fuzz/run.sh BUILD_DIR OUT_DIR [NAME...]     (NAME: cpulist, journal, ...; all by default)
# Each starts from its checked-in seeds, tests/fuzz/corpus/NAME/, which stay as they are; what it finds
# goes to OUT_DIR/NAME/, its output to OUT_DIR/NAME.log. A crash, leak or timeout is kept as
# OUT_DIR/NAME-crash-* (or -leak-, -timeout-, -oom-) and fails the run. Prints one line a fuzzer,
# "fuzz-NAME: ok" or "fuzz-NAME: FAILED (...)" (how many inputs ran goes to stderr), and exits 1 when
# any failed.
set -u
[ $# -ge 2 ] || { echo "usage: $0 BUILD_DIR OUT_DIR [NAME...]" >&2; exit 2; }
here=$(cd "$(dirname "$0")" && pwd)
build=$1 out=$2
shift 2
seconds=${RTCTL_FUZZ_SECONDS:-60}
names=("$@")
if [ ${#names[@]} -eq 0 ]; then
  for f in "$here"/fuzz-*.c; do names+=("$(basename "$f" .c | sed 's/^fuzz-//')"); done
fi
mkdir -p "$out"
failed=0
for n in "${names[@]}"; do
  exe=$build/tests/fuzz/fuzz-$n
  if [ ! -x "$exe" ]; then
    echo "fuzz-$n: FAILED (not built: $exe; meson setup with CC=clang -Dfuzz=true)"
    failed=1
    continue
  fi
  rm -rf "${out:?}/$n" "$out/$n".log "$out/$n"-*
  mkdir -p "$out/$n"
  if "$exe" "$out/$n" "$here/corpus/$n" -max_total_time="$seconds" -timeout=30 \
      -artifact_prefix="$out/$n-" -print_final_stats=1 > "$out/$n.log" 2>&1; then
    echo "fuzz-$n: ok"
    runs=$(sed -n 's/^stat::number_of_executed_units: *//p' "$out/$n.log")
    echo "fuzz-$n: ${runs:-?} inputs in ${seconds} s, no crash" >&2
  else
    kept=$(ls "$out/$n"-* 2>/dev/null | xargs)
    echo "fuzz-$n: FAILED (input kept: ${kept:-none}; see $out/$n.log; replay: $exe INPUT)"
    failed=1
  fi
done
exit $failed
