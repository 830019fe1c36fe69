#include "io/kernel_model_file.h"

#include <cmath>
#include <optional>
#include <stdexcept>

#include "engine/errors.h"
#include "io/json_integer.h"

namespace polymargin::io {

namespace {

[[noreturn]] void corrupt(const std::string& path, const std::string& message) {
  throw DataError(path, 0, 0, message);
}

engine::KernelSpec kernel_from(const nlohmann::json& j) {
  engine::KernelSpec k;
  k.type = engine::parse_kernel(j.at("kernel").get<std::string>());
  k.bias = j.at("bias").get<double>();
  if (k.type != engine::KernelType::kLinear) k.gamma = j.at("gamma").get<double>();
  if (k.type == engine::KernelType::kPolynomial) {
    const std::optional<int> degree = json_integer<int>(j.at("degree"));
    if (!degree) throw UsageError("degree is not an integer in range (" + j.at("degree").dump() + ")");
    k.degree = *degree;
    k.coef0 = j.at("coef0").get<double>();
  }
  k.validate();
  return k;
}

}  // namespace

void save_kernel_model(const engine::KernelModel& model, const std::string& path, bool durable) {
  ModelContainer file;
  file.header = model_header("kernel", model);
  file.header["kernel"] = model.kernel.json();
  file.header["decision"] = engine::decision_name(model.decision);
  file.header["intercepts"] = model.intercepts;
  file.header["plane_norms"] = model.plane_norms;
  if (model.normalize_l2) file.header["normalize"] = "l2";  // absent: none (files before it too)
  const CsrView v = model.vectors.rows.view();
  std::vector<double> offsets(v.rows + 1), indices(v.nnz());
  std::vector<float> values(v.nnz());
  for (std::size_t i = 0; i <= v.rows; ++i) offsets[i] = v.offsets[i] - v.offsets[0];
  for (std::size_t k = 0; k < v.nnz(); ++k) {
    indices[k] = v.indices[v.offsets[0] + k];
    values[k] = v.value(v.offsets[0] + k);
  }
  std::vector<double> coefficients;
  for (const auto& c : model.coefficients) coefficients.insert(coefficients.end(), c.begin(), c.end());
  file.arrays.push_back(ModelArray::of("vector_offsets", offsets));
  file.arrays.push_back(ModelArray::of("vector_indices", indices));
  file.arrays.push_back(ModelArray::of("vector_values", values));
  ModelArray coef = ModelArray::of("coefficients", coefficients);
  coef.shape = {model.coefficients.size(), v.rows};
  file.arrays.push_back(std::move(coef));
  if (!model.maxabs.empty()) file.arrays.push_back(ModelArray::of("maxabs", model.maxabs));
  write_model_container(path, file, durable);
}

engine::KernelModel kernel_model_from(const ModelContainer& file, const std::string& path) {
  engine::KernelModel model;
  read_model_info(file, path, model);
  try {
    const nlohmann::json& h = file.header;
    model.kernel = kernel_from(h.at("kernel"));
    const std::string decision = h.at("decision").get<std::string>();
    if (decision == "sign")
      model.decision = engine::KernelModel::Decision::kSign;
    else if (decision == "nearer_plane")
      model.decision = engine::KernelModel::Decision::kNearerPlane;
    else
      corrupt(path, "unknown kernel model decision rule '" + decision + "'");
    model.intercepts = h.at("intercepts").get<std::vector<double>>();
    model.plane_norms = h.at("plane_norms").get<std::vector<double>>();
    const std::string normalize = h.value("normalize", std::string("none"));
    if (normalize != "none" && normalize != "l2")
      corrupt(path, "malformed kernel model header: normalize '" + normalize + "'");
    model.normalize_l2 = normalize == "l2";
  } catch (const nlohmann::json::exception& e) {
    corrupt(path, std::string("malformed kernel model header: ") + e.what());
  } catch (const UsageError& e) {
    corrupt(path, std::string("malformed kernel model header: ") + e.what());
  }
  const std::vector<double> offsets = file.array("vector_offsets", path).as<double>(path);
  const std::vector<double> indices = file.array("vector_indices", path).as<double>(path);
  const std::vector<float> values = file.array("vector_values", path).as<float>(path);
  const std::vector<double> coefficients = file.array("coefficients", path).as<double>(path);
  for (const ModelArray& a : file.arrays)
    if (a.name == "maxabs") model.maxabs = a.as<float>(path);
  require_finite_all(model.intercepts, path, "intercepts");
  require_finite_all(model.plane_norms, path, "plane_norms");
  require_finite_all(values, path, "vector_values");
  require_finite_all(coefficients, path, "coefficients");
  require_finite_all(model.maxabs, path, "maxabs");
  if (offsets.empty() || offsets[0] != 0 || offsets.back() != static_cast<double>(indices.size()) ||
      values.size() != indices.size())
    corrupt(path, "kernel model vectors are malformed (offsets do not match the non-zeros)");
  const std::size_t n = offsets.size() - 1;
  CsrBuffer& rows = model.vectors.rows;
  rows.clear();
  rows.has_values = true;
  rows.values = values;
  rows.labels.assign(n, 0.0f);
  rows.indices.resize(indices.size());
  for (std::size_t k = 0; k < indices.size(); ++k) {
    const double f = indices[k];
    if (!(f >= 0) || f > model.max_index || f != std::floor(f))
      corrupt(path, "kernel model vector feature id " + std::to_string(f) + " is out of range");
    rows.indices[k] = static_cast<std::uint32_t>(f);
  }
  rows.offsets.resize(n + 1);
  for (std::size_t i = 0; i <= n; ++i) {
    if (!(offsets[i] >= 0) || offsets[i] > static_cast<double>(indices.size()) ||
        offsets[i] != std::floor(offsets[i]) || (i > 0 && offsets[i] < offsets[i - 1]))
      corrupt(path, "kernel model vector offsets are not increasing integers within the ids");
    rows.offsets[i] = static_cast<std::uint32_t>(offsets[i]);
    if (i > 0)
      for (std::uint32_t k = rows.offsets[i - 1] + 1; k < rows.offsets[i]; ++k)
        if (rows.indices[k] <= rows.indices[k - 1])
          corrupt(path, "kernel model vector feature ids are not increasing");
  }
  model.vectors.finish();
  const std::size_t expansions = model.intercepts.size();
  if (expansions == 0 || coefficients.size() != expansions * n)
    corrupt(path, "kernel model has " + std::to_string(coefficients.size()) +
                      " coefficients for " + std::to_string(expansions) + " expansion(s) of " +
                      std::to_string(n) + " vectors");
  for (std::size_t x = 0; x < expansions; ++x)
    model.coefficients.emplace_back(coefficients.begin() + x * n, coefficients.begin() + (x + 1) * n);
  try {
    model.check();
  } catch (const std::invalid_argument& e) {
    corrupt(path, std::string("inconsistent kernel model: ") + e.what());
  }
  return model;
}

}  // namespace polymargin::io
