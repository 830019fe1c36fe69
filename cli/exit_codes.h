// The process's exit codes, shared by every subcommand (the README's "Exit codes" table): the
// library throws typed errors (engine/errors.h), and driver/failure.h is where each type becomes a
// code.
#pragma once

#include "driver/failure.h"

namespace polymargin::cli {

using driver::describe_failure;
using driver::exit_code_of;
using driver::ExitCode;
using driver::Failure;
using enum driver::ExitCode;

}  // namespace polymargin::cli
