# SPDX-License-Identifier: MIT
# Sourced by scripts/demo and the benchmarks (not run): start infeedd from
# ${BUILD:-build} on a copy of the default catalogue (packaging/infeedd.conf)
# on a private socket in a fresh temporary directory, wait until it
# answers, and stop it and remove the directory on exit.  Sets $run (the
# directory, free for the caller's files too), $conf (the copy: add a
# dataset, then `kill -HUP $pid`), $pid, $sock and $build.  Run from the
# repository's root.
build=${BUILD:-build}
run=$(mktemp -d "${TMPDIR:-/tmp}/infeed.XXXXXX")
sock="$run/infeedd.sock"
conf="$run/infeedd.conf"
cp packaging/infeedd.conf "$conf"
"$build/daemon/infeedd" --config "$conf" --socket "$sock" \
    2>"$run/infeedd.log" &
pid=$!
trap 'kill $pid 2>/dev/null; wait $pid 2>/dev/null; rm -rf "$run"' EXIT
trap 'exit 130' INT TERM

i=0
until "$build/client/infeedctl" --socket "$sock" datasets >/dev/null 2>&1; do
	i=$((i + 1))
	if [ $i -gt 100 ] || ! kill -0 $pid 2>/dev/null; then
		echo "infeedd did not start; its log:" >&2
		cat "$run/infeedd.log" >&2
		exit 1
	fi
	sleep 0.1
done
