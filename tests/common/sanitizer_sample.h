// Which cases of a parameter grid (architecture × rollback policy × proposer × slots …) the sanitizer build runs.
//
// Instrumented by address and undefined-behaviour sanitizers, the model grids run 10-20x slower; their full
// product is there to prove exactness, which the Release build checks. What the sanitizer build looks for is a
// memory error or undefined behaviour on some code path, and every path is reached by a thinned grid: the
// cases whose coordinates (each value's index in its dimension) sum to 0 modulo `stride`. Every value of every
// dimension still occurs, and where another dimension has at least `stride` values, so does every combination
// of the rest (one free index can always make the sum right).
#pragma once

#include <initializer_list>

namespace rwd::test {

#ifdef REWIND_SANITIZED
inline constexpr bool kSanitizedBuild = true;
#else
inline constexpr bool kSanitizedBuild = false;
#endif

inline bool in_sanitizer_sample(std::initializer_list<int> coordinates, int stride) {
  if (!kSanitizedBuild) return true;
  int sum = 0;
  for (int coordinate : coordinates) sum += coordinate;
  return sum % stride == 0;
}

}  // namespace rwd::test
