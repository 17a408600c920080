#!/bin/bash
# The man pages against what they describe:
#  - every page renders with groff warnings on (-ww) without a warning, and
#    `man` reads it;
#  - softrdma-run(1), softrdma-cfg(8), softrdmad(8): every line of the
#    program's --help text is in the page (the build makes the page from
#    the help text: a stale or hand-edited page fails here);
#  - softrdma.conf(5): every key the page lists is accepted by the parser
#    with the values it names, and every key the parser knows is listed;
#  - every SOFTRDMA_* environment variable the sources read is documented
#    in softrdma-run(1) or softrdmad(8);
#  - every counter `softrdma-cfg statistic` prints is in softrdma-cfg(8).
. "$(dirname "$0")/../conformance/lib.sh"
sr_init
sr_need_cmd groff man
man_dir=$SR_BUILD_DIR/man
bin=$SR_BUILD_DIR/bin

# render PAGE: plain ASCII, one very long line per paragraph, no hyphenation
render() {
	groff -man -Tascii -rLL=2000n -rHY=0 -P-cbou "$1" 2>/dev/null
}
# squeeze: one line of words
squeeze() { tr -s ' \t\n' '   ' | sed 's/^ //; s/ $//'; }

for page in softrdma-run.1 softrdma-cfg.8 softrdmad.8 softrdma-demo.1 softrdma.conf.5; do
	f=$man_dir/$page
	if [ ! -f "$f" ]; then
		sr_fail "$page was not built"
		continue
	fi
	warn=$(groff -man -Tutf8 -ww -z "$f" 2>&1)
	[ -z "$warn" ] && sr_pass "$page: groff -ww finds nothing to warn about" || sr_fail "$page: $warn"
	sr_run "$page: man -l reads it" -- env MANWIDTH=80 man -l "$f" &&
		sr_expect "$SR_OUT" '^NAME' "  $page: has a NAME section"
done

# --help line by line in the page
for pair in softrdma-run:softrdma-run.1 softrdma-cfg:softrdma-cfg.8 softrdmad:softrdmad.8 softrdma-demo:softrdma-demo.1; do
	prog=${pair%%:*} page=$man_dir/${pair#*:}
	[ -f "$page" ] || continue
	# the page is made from the installed variant of softrdma-run; their
	# help texts are the same
	"$bin/$prog" --help >"$SR_TMP/help" 2>&1 || sr_fail "$prog --help exits non-zero"
	text=" $(render "$page" | squeeze) "
	missing=0 n=0
	while IFS= read -r line; do
		l=$(printf '%s\n' "$line" | sed 's/^Usage: //' | squeeze)
		[ -z "$l" ] && continue
		# a heading of the help text ("Commands:") is a section of the page
		case $line in [!\ ]*:) l=$(echo "${l%:}" | tr a-z A-Z) ;; esac
		n=$((n + 1))
		case $text in
		*" $l "* | *" $l"*) ;;
		*)
			missing=$((missing + 1))
			echo "    not in ${page##*/}: '$l'"
			;;
		esac
	done <"$SR_TMP/help"
	[ "$n" -gt 3 ] && [ "$missing" -eq 0 ] && sr_pass "$prog --help: all $n lines are in ${page##*/}" ||
		sr_fail "$prog --help: $missing of $n lines missing from ${page##*/} (rebuild, or edit the help text)"
done

# softrdma.conf(5) keys against the parser
conf_page=$man_dir/softrdma.conf.5
src_conf=$SR_SOURCE_DIR/src/common/conf.c
doc_keys=$(sed -n '/^\.SH KEYS/,/^\.SH /{/^\.BR [a-z]* " = "/s/^\.BR \([a-z]*\) .*/\1/p}' "$conf_page" | sort -u)
src_keys=$(grep -o 'strcmp(key, "[a-z_]*")' "$src_conf" | sed 's/.*"\(.*\)")/\1/' | sort -u)
[ -n "$doc_keys" ] && [ "$doc_keys" = "$src_keys" ] &&
	sr_pass "softrdma.conf(5) lists exactly the parser's keys: $(echo $doc_keys)" ||
	sr_fail "softrdma.conf(5) keys '$(echo $doc_keys)' vs conf.c's '$(echo $src_keys)'"
