#include "cli/train.h"

#include <algorithm>
#include <boost/lexical_cast.hpp>
#include <iostream>
#include <nlohmann/json.hpp>
#include <optional>

#include "cli/output.h"
#include "cli/train_jobs.h"
#include "engine/errors.h"

namespace polymargin::cli {
namespace {

std::vector<TrainAlgorithm>& registry() {
  static std::vector<TrainAlgorithm> r;
  return r;
}

}  // namespace

TrainAlgorithmRegistration::TrainAlgorithmRegistration(TrainAlgorithm algorithm) {
  std::vector<TrainAlgorithm>& r = registry();
  r.push_back(std::move(algorithm));
  std::sort(r.begin(), r.end(), [](const auto& x, const auto& y) { return x.name < y.name; });
}

const std::vector<TrainAlgorithm>& train_algorithms() { return registry(); }

const TrainAlgorithm& train_algorithm(const std::string& algo) {
  std::string list;
  for (const TrainAlgorithm& a : registry()) {
    if (a.name == algo) return a;
    list += (list.empty() ? "" : "|") + a.name;
  }
  throw UsageError("train: --algo must be one of " + list + " (got '" + algo + "')");
}

int run_train_algorithm(const TrainAlgorithm& a, const std::vector<std::string>& args) {
  return run_train_job(args, [&a](const std::vector<std::string>& args, MetricsFile& metrics) {
    bool json = false;
    const std::optional<driver::TrainJob> job = parse_train_options(a, args, json);
    if (!job) return kHelpShown;
    return train_in_library(*job, metrics, [&](const nlohmann::ordered_json& summary) {
      print_train_summary(a, summary, json);
    });
  });
}

void print_convergence(const nlohmann::ordered_json& c, const char* pass, const char* more) {
  if (c["converged"].is_null()) {
    out_printf("convergence not judged: one %s made (--tol compares each %s with those before)\n",
               pass, pass);
    return;
  }
  const double gain = 100 * c["objective_gain"].get<double>();
  const double tol = 100 * c["tol"].get<double>();
  if (c["converged"].get<bool>())
    out_printf("converged: no %s since %s %llu lowered the objective by more than --tol %.3g %% "
               "of its best\n",
               pass, pass, c["converged_since_pass"].get<unsigned long long>(), tol);
  else
    out_printf("not converged: the last %s still lowered the objective by %.3g %% (--tol %.3g "
               "%%): %s may give a better model\n",
               pass, gain, tol, more);
}

void print_train_summary(const TrainAlgorithm& a, const nlohmann::ordered_json& summary,
                         bool json) {
  if (json) {
    std::cout << summary.dump(2) << "\n";
    return;
  }
  a.print(summary);
  if (summary.contains("tune_check")) {
    const nlohmann::ordered_json& c = summary["tune_check"];
    out_printf("tuned: the chosen setting's %s accuracy %.4f, the final model's training "
               "accuracy %.4f%s\n",
               c["estimate"].get<std::string>().c_str(), c["validation_accuracy"].get<double>(),
               c["train_accuracy"].get<double>(),
               c["below"].get<bool>() ? " (more than 2 points below: see the warning)" : "");
  }
}

std::optional<driver::TrainJob> parse_train_job(const std::vector<std::string>& args) {
  bool json = false;
  return parse_train_options(train_algorithm(peek_option(args, "algo", "ldm")), args, json);
}

std::vector<std::pair<std::string, std::string>> config_entries(
    const std::vector<std::string>& args) {
  std::string config;
  for (std::size_t i = 0; i < args.size(); ++i) {
    if (args[i] == "--config" && i + 1 < args.size()) config = args[i + 1];
    if (args[i].rfind("--config=", 0) == 0) config = args[i].substr(9);
  }
  std::vector<std::pair<std::string, std::string>> entries;
  if (config.empty()) return entries;
  try {
    for (ConfigEntry& e : read_config_entries("train", config))
      entries.emplace_back(std::move(e.key), std::move(e.value));
  } catch (const Error&) {  // unreadable or malformed: the full parse reports it
    entries.clear();
  }
  return entries;
}

std::string peek_option(const std::vector<std::string>& args, const std::string& name,
                        const std::string& fallback) {
  const std::string flag = "--" + name;
  for (std::size_t i = 0; i < args.size(); ++i) {
    if (args[i] == flag && i + 1 < args.size()) return args[i + 1];
    if (args[i].rfind(flag + "=", 0) == 0) return args[i].substr(flag.size() + 1);
  }
  for (const auto& [key, value] : config_entries(args))
    if (key == name) return value;
  return fallback;
}

namespace {

template <class T>
po::typed_value<T>* with_default(po::typed_value<T>* value, const std::string& text) {
  if (!text.empty()) value->default_value(boost::lexical_cast<T>(text), text);
  return value;
}

// The value po holds for `o`, as the table's apply takes it.
driver::OptionValue option_value(const driver::TrainOption& o, const boost::any& held) {
  using T = driver::OptionType;
  switch (o.type) {
    case T::kSwitch: return boost::any_cast<bool>(held);
    case T::kInt: return boost::any_cast<int>(held);
    case T::kInt64: return boost::any_cast<std::int64_t>(held);
    case T::kUInt32: return boost::any_cast<std::uint32_t>(held);
    case T::kUInt64: return boost::any_cast<std::uint64_t>(held);
    case T::kReal: return boost::any_cast<double>(held);
    case T::kText: return boost::any_cast<std::string>(held);
    case T::kTexts: return boost::any_cast<std::vector<std::string>>(held);
  }
  return false;
}

}  // namespace

void add_train_option(po::options_description& desc, const driver::TrainOption& o,
                      const std::string& algo) {
  using T = driver::OptionType;
  const std::string name = o.short_name ? o.key + "," + o.short_name : o.key;
  const std::string& fallback = o.key == "algo" ? algo : o.default_text;
  const po::value_semantic* value = nullptr;
  switch (o.type) {
    case T::kSwitch: value = po::bool_switch(); break;
    case T::kInt: value = with_default(po::value<int>(), fallback); break;
    case T::kInt64: value = with_default(po::value<std::int64_t>(), fallback); break;
    case T::kUInt32: value = with_default(po::value<std::uint32_t>(), fallback); break;
    case T::kUInt64: value = with_default(po::value<std::uint64_t>(), fallback); break;
    case T::kReal: value = with_default(po::value<double>(), fallback); break;
    case T::kText: {
      po::typed_value<std::string>* text = with_default(po::value<std::string>(), fallback);
      if (o.required) text->required();
      value = text;
      break;
    }
    case T::kTexts: value = po::value<std::vector<std::string>>()->multitoken(); break;
  }
  desc.add_options()(name.c_str(), value, o.help.c_str());
}

void apply_given_options(const po::variables_map& vm, driver::TrainJob& job) {
  const unsigned learner = driver::learner_bit(job.algo);
  for (const driver::TrainOption& o : driver::train_options()) {
    if (!o.apply || !o.taken_by(learner)) continue;
    const auto held = vm.find(o.key);
    if (held == vm.end() || held->second.defaulted()) continue;
    o.apply(job, option_value(o, held->second.value()));
  }
}

std::optional<driver::TrainJob> parse_train_options(const TrainAlgorithm& a,
                                                    const std::vector<std::string>& args,
                                                    bool& json) {
  const unsigned learner = driver::learner_bit(a.name);
  po::options_description shown(a.preamble + "train --algo " + a.name + " options");
  po::options_description hidden;  // another learner's, which this one refuses with its reason
  for (const driver::TrainOption& o : driver::train_options()) {
    if (o.role & driver::kSearchParam) continue;  // the search's (cli/tune.h)
    if (o.applies_to(learner)) add_train_option(shown, o, a.name);
    else if (o.taken_by(learner)) add_train_option(hidden, o, a.name);
  }
  shown.add_options()("json", po::bool_switch(&json), "print the summary as JSON on stdout");
  po::positional_options_description positional;
  positional.add("data", -1);
  po::variables_map vm;
  if (!parse_options("train", "--algo " + a.name + " " + a.usage, shown, positional, args, vm,
                     hidden.options().empty() ? nullptr : &hidden))
    return std::nullopt;
  driver::TrainJob job;
  job.algo = a.name;
  apply_given_options(vm, job);
  if (vm.count("config")) job.other_inputs.push_back({"--config", vm["config"].as<std::string>()});
  return job;
}

void EpochProgress::batch(int epoch, std::uint64_t rows_done_in_epoch) {
  if (!line_.due()) return;
  const double done = static_cast<double>(epoch) * rows_ + rows_done_in_epoch;
  const double elapsed = line_.elapsed();
  const double rate = elapsed > 0 ? done / elapsed : 0;
  const double left = rate > 0 ? (static_cast<double>(epochs_) * rows_ - done) / rate : 0;
  line_.show(strprintf("epoch %d/%d  %5.1f%%  %.2f M rows/s  ETA %.0f s", epoch + 1, epochs_,
                         100.0 * rows_done_in_epoch / rows_, rate / 1e6, left));
}

}  // namespace polymargin::cli
