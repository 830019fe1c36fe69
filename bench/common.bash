# Helpers the bench scripts source.

# median: the median of the numbers on stdin, separated by spaces or newlines (of an even count, the
# mean of the middle two).
median() {
  tr ' ' '\n' | grep . | sort -g |
    awk '{ v[NR] = $1 } END { print (NR % 2 ? v[(NR + 1) / 2] : (v[NR / 2] + v[NR / 2 + 1]) / 2) }'
}

# wanted NAME: whether the data set NAME is to run ($SETS: names, default all).
wanted() { [ -z "${SETS:-}" ] || [[ " $SETS " == *" $1 "* ]]; }

# half_split_sets DATA SEEDS: the sets split in seeded halves, as NAME:FILE:SEEDS lines: w8a (one
# seed) and every UCI set of DATA/uci, those wanted.
half_split_sets() {
  wanted w8a && [ -f "$1/w8a/w8a" ] && echo "w8a:$1/w8a/w8a:1"
  local f
  for f in "$1"/uci/*.libsvm; do
    wanted "$(basename "$f" .libsvm)" && echo "$(basename "$f" .libsvm):$f:$2"
  done
  return 0
}
