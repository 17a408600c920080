#!/bin/bash
# Build the iWARP wire-layer fuzzer (libFuzzer + ASan + UBSan) and run it.
#
#   tests/fuzz/run_fuzz_iwarp.sh [SECONDS]     default 30
#
# Environment as run_fuzz.sh: SR_FUZZ_DIR (default build-fuzz in the source
# tree; corpus and crashes under iwarp/ there), SR_FUZZ_ISAL, CC.
set -euo pipefail

secs=${1:-30}
here=$(cd "$(dirname "$0")" && pwd)
root=$(cd "$here/../.." && pwd)
work=${SR_FUZZ_DIR:-$root/build-fuzz}/iwarp
cc=${CC:-clang}
samples=${SR_WIRE_SAMPLES:-$root/tests/data/wire-samples}

mkdir -p "$work/corpus" "$work/seeds" "$work/artifacts"

common=(-std=gnu11 -g -O1 -D_GNU_SOURCE -I"$root/src" -Wall -Wextra -Werror
	-Wno-unused-parameter -Wno-missing-field-initializers)
libs=(-lpthread)
if [[ "${SR_FUZZ_ISAL:-0}" == 1 ]]; then
	common+=(-DSR_HAVE_ISAL=1)
	libs+=(-lisal)
fi

echo "building $work/fuzz_iwarp_parse"
# the CRC32c lives in the RoCE wire code (icrc.c)
"$cc" "${common[@]}" -fsanitize=fuzzer,address,undefined -fno-sanitize-recover=undefined \
	-fno-omit-frame-pointer \
	"$root"/src/iwarp/wire/*.c "$root"/src/roce/wire/*.c "$here/fuzz_iwarp_parse.c" \
	-o "$work/fuzz_iwarp_parse" "${libs[@]}"

# Seeds: every TCP payload of the kernel siw captures.
"$cc" "${common[@]}" -DSR_FUZZ_SEED_MAIN "$here/fuzz_iwarp_parse.c" -o "$work/fuzz_seed"
shopt -s nullglob
captures=("$samples"/iwarp-kernel-siw/*.pcap)
if ((${#captures[@]})); then
	"$work/fuzz_seed" "$work/seeds" "${captures[@]}"
else
	echo "no captures under $samples/iwarp-kernel-siw; starting from an empty corpus" >&2
fi

echo "fuzzing for ${secs}s"
cd "$work"
exec ./fuzz_iwarp_parse -max_total_time="$secs" -max_len=4200 -timeout=10 \
	-print_final_stats=1 -artifact_prefix="$work/artifacts/" \
	"$work/corpus" "$work/seeds"
