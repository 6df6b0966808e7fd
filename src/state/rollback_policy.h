// The rollback policies of DESIGN §5: how a slot's recurrent state is put back to the last accepted token
// after a speculative verify. All give the same results; they differ in memory and in bytes moved per round.
#pragma once

#include <string_view>

#include "base/status.h"

namespace rwd::state {

enum class RollbackPolicy {
  replay,      // one checkpoint + per-token records; verify runs on a copy, commit replays the kept records
  snapshot,    // one full state copy per verified token (llama.cpp's recurrent rollback); commit selects one
  checkpoint,  // one full copy before each verify; partial acceptance restores it and re-runs the kept tokens
  none,        // no rollback: speculation is refused for models with recurrent layers
};

std::string_view rollback_policy_name(RollbackPolicy policy);
Result<RollbackPolicy> parse_rollback_policy(std::string_view name);

}  // namespace rwd::state