# every documented value is accepted: "key = v1 | v2" -> one file per value
cfg_ok() { SOFTRDMA_CONF=$1 "$bin/softrdma-cfg" status >/dev/null 2>"$SR_TMP/cfg.err"; }
sed -n '/^\.SH KEYS/,/^\.SH /{s/^\.BR \([a-z]*\) " = " \(.*\)/\1 \2/p}' "$conf_page" | while read -r key vals; do
	case $vals in *IFNAME*) vals=lo ;; *SPEC*) vals='drop=1%,seed=3' ;; esac
	for v in $(echo "$vals" | tr -d '"' | tr '|' ' '); do
		if [ "$key" = crc ]; then
			printf 'crc = %s\n[rxe0]\nnetdev = lo\n' "$v" >"$SR_TMP/k.conf"
		else
			printf '[rxe0]\nnetdev = lo\n' >"$SR_TMP/k.conf"
			[ "$key" = netdev ] || printf '%s = %s\n' "$key" "$v" >>"$SR_TMP/k.conf"
		fi
		cfg_ok "$SR_TMP/k.conf" && echo "ok $key = $v" || echo "FAIL $key = $v: $(cat "$SR_TMP/cfg.err")"
	done
done >"$SR_TMP/values"
grep -q '^ok' "$SR_TMP/values" && ! grep -q '^FAIL' "$SR_TMP/values" &&
	sr_pass "every documented value is accepted ($(grep -c '^ok' "$SR_TMP/values") key/value pairs)" ||
	{ sr_fail "documented values rejected:"; grep '^FAIL' "$SR_TMP/values"; }
printf '[rxe0]\nnetdev = lo\nbogus = 1\n' >"$SR_TMP/bad.conf"
cfg_ok "$SR_TMP/bad.conf" && sr_fail "an undocumented key is accepted" ||
	sr_pass "an undocumented key is rejected: $(head -1 "$SR_TMP/cfg.err")"

# environment variables read by the sources, documented in the pages
env_doc=" $(cat "$man_dir/softrdma-run.1" "$man_dir/softrdmad.8" | sed 's/\\-/-/g') "
undoc=
for v in $(grep -rhoE 'getenv\("SOFTRDMA_[A-Z0-9_]+"\)' "$SR_SOURCE_DIR/src" | sed 's/getenv("\(.*\)")/\1/' | sort -u); do
	case $env_doc in *"$v"*) ;; *) undoc="$undoc $v" ;; esac
done
[ -z "$undoc" ] && sr_pass "every SOFTRDMA_* variable the sources read is in softrdma-run(1) or softrdmad(8)" ||
	sr_fail "undocumented environment variables (add them to man/softrdma-run.1.in):$undoc"
# the counters (src/common/stats.c, sr_stat_names) in softrdma-cfg(8)
cfg_text=" $(render "$man_dir/softrdma-cfg.8" | tr -s ' ,\t\n' '    ') "
counters=$(sed -n '/^const char \*const sr_stat_names/,/^};/s/.*= "\([a-z_]*\)".*/\1/p' "$SR_SOURCE_DIR/src/common/stats.c")
undoc=
for c in $counters; do
	case $cfg_text in *" $c "*) ;; *) undoc="$undoc $c" ;; esac
done
[ -n "$counters" ] && [ -z "$undoc" ] && sr_pass "softrdma-cfg(8) names all $(echo $counters | wc -w) counters" ||
	sr_fail "counters missing from softrdma-cfg(8) (man/softrdma-cfg.8.in, COUNTERS):${undoc:- none found in stats.c}"
sr_finish
