#include "engine/classifier.h"

#include <sstream>

namespace polymargin::engine {

std::uint64_t Classifier::predict_batch(const CsrView& rows, double* scores,
                                        double* predicted) const {
  const std::uint64_t ignored = score_batch(rows, scores);
  for (std::size_t r = 0; r < rows.rows; ++r)
    predicted[r] = scores[r] > 0 ? labels.positive : labels.negative;
  return ignored;
}

nlohmann::json Classifier::info_json() const {
  nlohmann::json j;
  j["algorithm"] = algorithm;
  j["config"] = config;
  if (multiclass())
    j["classes"] = classes;
  else
    j["labels"] = {{"negative", labels.negative}, {"positive", labels.positive}};
  j["index_base"] = index_base;
  j["features"] = features;
  j["max_index"] = max_index;
  return j;
}

nlohmann::json Classifier::maxabs_json(const std::vector<float>& maxabs) const {
  nlohmann::json s = nlohmann::json::object();
  for (std::size_t f = static_cast<std::size_t>(index_base); f < maxabs.size(); ++f)
    if (maxabs[f] != 1.0f) s[std::to_string(f)] = maxabs[f];
  return s;
}

std::string Classifier::info_text() const {
  std::ostringstream out;
  out << "# polymargin model\n"
      << "algorithm " << algorithm << "\n";
  if (multiclass()) {
    out << "classes";
    for (const double c : classes) out << " " << c;
    out << "\n";
  } else {
    out << "labels " << labels.negative << " " << labels.positive << "\n";
  }
  out << "index_base " << index_base << "\n"
      << "features " << features << "\n"
      << "max_index " << max_index << "\n"
      << "config " << config.dump() << "\n";
  return out.str();
}

}  // namespace polymargin::engine
