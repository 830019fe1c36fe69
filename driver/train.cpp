// driver::train: a job handed to its learner's (driver/learner_jobs.h).

#include "driver/train.h"

#include "driver/learner_jobs.h"
#include "engine/errors.h"

namespace polymargin::driver {

TrainResult train(const TrainJob& job, Events& events, nlohmann::ordered_json& record) {
  if (job.algo == "ldm" || job.algo == "svm") return train_linear(job, events, record);
  if (job.algo == "cpm") return train_cpm(job, events, record);
  if (job.algo == "kldm" || job.algo == "tldm" || job.algo == "cmm")
    return train_kernel(job, events, record);
  throw UsageError("train: --algo must be one of cmm|cpm|kldm|ldm|svm|tldm (got '" + job.algo +
                   "')");
}

}  // namespace polymargin::driver
