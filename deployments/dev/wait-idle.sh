# Sourced by the benchmarks that alternate runs (bench-convoy.sh, bench-tuning.sh): wait_idle waits
# until the CPUs are at least 90% idle over 3 s, for idle_wait seconds at most, then sets run_idle
# (the idle share of those 3 s) and run_load (the 1-minute load average) for the run's record.
# shellcheck shell=bash
wait_idle() {
  local deadline=$((SECONDS + idle_wait)) idle
  while :; do
    idle=$(vmstat 3 2 | awk 'NR == 2 { for (i = 1; i <= NF; i++) if ($i == "id") c = i } NR == 4 { print $c }')
    if [ "$idle" -ge 90 ] || [ "$SECONDS" -ge "$deadline" ]; then break; fi
    echo "   waiting for idle CPUs ($idle% idle over 3 s)"
  done
  run_idle=$idle
  run_load=$(cut -d ' ' -f 1 /proc/loadavg)
}
