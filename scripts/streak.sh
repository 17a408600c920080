#!/bin/bash
# scripts/streak.sh [-n RUNS] [-r REV | -f] [-d DIR] [REPO]: what CI does
# (`bash .ci/run`: the README's `make` and `make test`), RUNS times in a
# row, each on a fresh clone, to show the suite is not flaky.  Stops at
# the first failed run and keeps its clone and log; a passed run's clone
# is removed, its log kept.  One line per run on stdout and in
# DIR/streak.log.
set -u

usage() {
	cat <<USAGE
usage: scripts/streak.sh [-n RUNS] [-r REV | -f] [-d DIR] [REPO]
  -n RUNS  runs in a row (default 20)
  -r REV   the commit to test, resolved once (default HEAD of REPO)
  -f       follow: each run tests REPO's HEAD as it is when the run starts
  -d DIR   where the clones and logs go (default /tmp/softrdma-streak)
  REPO     the repository to clone (default: this one)
Each run: git clone, then CI=true bash .ci/run with a 90-minute limit.
Logs are DIR/run-N-COMMIT-TIME.log, never overwritten by a later streak.
While the file DIR/pause exists, no new run starts (the one under way
finishes): a quiet machine for a measurement without breaking the count.
Exit 0 when all RUNS passed, 1 at the first failure, 2 on bad arguments.
USAGE
}

runs=20 rev=HEAD dir=/tmp/softrdma-streak follow=
while getopts "n:r:fd:h" o; do
	case $o in
	n) runs=$OPTARG ;;
	r) rev=$OPTARG ;;
	f) follow=1 ;;
	d) dir=$OPTARG ;;
	h) usage && exit 0 ;;
	*) usage >&2 && exit 2 ;;
	esac
done
shift $((OPTIND - 1))
[ $# -le 1 ] || { usage >&2 && exit 2; }
case $runs in '' | *[!0-9]* | 0) echo "streak.sh: RUNS must be a positive number, not '$runs'" >&2 && exit 2 ;; esac
repo=${1:-$(cd "$(dirname "$0")/.." && pwd)}
resolve() {
	git -C "$repo" rev-parse --verify --quiet "$1^{commit}" ||
		{ echo "streak.sh: no commit '$1' in $repo" >&2 && exit 2; }
}
commit=$(resolve "$rev") || exit 2
mkdir -p "$dir" || exit 2

for ((i = 1; i <= runs; i++)); do
	if [ -e "$dir/pause" ]; then
		echo "streak.sh: paused before run $i ($dir/pause exists)" >&2
		while [ -e "$dir/pause" ]; do sleep 5; done
	fi
	[ -n "$follow" ] && { commit=$(resolve HEAD) || exit 2; }
	clone=$dir/run-$i log=$dir/run-$i-${commit:0:12}-$(date -u +%Y%m%dT%H%M%SZ).log
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
if [ -n "$follow" ]; then
	echo "streak.sh: $runs clean runs in a row, following HEAD (last ${commit:0:12})"
else
	echo "streak.sh: $runs clean runs in a row of ${commit:0:12}"
fi
