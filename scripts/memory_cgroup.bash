# A memory cgroup of one's own, to run a command with less memory than its data (sourced by
# bench/out_of_core.sh and tests/cli/out_of_core.sh; not a script of its own). cgroup v1 (the
# memory controller's memory.limit_in_bytes) or v2 (memory.max), whichever the machine has; root
# only. Page cache counts against the limit in both, so data larger than the limit cannot stay
# cached whatever the size of the machine.
#   cgroup_open NAME       creates /sys/fs/cgroup[/memory]/NAME; non-zero (and a line on stderr)
#                          where that cannot be done
#   cgroup_limit MIB       sets its limit
#   cgroup_run CMD ARGS... runs CMD inside it (its exit status)
#   cgroup_close           moves what is left inside out and removes it; safe to call twice (call
#                          it from an EXIT trap, so a failure leaves no cgroup behind)
#   drop_file_cache FILE... drops those files' pages from the page cache (dd's nocache), so that
#                          the next read of them comes from the disk

cgroup_dir=
cgroup_parent=
cgroup_limit_file=

cgroup_open() {
  if [ "$(id -u)" -ne 0 ]; then
    echo "memory cgroup: needs root" >&2
    return 1
  fi
  if [ -f /sys/fs/cgroup/memory/memory.limit_in_bytes ]; then
    cgroup_parent=/sys/fs/cgroup/memory
    cgroup_limit_file=memory.limit_in_bytes
  elif [ -f /sys/fs/cgroup/cgroup.subtree_control ] &&
    grep -qw memory /sys/fs/cgroup/cgroup.subtree_control; then
    cgroup_parent=/sys/fs/cgroup
    cgroup_limit_file=memory.max
  else
    echo "memory cgroup: no memory controller at /sys/fs/cgroup (v1 or v2)" >&2
    return 1
  fi
  mkdir "$cgroup_parent/$1" || return 1
  cgroup_dir=$cgroup_parent/$1
}

cgroup_limit() {
  echo $(($1 * 1048576)) > "$cgroup_dir/$cgroup_limit_file"
}

cgroup_run() {
  bash -c 'echo $$ > "$1" && shift && exec "$@"' _ "$cgroup_dir/cgroup.procs" "$@"
}

cgroup_close() {
  [ -n "$cgroup_dir" ] && [ -d "$cgroup_dir" ] || return 0
  local pid
  while read -r pid; do
    echo "$pid" > "$cgroup_parent/cgroup.procs" 2> /dev/null || true
  done < "$cgroup_dir/cgroup.procs"
  # A process that has just exited may still be counted in it for a moment.
  local try
  for try in $(seq 20); do
    rmdir "$cgroup_dir" 2> /dev/null || [ ! -d "$cgroup_dir" ] && break
    sleep 0.1
  done
  [ ! -d "$cgroup_dir" ] || echo "memory cgroup: could not remove $cgroup_dir" >&2
  cgroup_dir=
}

drop_file_cache() {
  local file
  for file in "$@"; do dd if="$file" iflag=nocache count=0 status=none; done
}
