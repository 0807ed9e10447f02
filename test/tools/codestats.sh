#!/bin/sh
# codestats — the figures issue 11 tracks, for production code (src/ and roles/):
#   - cJSON_ calls outside the codecs and the store (a codec is a file under src/model/, or a file
#     whose job is one JSON record or document: see CODEC_FILES below; comment lines, which
#     start with / * or *, do not count);
#   - functions over 80 and over 100 lines (a function body runs from a '{' in column 0 to the next
#     '}' in column 0, which is how clang-format lays out every function here);
#   - files over 800 lines.
# Usage: sh test/tools/codestats.sh [-v]   (-v lists the offenders)
set -eu
cd "$(dirname "$0")/../.."
verbose=${1:-}
# Files that are codecs by nature (one JSON document each), besides src/model/ and src/store/.
CODEC_FILES='src/base/json.c src/base/yaml.c src/pbjson/pbjson.c src/kube/codec.c src/kube/kubeconfig.c'
files=$(git ls-files 'src/*.c' 'src/*.h' 'roles/*.c' 'roles/*.h' 2>/dev/null; \
        git ls-files --others --exclude-standard 'src/*.c' 'src/*.h' 'roles/*.c' 'roles/*.h')
cj_out=0
cj_list=
for f in $files; do
	case "$f" in src/model/* | src/store/*) continue ;; esac
	skip=0
	for c in $CODEC_FILES; do [ "$f" = "$c" ] && skip=1; done
	[ $skip = 1 ] && continue
	n=$(grep -v '^[[:space:]]*\(/\*\|\*\)' "$f" | grep -o 'cJSON_[A-Za-z]*' | wc -l)
	if [ "$n" -gt 0 ]; then
		cj_out=$((cj_out + n))
		cj_list="$cj_list $f:$n"
	fi
done
# shellcheck disable=SC2086
awk -v verbose="$verbose" '
FNR == 1 { start = 0 }
/^\{/ { start = FNR; name = prev }
/^\}/ && start { len = FNR - start + 1; nf++
	if (len > 80) { over80++ ; if (verbose) printf "  %4d lines  %s:%d %s\n", len, FILENAME, start, name }
	if (len > 100) over100++
	if (len > longest) { longest = len; lname = FILENAME ":" start }
	start = 0 }
{ if ($0 !~ /^[{}]/ && $0 ~ /\(/) prev = $0 }
END { printf "functions: %d; over 80 lines: %d; over 100 lines: %d; longest: %d (%s)\n", nf, over80, over100, longest, lname }
' $(echo "$files" | grep '\.c$')
big=0
for f in $files; do
	n=$(wc -l < "$f")
	if [ "$n" -gt 800 ]; then
		big=$((big + 1))
		[ -n "$verbose" ] && echo "  $n lines  $f"
	fi
done
echo "files over 800 lines: $big"
echo "cJSON_ calls outside codecs and the store: $cj_out"
if [ -n "$verbose" ]; then for x in $cj_list; do echo "  $x"; done; fi
