#include "launcher/job/failure_hint.h"

#include <doctest/doctest.h>

namespace dslaunch::launcher {
namespace {

TEST_CASE("FailureHint names --no_local_rank for argparse's refusal of --local_rank") {
  auto hint = FailureHint({"usage: train.py [-h] [--lr LR]", "train.py: error: unrecognized arguments: --local_rank=1"}, "");
  REQUIRE(hint);
  CHECK(*hint ==
        "hint: the program does not take the --local_rank=N argument dslaunch passes to Python programs (as "
        "DeepSpeed's launcher does); add --no_local_rank, and it reads LOCAL_RANK from its environment (as "
        "torchrun's scripts do)");
}

TEST_CASE("FailureHint names --python for a module the workers' Python lacks, from stderr or the error record") {
  const std::string want =
      "hint: the workers' Python has no module 'torch'; give the interpreter that has it with --python PATH "
      "(e.g. a virtual environment's bin/python), or set PYTHON_EXEC";
  auto from_tail = FailureHint({"Traceback (most recent call last):", "  File \"train.py\", line 1, in <module>",
                                "    import torch", "ModuleNotFoundError: No module named 'torch'"},
                               "");
  REQUIRE(from_tail);
  CHECK(*from_tail == want);
  auto from_record = FailureHint({}, "ModuleNotFoundError: No module named 'torch'");
  REQUIRE(from_record);
  CHECK(*from_record == want);
}

TEST_CASE("FailureHint says nothing of other failures") {
  CHECK_FALSE(FailureHint({"RuntimeError: CUDA out of memory", "error: unrecognized arguments: --lr"}, "boom"));
  CHECK_FALSE(FailureHint({}, ""));
}

}  // namespace
}  // namespace dslaunch::launcher
