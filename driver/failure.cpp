#include "driver/failure.h"

#include <new>

#include "driver/config_check.h"

namespace polymargin::driver {

Failure describe_failure(std::exception_ptr error) {
  try {
    std::rethrow_exception(error);
  } catch (const ConfigError& e) {  // a learner's field: said with its flag
    return {kExitUsage, false, flag_of(e.field()) + " " + e.rule()};
  } catch (const Error& e) {
    return {exit_code_of(e), false, e.what()};
  } catch (const std::bad_alloc&) {
    return {kExitIo, true, "out of memory"};
  } catch (const std::exception& e) {
    return {kExitInternal, false, std::string("internal error: ") + e.what()};
  } catch (...) {
    return {kExitInternal, false, "internal error: an unknown exception"};
  }
}

}  // namespace polymargin::driver
