#!/bin/bash
# Build the RoCEv2 wire-layer fuzzer (libFuzzer + ASan + UBSan) and run it.
#
#   tests/fuzz/run_fuzz.sh [SECONDS]     default 30
#
# Environment:
#   SR_FUZZ_DIR   work directory (default: build-fuzz in the source tree);
#                 the corpus there grows across runs, crashes land there too
#   SR_FUZZ_ISAL  1 = link ISA-L's CRC as production builds do; by default
#                 the portable slice-by-8 CRC is used, because ISA-L's
#                 assembly is invisible to the sanitizers
#   CC            clang by default
set -euo pipefail

secs=${1:-30}
here=$(cd "$(dirname "$0")" && pwd)
root=$(cd "$here/../.." && pwd)
work=${SR_FUZZ_DIR:-$root/build-fuzz}
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

echo "building $work/fuzz_roce_parse"
"$cc" "${common[@]}" -fsanitize=fuzzer,address,undefined -fno-sanitize-recover=undefined \
	-fno-omit-frame-pointer \
	"$root"/src/roce/wire/*.c "$here/fuzz_roce_parse.c" -o "$work/fuzz_roce_parse" "${libs[@]}"

# Seeds: every RoCE datagram of the kernel rxe captures.
"$cc" "${common[@]}" -DSR_FUZZ_SEED_MAIN "$here/fuzz_roce_parse.c" -o "$work/fuzz_seed"
shopt -s nullglob
captures=("$samples"/roce-kernel-rxe/*.pcap "$samples"/roce-kernel-rxe/*.pcapng)
if ((${#captures[@]})); then
	"$work/fuzz_seed" "$work/seeds" "${captures[@]}"
else
	echo "no captures under $samples/roce-kernel-rxe; starting from an empty corpus" >&2
fi

echo "fuzzing for ${secs}s"
cd "$work"
exec ./fuzz_roce_parse -max_total_time="$secs" -max_len=4200 -timeout=10 \
	-print_final_stats=1 -artifact_prefix="$work/artifacts/" \
	"$work/corpus" "$work/seeds"
