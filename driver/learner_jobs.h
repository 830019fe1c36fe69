// The learners' jobs behind driver::train (driver/train.h), a file each: what a learner's job does
// between its options' check and its summary.
#pragma once

#include <nlohmann/json.hpp>

#include "driver/job.h"
#include "driver/train.h"

namespace polymargin::driver {

/// ldm, svm (driver/linear_job.cpp).
TrainResult train_linear(const TrainJob& job, Events& events, nlohmann::ordered_json& record);
/// cpm (driver/cpm_job.cpp).
TrainResult train_cpm(const TrainJob& job, Events& events, nlohmann::ordered_json& record);
/// kldm, tldm, cmm (driver/kernel_job.cpp).
TrainResult train_kernel(const TrainJob& job, Events& events, nlohmann::ordered_json& record);

}  // namespace polymargin::driver
