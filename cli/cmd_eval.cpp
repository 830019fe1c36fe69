// `polymargin predict` and `polymargin eval`: score a data set with one or more trained models.
#include <algorithm>
#include <cmath>
#include <cstdio>
#include <filesystem>
#include <functional>
#include <iostream>
#include <map>
#include <memory>
#include <nlohmann/json.hpp>
#include <optional>
#include <sstream>

#include "cli/command.h"
#include "cli/output.h"
#include "cli/plot.h"
#include "engine/errors.h"
#include "engine/linear_model.h"
#include "engine/metrics.h"
#include "io/atomic_file.h"
#include "io/model_file.h"
#include "io/shards.h"

namespace polymargin::cli {
namespace {

using engine::Classifier;

// What eval keeps of a model's scores: a binary model's scores and ±1 labels (the exact AUC sorts
// them: 9 bytes a row), a multiclass model's counts only.
struct Scored {
  engine::BinaryScores binary;  // binary models: ±1 under the model's label map
  std::map<double, std::map<double, std::uint64_t>> confusion;  // multiclass: actual → predicted
  std::uint64_t rows = 0, correct = 0;                          // multiclass
  std::uint64_t ignored_nonzeros = 0;  // test features the model never saw
  nlohmann::json details;              // the model's own statistics (Classifier::eval_details)
};

using io::label_text;  // a label as it reads back: its float's shortest text

// Opens DATA for a model counting feature ids from `base`: text is parsed with it, so that an
// index 0 in a 1-based test file is caught rather than silently shifted.
io::Dataset open_for_base(const std::vector<std::string>& data, int base, int threads) {
  io::ConvertOptions convert;
  convert.text.index_base = base == 0 ? io::IndexBase::kZero : io::IndexBase::kOne;
  convert.text.threads = threads;
  return io::Dataset::open(data, convert, threads);
}

// The index base that the model file `path` declares in its header (read after the file's
// checksum, the arrays left unread), so that text data can be converted before the model is
// loaded: the conversion's per-feature table (4 bytes a feature id) and the model are then never
// held at once (81 and 162 MB at KDD width). None for a stream, which is read once, or a file that
// is not a model (loaded first, and refused as it was).
std::optional<int> declared_index_base(const std::string& path) {
  std::error_code ec;
  if (!std::filesystem::is_regular_file(path, ec)) return std::nullopt;
  const nlohmann::json header = io::read_model_header(path);
  const auto base = header.find("index_base");
  if (header.value("kind", std::string()).find("checkpoint") != std::string::npos ||
      base == header.end() || !base->is_number_integer() || (*base != 0 && *base != 1))
    return std::nullopt;
  return base->get<int>();
}

// The model loaded after its declared index base was used: the file must still say it.
void check_declared_base(const Classifier& model, const std::string& path,
                         std::optional<int> declared) {
  if (declared && model.index_base != *declared)
    throw IoError("model file " + path + " changed while it was read");
}

void check_labels(const io::Manifest& manifest, const Classifier& model, const std::string& data) {
  for (const auto& [label, count] : manifest.label_counts) {
    const float l = static_cast<float>(label);
    const bool known =
        model.multiclass()
            ? std::any_of(model.classes.begin(), model.classes.end(),
                          [&](double c) { return static_cast<float>(c) == l; })
            : model.labels.is_binary_label(l);
    if (known) continue;
    std::ostringstream msg;
    msg << "label " << label_text(label) << " (" << count << (count == 1 ? " row" : " rows")
        << ") is not one of the model's labels ";
    if (model.multiclass()) {
      for (std::size_t k = 0; k < model.classes.size(); ++k)
        msg << (k ? " / " : "") << label_text(model.classes[k]);
    } else {
      msg << label_text(model.labels.negative) << " / " << label_text(model.labels.positive);
    }
    throw DataError(data, 0, 0, msg.str());
  }
}

// A batch of rows and the model's scores and predicted raw labels of them.
using ScoredBatch =
    std::function<void(const CsrView& batch, const double* scores, const double* predicted)>;

// Scores every row in data order (no shuffle), a batch at a time; returns the non-zeros of
// features the model never saw, and fills `details` with the model's own statistics.
std::uint64_t score_batches(const io::ShardSet& shards, const Classifier& model, int threads,
                            const ScoredBatch& sink, nlohmann::json* details = nullptr) {
  std::uint64_t ignored = 0;
  const std::unique_ptr<engine::EvalDetails> extra = details ? model.eval_details() : nullptr;
  std::vector<double> scores, predicted;
  io::ReadOptions read;
  read.shuffle = false;
  read.threads = threads;
  shards.scan(read, [&](const CsrView& batch) {
    scores.resize(batch.rows);
    predicted.resize(batch.rows);
    ignored += model.predict_batch(batch, scores.data(), predicted.data());
    sink(batch, scores.data(), predicted.data());
    if (extra) extra->add(batch);
  });
  if (extra) *details = extra->json();
  return ignored;
}

Scored score_rows(const io::ShardSet& shards, const Classifier& model, int threads) {
  Scored out;
  if (!model.multiclass()) {
    std::uint64_t positives = 0, negatives = 0;
    for (const auto& [label, count] : shards.manifest().label_counts)
      (model.labels.sign(static_cast<float>(label)) > 0 ? positives : negatives) += count;
    out.binary.reserve(positives, negatives);
  }
  out.ignored_nonzeros = score_batches(
      shards, model, threads,
      [&](const CsrView& batch, const double* scores, const double* predicted) {
        for (std::size_t r = 0; r < batch.rows; ++r) {
          if (model.multiclass()) {
            ++out.confusion[batch.labels[r]][predicted[r]];
            out.correct += static_cast<float>(predicted[r]) == batch.labels[r];
          } else {
            out.binary.add(scores[r], model.labels.sign(batch.labels[r]));
          }
        }
        out.rows += batch.rows;
      },
      &out.details);
  return out;
}

// Accuracy and the confusion matrix of a multiclass model (actual label → predicted label → rows).
nlohmann::json multiclass_json(const Scored& s) {
  const double rows = static_cast<double>(s.rows);
  nlohmann::json matrix = nlohmann::json::object();
  for (const auto& [actual, row] : s.confusion) {
    nlohmann::json cells = nlohmann::json::object();
    for (const auto& [predicted, n] : row) cells[label_text(predicted)] = n;
    matrix[label_text(actual)] = std::move(cells);
  }
  return {{"rows", s.rows},
          {"accuracy", rows > 0 ? s.correct / rows : 0.0},
          {"error_rate", rows > 0 ? 1 - s.correct / rows : 0.0},
          {"errors", s.rows - s.correct},
          {"confusion", std::move(matrix)}};
}

// predict writes its lines in pieces of about this many bytes.
constexpr std::size_t kPredictFlushBytes = std::size_t{1} << 20;

int run_predict(const std::vector<std::string>& args) {
  std::string model_path, output;
  std::vector<std::string> data;
  int threads = 0;
  po::options_description opts("predict options");
  opts.add_options()("model,m", po::value(&model_path)->required(), "trained model file")(
      "data,d", po::value(&data)->multitoken()->required(),
      "data to score: LIBSVM text (plain/gz/bz2/zst, '-' = stdin) or a shard directory")(
      "output,o", po::value(&output), "write 'label score' lines here (default, or -: stdout)")(
      "threads", po::value(&threads)->default_value(0), "reader threads (0 = all cores)");
  po::positional_options_description pos;
  po::variables_map vm;
  if (!parse_options("predict", "-m MODEL -d DATA [-o SCORES]", opts, pos, args, vm)) return 0;
  io::check_outputs(input_paths(vm, {"model", "data"}), {{"--output", output, false, ""}});
  threads = resolve_threads(threads);

  // The data first when the model file says its index base (declared_index_base).
  const std::optional<int> declared = declared_index_base(model_path);
  std::optional<io::Dataset> opened;
  if (declared) opened.emplace(open_for_base(data, *declared, threads));
  const std::unique_ptr<Classifier> loaded = io::load_classifier(model_path);
  const Classifier& model = *loaded;
  check_declared_base(model, model_path, declared);
  if (!opened) opened.emplace(open_for_base(data, model.index_base, threads));
  io::Dataset& dataset = *opened;
  // One line per row, in data order: the predicted label (the model's own label values) and the
  // score. The lines go out a megabyte at a time, whatever the rows: to a file that appears whole
  // once every row is scored, or to standard output as they come.
  const bool to_stdout = output.empty() || output == "-";  // -: as -d - is standard input
  std::optional<io::AtomicFile> file;
  if (!to_stdout) file.emplace(output);
  std::string text;
  const auto flush = [&] {
    if (file)
      file->write(text);
    else
      std::cout << text;
    text.clear();
  };
  std::uint64_t rows = 0;
  char buf[40];
  std::vector<std::pair<double, std::string>> names;  // each predicted label's text, made once
  const auto name_of = [&](double label) -> const std::string& {
    for (const auto& [value, name] : names)
      if (value == label) return name;
    return names.emplace_back(label, label_text(label)).second;
  };
  const std::uint64_t ignored =
      score_batches(dataset.shards(), model, threads,
                    [&](const CsrView& batch, const double* scores, const double* predicted) {
                      for (std::size_t r = 0; r < batch.rows; ++r) {
                        text += name_of(predicted[r]);
                        const int n = std::snprintf(buf, sizeof buf, " %.9g\n", scores[r]);
                        text.append(buf, n);
                      }
                      rows += batch.rows;
                      if (text.size() >= kPredictFlushBytes) flush();
                    });
  flush();
  if (file) {
    file->commit();
    std::cerr << "predict: " << rows << " rows scored → " << output << "\n";
  }
  if (ignored > 0)
    std::cerr << "predict: ignored " << ignored << (ignored == 1 ? " non-zero" : " non-zeros")
              << " of features the model has not seen (index "
              << (model.index_base == 1 ? "0 or " : "") << "> " << model.max_index << ")\n";
  return 0;
}

nlohmann::json metrics_json(const engine::BinaryMetrics& m) {
  return {{"rows", m.rows},
          {"positives", m.positives},
          {"negatives", m.negatives},
          {"accuracy", m.accuracy},
          {"error_rate", m.error_rate},
          {"errors", m.false_positives + m.false_negatives},
          {"auc", m.auc},
          {"precision", m.precision},
          {"recall", m.recall},
          {"f1", m.f1},
          {"confusion",
           {{"true_positives", m.true_positives},
            {"false_positives", m.false_positives},
            {"true_negatives", m.true_negatives},
            {"false_negatives", m.false_negatives}}},
          {"margin_mean", m.margin_mean},
          {"margin_variance", m.margin_variance}};
}

// Thresholds of --margins/--plot: far more than a plot can show, and a bounded table.
constexpr int kMaxPoints = 100000;

// One model's evaluation on the data.
struct EvalResult {
  std::string path;
  std::unique_ptr<Classifier> model;
  engine::BinaryMetrics metrics;  // binary models
  nlohmann::json multiclass;      // multiclass models: multiclass_json
  nlohmann::json details;
  std::vector<double> margins;
  std::uint64_t ignored_nonzeros = 0;
};

// Every model scored on the data, in the order given. Text is converted once per index base, not
// once per model.
std::vector<EvalResult> evaluate_models(const std::vector<std::string>& model_paths,
                                        const std::vector<std::string>& data, int threads,
                                        bool keep_margins) {
  std::vector<EvalResult> results;
  std::map<int, io::Dataset> datasets;
  // The data for a model of index base `base`, opened once per base.
  const auto data_for = [&](const std::string& path, int base) {
    auto it = datasets.find(base);
    if (it == datasets.end()) {
      if (!datasets.empty() && std::find(data.begin(), data.end(), "-") != data.end())
        throw UsageError("eval: " + path + " counts feature ids from " + std::to_string(base) +
                         ", " + model_paths.front() + " from " +
                         std::to_string(datasets.begin()->first) +
                         ": standard input can be read once, in one of them; give the data as a "
                         "file");
      it = datasets.emplace(base, open_for_base(data, base, threads)).first;
    }
    return it;
  };
  for (const auto& path : model_paths) {
    EvalResult r;
    r.path = path;
    // The data first when the model file says its index base (declared_index_base).
    const std::optional<int> declared = declared_index_base(path);
    if (declared) data_for(path, *declared);
    r.model = io::load_classifier(path);
    const Classifier& model = *r.model;
    check_declared_base(model, path, declared);
    const io::ShardSet& shards = data_for(path, model.index_base)->second.shards();
    check_labels(shards.manifest(), model, data.front());
    Scored scored = score_rows(shards, model, threads);
    r.ignored_nonzeros = scored.ignored_nonzeros;
    r.details = std::move(scored.details);
    if (model.multiclass()) {
      r.multiclass = multiclass_json(scored);
    } else {
      r.metrics = scored.binary.metrics();
      if (keep_margins) r.margins = scored.binary.take_sorted_margins();  // y·f(x), ascending
    }
    results.push_back(std::move(r));
  }

  return results;
}

// --margins FILE.csv and --plot FILE.svg: the binary models' cumulative margin distributions.
void write_margin_curves(const std::vector<EvalResult>& results, const std::string& margins_csv,
                         const std::string& plot_svg, int points) {
  // The margin curves (binary models only) share one threshold grid: the 0.5%–99.5% range of all
  // margins, which keeps a few extreme rows from flattening the picture.
  std::vector<const EvalResult*> binary;
  for (const auto& r : results)
    if (!r.model->multiclass()) binary.push_back(&r);
  std::vector<engine::MarginCurve> curves;
  if ((!margins_csv.empty() || !plot_svg.empty()) && binary.empty())
    throw UsageError("eval: --margins and --plot need a binary model (margins y·f(x))");
  if (!margins_csv.empty() || !plot_svg.empty()) {
    // Each model's margins are sorted; several are merged into one array for the range.
    std::vector<double> merged;
    if (binary.size() > 1) {
      for (const EvalResult* r : binary)
        merged.insert(merged.end(), r->margins.begin(), r->margins.end());
      std::sort(merged.begin(), merged.end());
    }
    const std::vector<double>& all = binary.size() > 1 ? merged : binary.front()->margins;
    double lo = all.empty() ? -1 : all[all.size() / 200];
    double hi = all.empty() ? 1 : all[all.size() - 1 - all.size() / 200];
    if (!(hi > lo)) lo -= 1, hi += 1;
    for (const EvalResult* r : binary)
      curves.push_back(engine::margin_curve(r->margins, lo, hi, points));
  }
  // Both files written and synced under their temporary names first, then renamed: a disk that
  // fills on the second leaves the old pair, not a new CSV beside an old plot.
  std::vector<std::unique_ptr<io::AtomicFile>> staged;
  const auto stage = [&](const std::string& path, const std::string& content) {
    staged.push_back(std::make_unique<io::AtomicFile>(path));
    staged.back()->write(content);
    staged.back()->sync();
  };
  if (!margins_csv.empty()) {
    std::ostringstream csv;
    csv.precision(9);
    csv << "margin";
    for (const EvalResult* r : binary) csv << "," << r->model->algorithm << ":" << r->path;
    csv << "\n";
    for (int p = 0; p < points; ++p) {
      csv << curves[0].thresholds[p];
      for (const auto& c : curves) csv << "," << c.cumulative[p];
      csv << "\n";
    }
    stage(margins_csv, csv.str());
  }
  if (!plot_svg.empty()) {
    std::vector<Series> series;
    for (std::size_t k = 0; k < binary.size(); ++k)
      series.push_back({binary[k]->model->algorithm + " (" + binary[k]->path + ")",
                        curves[k].thresholds, curves[k].cumulative});
    stage(plot_svg, svg_line_plot(series, {"Cumulative margin distribution", "margin y·f(x)",
                                           "fraction of rows with margin ≤ x"}));
  }
  for (const auto& file : staged) file->commit();
}

// The table of each model's results, on stdout.
void print_results(const std::vector<EvalResult>& results) {
  for (const auto& r : results) {
    if (r.model->multiclass()) {
      const nlohmann::json& m = r.multiclass;
      out_printf("%s (%s, %zu classes) on %llu rows\n", r.path.c_str(),
                  r.model->algorithm.c_str(), r.model->classes.size(),
                  static_cast<unsigned long long>(m["rows"].get<std::uint64_t>()));
      out_printf("  accuracy      %.4f   (error rate %.4f, %llu errors)\n",
                  m["accuracy"].get<double>(), m["error_rate"].get<double>(),
                  static_cast<unsigned long long>(m["errors"].get<std::uint64_t>()));
      out_printf("  confusion     actual label: predicted label = rows\n");
      for (const auto& [actual, cells] : m["confusion"].items()) {
        out_printf("    %-10s", actual.c_str());
        for (const auto& [predicted, n] : cells.items())
          out_printf("  %s=%llu", predicted.c_str(),
                      static_cast<unsigned long long>(n.get<std::uint64_t>()));
        out_printf("\n");
      }
    } else {
      const auto& m = r.metrics;
      out_printf("%s (%s) on %llu rows\n", r.path.c_str(), r.model->algorithm.c_str(),
                  static_cast<unsigned long long>(m.rows));
      out_printf("  accuracy      %.4f   (error rate %.4f, %llu errors)\n", m.accuracy,
                  m.error_rate,
                  static_cast<unsigned long long>(m.false_positives + m.false_negatives));
      out_printf("  auc           %.4f\n", m.auc);
      out_printf("  precision     %.4f   recall %.4f   f1 %.4f\n", m.precision, m.recall, m.f1);
      out_printf("  margin        mean %.4f   variance %.4f\n", m.margin_mean, m.margin_variance);
      out_printf("  confusion     predicted +1   predicted -1\n");
      out_printf("    actual +1   %12llu   %12llu\n",
                  static_cast<unsigned long long>(m.true_positives),
                  static_cast<unsigned long long>(m.false_negatives));
      out_printf("    actual -1   %12llu   %12llu\n",
                  static_cast<unsigned long long>(m.false_positives),
                  static_cast<unsigned long long>(m.true_negatives));
    }
    if (!r.details.is_null())
      for (const auto& [key, value] : r.details.items())
        out_printf("  %-13s %s\n", key.c_str(), value.dump().c_str());
    if (r.ignored_nonzeros > 0)
      out_printf("  ignored       %llu non-zeros of features the model has not seen\n",
                  static_cast<unsigned long long>(r.ignored_nonzeros));
  }
}

int run_eval(const std::vector<std::string>& args) {
  std::vector<std::string> model_paths, data;
  std::string margins_csv, plot_svg;
  int threads = 0, points = 201;
  bool json = false;
  po::options_description opts("eval options");
  opts.add_options()("model,m", po::value(&model_paths)->required(),
                     "trained model file; repeat to compare models on the same data")(
      "data,d", po::value(&data)->multitoken()->required(),
      "test data: LIBSVM text (plain/gz/bz2/zst, '-' = stdin) or a shard directory")(
      "json", po::bool_switch(&json), "print one JSON object instead of the table")(
      "margins", po::value(&margins_csv),
      "write the cumulative margin distribution (one column per model) to FILE.csv")(
      "plot", po::value(&plot_svg), "draw the cumulative margin distribution to FILE.svg")(
      "points", po::value(&points)->default_value(201),
      "thresholds in --margins/--plot (2 to 100000)")(
      "threads", po::value(&threads)->default_value(0), "reader threads (0 = all cores)");
  po::positional_options_description pos;
  po::variables_map vm;
  if (!parse_options("eval",
                     "-m MODEL [-m MODEL2 ...] -d DATA [--json] [--margins F.csv] [--plot F.svg]",
                     opts, pos, args, vm))
    return 0;
  if (points < 2 || points > kMaxPoints)
    throw UsageError("eval: --points must be in [2, " + std::to_string(kMaxPoints) + "] (got " +
                     std::to_string(points) + ")");
  io::check_outputs(input_paths(vm, {"model", "data"}),
                    {{"--margins", margins_csv, false, ""}, {"--plot", plot_svg, false, ""}});
  threads = resolve_threads(threads);

  const std::vector<EvalResult> results =
      evaluate_models(model_paths, data, threads, !margins_csv.empty() || !plot_svg.empty());
  write_margin_curves(results, margins_csv, plot_svg, points);
  if (json) {
    nlohmann::json out = nlohmann::json::array();
    for (const auto& r : results) {
      nlohmann::json j = r.model->multiclass() ? r.multiclass : metrics_json(r.metrics);
      j["model_path"] = r.path;
      j["algorithm"] = r.model->algorithm;
      j["ignored_nonzeros"] = r.ignored_nonzeros;
      if (!r.details.is_null()) j["details"] = r.details;
      out.push_back(std::move(j));
    }
    std::cout << (results.size() == 1 ? out[0] : out).dump(2) << "\n";
    return 0;
  }
  print_results(results);
  return 0;
}

const CommandRegistration predict_registration("predict", "score data with a trained model",
                                               run_predict);
const CommandRegistration eval_registration(
    "eval", "accuracy, AUC, confusion matrix and margin distribution of models", run_eval);

}  // namespace
}  // namespace polymargin::cli
