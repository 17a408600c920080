#!/bin/bash
# scripts/streak.sh [-n RUNS] [-r REV] [-d DIR] [REPO]: what CI does
# (`bash .ci/run`: the README's `make` and `make test`), RUNS times in a
# row, each on a fresh clone of REV, to show the suite is not flaky.  Stops
# at the first failed run and keeps its clone and log; a passed run's clone
# is removed.  One line per run on stdout and in DIR/streak.log.
set -u

usage() {
	cat <<USAGE
usage: scripts/streak.sh [-n RUNS] [-r REV] [-d DIR] [REPO]
  -n RUNS  runs in a row (default 20)
  -r REV   the commit to test (default HEAD of REPO)
  -d DIR   where the clones and logs go (default /tmp/softrdma-streak)
  REPO     the repository to clone (default: this one)
Each run: git clone, then CI=true bash .ci/run with a 90-minute limit.
Exit 0 when all RUNS passed, 1 at the first failure, 2 on bad arguments.
USAGE
}

runs=20 rev=HEAD dir=/tmp/softrdma-streak
while getopts "n:r:d:h" o; do
	case $o in
	n) runs=$OPTARG ;;
	r) rev=$OPTARG ;;
	d) dir=$OPTARG ;;
	h) usage && exit 0 ;;
	*) usage >&2 && exit 2 ;;
	esac
done
shift $((OPTIND - 1))
[ $# -le 1 ] || { usage >&2 && exit 2; }
case $runs in '' | *[!0-9]* | 0) echo "streak.sh: RUNS must be a positive number, not '$runs'" >&2 && exit 2 ;; esac
repo=${1:-$(cd "$(dirname "$0")/.." && pwd)}
commit=$(git -C "$repo" rev-parse --verify --quiet "$rev^{commit}") ||
	{ echo "streak.sh: no commit '$rev' in $repo" >&2 && exit 2; }
mkdir -p "$dir" || exit 2

for ((i = 1; i <= runs; i++)); do
	clone=$dir/run-$i log=$dir/run-$i.log
	rm -rf "$clone"
	if ! git clone -q "$repo" "$clone" || ! git -C "$clone" checkout -q "$commit"; then
		echo "streak.sh: cannot clone $repo at $commit into $clone" >&2
		exit 2
	fi
	t0=$SECONDS
	(cd "$clone" && CI=true timeout 90m bash .ci/run) >"$log" 2>&1
	rc=$?
	line="$(date -u +%FT%TZ) run $i/$runs ${commit:0:12} $([ $rc = 0 ] && echo passed || echo "FAILED (exit $rc)") in $((SECONDS - t0)) s:$(grep -E 'tests passed|tests failed' "$log" | sed 's/^/ /' | tr '\n' ';')"
	echo "$line" | tee -a "$dir/streak.log"
	if [ $rc != 0 ]; then
		echo "streak.sh: run $i failed after $((i - 1)) clean runs in a row; clone $clone, log $log" >&2
		exit 1
	fi
	rm -rf "$clone"
done
echo "streak.sh: $runs clean runs in a row of ${commit:0:12}"
