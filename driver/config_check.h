// How a learner's refused configuration is said to the user: the option that sets the field an
// engine::ConfigError names, and a learner configuration's validate() turned into the refusal of a
// training job.
#pragma once

#include <map>
#include <string>

#include "engine/errors.h"

namespace polymargin::driver {

/// How a learner's configuration field (engine::ConfigError::field) is named to the user: the long
/// option of the same name ("max_sweeps" → "--max-sweeps") unless `names` says otherwise (the
/// CPM's "faces" is "-k (faces K)").
using FlagNames = std::map<std::string, std::string>;
std::string flag_of(const std::string& field, const FlagNames& names = {});

/// config.validate(), its refusal said as `train`'s, with the option of the field it names
/// (flag_of).
template <class Config>
void check_config(const Config& config, const FlagNames& names = {}) {
  try {
    config.validate();
  } catch (const ConfigError& e) {
    throw UsageError("train: " + flag_of(e.field(), names) + " " + e.rule());
  } catch (const UsageError& e) {
    throw UsageError(std::string("train: ") + e.what());
  }
}

}  // namespace polymargin::driver
