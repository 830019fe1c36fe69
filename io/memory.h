// How much memory the process may use: the machine's MemAvailable and the limits of the memory
// cgroup it runs in (v1 or v2).
#pragma once

#include <cstdint>
#include <optional>

namespace polymargin::io {

/// The tightest memory limit of the process's cgroup: v1's memory controller (its hierarchical
/// limit, which includes the ancestors'), or in v2 the smallest memory.max of its cgroup and every
/// ancestor; 0 when none applies. Page cache counts against it: data larger than it cannot stay
/// cached.
std::uint64_t cgroup_memory_limit();

/// What that cgroup still lets the process hold: the limit less what the cgroup holds, not counting
/// the page cache it could drop (inactive files); in v2 the smallest over the ancestors. nullopt
/// when no limit applies.
std::optional<std::uint64_t> cgroup_memory_room();

/// What the process's address-space limit (RLIMIT_AS, `ulimit -v`) leaves beyond the address space
/// it already holds; nullopt when there is no such limit.
std::optional<std::uint64_t> address_space_room();

/// MemAvailable of /proc/meminfo: what the machine can still give; 0 if unknown.
std::uint64_t mem_available();

/// mem_available(), lowered to cgroup_memory_limit() when there is one; 0 if unknown.
std::uint64_t available_memory();

}  // namespace polymargin::io
