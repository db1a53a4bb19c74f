#!/usr/bin/env bash
# Tests scripts/gpu_check.sh without a GPU: with fake gdrotrain, cuda.test
# and python programs it must exit 0 when every step passes, and 1 — still
# running the later steps — when any one step fails.
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
root=$(dirname "$here")
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
# Each fake fails when its name (or its first argument) is in $FAIL.
for prog in gdrotrain cuda.test python; do
	cat >"$tmp/$prog" <<FAKE
#!/usr/bin/env bash
echo "fake $prog \$*" >>"\$FAKE_LOG"
case " \${FAIL:-} " in *" $prog "*|*" $prog:\${1:-} "*) echo "fake $prog fails"; exit 7;; esac
exit 0
FAKE
	chmod +x "$tmp/$prog"
done
check() { # check WANT_RC FAIL...
	local want=$1 rc=0
	shift
	: >"$tmp/log"
	(cd "$root" && FAIL="$*" FAKE_LOG="$tmp/log" OUT="$tmp/out" GDROTRAIN="$tmp/gdrotrain" CUDA_TEST="$tmp/cuda.test" \
		PYTHON="$tmp/python" bash scripts/gpu_check.sh >"$tmp/stdout" 2>&1) || rc=$?
	if [ "$rc" != "$want" ]; then
		echo "test_gpu_check: FAIL=\"$*\": exit $rc, want $want"
		cat "$tmp/stdout"
		exit 1
	fi
	# Every step ran, whatever failed before it.
	if ! grep -q "fake gdrotrain bench" "$tmp/log"; then
		echo "test_gpu_check: FAIL=\"$*\": the last step did not run"
		exit 1
	fi
}
check 0
check 1 cuda.test
check 1 gdrotrain:cuda-info
check 1 gdrotrain:logits
check 1 python
grep -q "FAILED (7)" "$tmp/out/steps.txt"
echo "test_gpu_check: ok (a failing step makes gpu_check.sh exit 1; all passing exits 0)"
