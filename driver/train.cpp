// driver::train: a job handed to its learner's (driver/learner_jobs.h).

#include "driver/train.h"

#include "driver/learner_jobs.h"
#include "driver/text.h"
#include "engine/errors.h"

namespace polymargin::driver {

namespace {

TrainResult train_learner(const TrainJob& given, Events& events, nlohmann::ordered_json& record) {
  if (given.shards && !given.inputs.empty())
    throw UsageError("train: the job's rows are held in memory and given as files (-d) at once");
  TrainJob named;  // rows in memory without a name: "<memory>"
  if (given.shards && given.job.data_name.empty()) {
    named = given;
    named.job.data_name = "<memory>";
  }
  const TrainJob& job = named.shards ? named : given;
  if (job.algo == "ldm" || job.algo == "svm") return train_linear(job, events, record);
  if (job.algo == "cpm") return train_cpm(job, events, record);
  if (job.algo == "kldm" || job.algo == "tldm" || job.algo == "cmm")
    return train_kernel(job, events, record);
  throw UsageError("train: --algo must be one of cmm|cpm|kldm|ldm|svm|tldm (got '" + job.algo +
                   "')");
}

}  // namespace

std::optional<nlohmann::ordered_json> check_tuned_model(const nlohmann::json& tune,
                                                        const nlohmann::ordered_json& summary) {
  if (!tune.is_object() || !tune.contains("validation_accuracy") ||
      !tune["validation_accuracy"].is_number() || !summary.contains("train_accuracy"))
    return std::nullopt;
  const double searched = tune["validation_accuracy"].get<double>();
  const double trained = summary["train_accuracy"].get<double>();
  return nlohmann::ordered_json{
      {"estimate", tune.value("holdout", false) ? "holdout" : "cross-validation"},
      {"validation_accuracy", searched},
      {"train_accuracy", trained},
      {"below", searched - trained > kTunedModelGap}};
}

TrainResult train(const TrainJob& job, Events& events, nlohmann::ordered_json& record) {
  TrainResult result = train_learner(job, events, record);
  if (!result.leader) return result;
  if (const auto check = check_tuned_model(job.tune, result.summary)) {
    result.summary["tune_check"] = record["tune_check"] = *check;
    if ((*check)["below"].get<bool>())
      events.note(strprintf(
          "warning: the final model's training accuracy %.4f is %.1f points below the chosen "
          "setting's %s accuracy %.4f: the final run did not learn what the search's cells did "
          "(more --epochs may close the gap)",
          (*check)["train_accuracy"].get<double>(),
          100 * ((*check)["validation_accuracy"].get<double>() -
                 (*check)["train_accuracy"].get<double>()),
          (*check)["estimate"].get<std::string>().c_str(),
          (*check)["validation_accuracy"].get<double>()));
  }
  return result;
}

}  // namespace polymargin::driver
