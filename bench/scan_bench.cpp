// One epoch scan of a shard directory, the way training reads it (seeded shuffle, windows of
// blocks, decode on worker threads) with no learning: the reader's own ceiling.
// usage: scan_bench DIR [--threads N] [--no-shuffle] [--scale] [--lockstep] [--epochs E]
//                     [--read-ahead MIB]
// (--scale: values divided by their feature's max |value|, as train --scale maxabs reads them;
// --lockstep: one window at a time, decoded by all threads, as the CPM reads; --read-ahead: the I/O
// stage's budget, as train's option)
#include <chrono>
#include <cstdio>
#include <cstring>
#include <string>

#include "engine/errors.h"
#include "io/read_ahead.h"
#include "io/shards.h"

int main(int argc, char** argv) {
  using namespace polymargin;
  if (argc < 2) {
    std::fprintf(
        stderr,
        "usage: scan_bench DIR [--threads N] [--no-shuffle] [--scale] [--lockstep] [--epochs E] "
        "[--read-ahead MIB]\n");
    return 2;
  }
  io::ReadOptions options;
  int epochs = 1;
  for (int i = 2; i < argc; ++i) {
    if (!std::strcmp(argv[i], "--threads") && i + 1 < argc) options.threads = std::stoi(argv[++i]);
    else if (!std::strcmp(argv[i], "--epochs") && i + 1 < argc) epochs = std::stoi(argv[++i]);
    else if (!std::strcmp(argv[i], "--no-shuffle")) options.shuffle = false;
    else if (!std::strcmp(argv[i], "--scale")) options.scale_maxabs = true;
    else if (!std::strcmp(argv[i], "--lockstep")) options.lockstep = true;
    else if (!std::strcmp(argv[i], "--read-ahead") && i + 1 < argc)
      options.read_ahead_bytes = std::stoull(argv[++i]) << 20;
  }
  try {
    const io::ShardSet shards = io::ShardSet::open(argv[1], /*check_sources=*/false);
    for (int e = 0; e < epochs; ++e) {
      options.epoch = e;
      std::uint64_t checksum = 0;  // touch every index so the decode cannot be skipped
      const std::uint64_t disk_before = io::disk_read_bytes();
      const auto start = std::chrono::steady_clock::now();
      const io::ScanStats stats = shards.scan(options, [&](const CsrView& batch) {
        checksum += batch.nnz();
        if (batch.nnz() > 0) checksum += batch.indices[batch.offsets[0]];
      });
      const double s =
          std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
      std::printf(
          "epoch %d: %llu rows, %llu nnz, %llu blocks in %.3f s: %.3g rows/s, %.3g nnz/s "
          "(checksum %llu), %.0f MB from disk\n",
          e, static_cast<unsigned long long>(stats.rows),
          static_cast<unsigned long long>(stats.nnz), static_cast<unsigned long long>(stats.blocks),
          s, stats.rows / s, stats.nnz / s, static_cast<unsigned long long>(checksum),
          (io::disk_read_bytes() - disk_before) / 1e6);
    }
  } catch (const Error& e) {
    std::fprintf(stderr, "error: %s\n", e.what());
    return 1;
  }
  return 0;
}
