# Helpers the bench scripts source.

# median: the median of the numbers on stdin, separated by spaces or newlines (of an even count, the
# mean of the middle two).
median() {
  tr ' ' '\n' | grep . | sort -g |
    awk '{ v[NR] = $1 } END { print (NR % 2 ? v[(NR + 1) / 2] : (v[NR / 2] + v[NR / 2 + 1]) / 2) }'
}
