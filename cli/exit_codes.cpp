#include "cli/exit_codes.h"

#include <new>

#include "cli/command.h"

namespace polymargin::cli {

Failure describe_failure(std::exception_ptr error) {
  using Kind = Failure::Kind;
  try {
    std::rethrow_exception(error);
  } catch (const ConfigError& e) {  // a learner's field: said with its flag
    return {Kind::kUsage, kExitUsage, flag_of(e.field()) + " " + e.rule()};
  } catch (const Error& e) {
    const int code = exit_code_of(e);
    const Kind kind = code == kExitMemory      ? Kind::kMemory
                      : code == kExitData      ? Kind::kData
                      : code == kExitIo        ? Kind::kIo
                      : code == kExitNumerical ? Kind::kNumerical
                                               : Kind::kUsage;
    return {kind, code, e.what()};
  } catch (const std::bad_alloc&) {
    return {Kind::kOutOfMemory, kExitIo, "out of memory"};
  } catch (const std::exception& e) {
    return {Kind::kInternal, kExitInternal, std::string("internal error: ") + e.what()};
  } catch (...) {
    return {Kind::kInternal, kExitInternal, "internal error: an unknown exception"};
  }
}

}  // namespace polymargin::cli
