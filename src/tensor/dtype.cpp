#include "tensor/dtype.h"

#include <array>

#include "base/check.h"
#include "tensor/quant/reference.h"

namespace rwd::tensor {
namespace {

// One row per ggml type. Sizes follow llama.cpp's block structs (static_asserts in quant/blocks.h).
constexpr std::array<DTypeTraits, 32> kTraits = {{
    {DType::f32, "f32", 1, 4, quant::to_float_f32, quant::from_float_f32, DType::f32},
    {DType::f16, "f16", 1, 2, quant::to_float_f16, quant::from_float_f16, DType::f32},
    {DType::bf16, "bf16", 1, 2, quant::to_float_bf16, quant::from_float_bf16, DType::f32},
    {DType::q4_0, "q4_0", 32, 18, quant::to_float_q4_0, quant::from_float_q4_0, DType::q8_0},
    {DType::q4_1, "q4_1", 32, 20, quant::to_float_q4_1, quant::from_float_q4_1, DType::q8_1},
    {DType::q5_0, "q5_0", 32, 22, quant::to_float_q5_0, quant::from_float_q5_0, DType::q8_0},
    {DType::q5_1, "q5_1", 32, 24, quant::to_float_q5_1, quant::from_float_q5_1, DType::q8_1},
    {DType::q8_0, "q8_0", 32, 34, quant::to_float_q8_0, quant::from_float_q8_0, DType::q8_0},
    {DType::q8_1, "q8_1", 32, 36, quant::to_float_q8_1, quant::from_float_q8_1, DType::q8_1},
    {DType::q2_k, "q2_K", 256, 84, quant::to_float_q2_k, nullptr, DType::q8_k},
    {DType::q3_k, "q3_K", 256, 110, quant::to_float_q3_k, nullptr, DType::q8_k},
    {DType::q4_k, "q4_K", 256, 144, quant::to_float_q4_k, quant::from_float_q4_k, DType::q8_k},
    {DType::q5_k, "q5_K", 256, 176, quant::to_float_q5_k, quant::from_float_q5_k, DType::q8_k},
    {DType::q6_k, "q6_K", 256, 210, quant::to_float_q6_k, quant::from_float_q6_k, DType::q8_k},
    {DType::q8_k, "q8_K", 256, 292, quant::to_float_q8_k, quant::from_float_q8_k, DType::q8_k},
    {DType::iq2_xxs, "iq2_xxs", 256, 66, quant::to_float_iq2_xxs, nullptr, DType::q8_k},
    {DType::iq2_xs, "iq2_xs", 256, 74, quant::to_float_iq2_xs, nullptr, DType::q8_k},
    {DType::iq3_xxs, "iq3_xxs", 256, 98, quant::to_float_iq3_xxs, nullptr, DType::q8_k},
    {DType::iq1_s, "iq1_s", 256, 50, quant::to_float_iq1_s, nullptr, DType::q8_k},
    {DType::iq4_nl, "iq4_nl", 32, 18, quant::to_float_iq4_nl, nullptr, DType::q8_0},
    {DType::iq3_s, "iq3_s", 256, 110, quant::to_float_iq3_s, nullptr, DType::q8_k},
    {DType::iq2_s, "iq2_s", 256, 82, quant::to_float_iq2_s, nullptr, DType::q8_k},
    {DType::iq4_xs, "iq4_xs", 256, 136, quant::to_float_iq4_xs, nullptr, DType::q8_k},
    {DType::i8, "i8", 1, 1, nullptr, nullptr, DType::i8},
    {DType::i16, "i16", 1, 2, nullptr, nullptr, DType::i16},
    {DType::i32, "i32", 1, 4, nullptr, nullptr, DType::i32},
    {DType::i64, "i64", 1, 8, nullptr, nullptr, DType::i64},
    {DType::f64, "f64", 1, 8, nullptr, nullptr, DType::f64},
    {DType::iq1_m, "iq1_m", 256, 56, quant::to_float_iq1_m, nullptr, DType::q8_k},
    {DType::tq1_0, "tq1_0", 256, 54, quant::to_float_tq1_0, nullptr, DType::q8_k},
    {DType::tq2_0, "tq2_0", 256, 66, quant::to_float_tq2_0, nullptr, DType::q8_k},
    {DType::mxfp4, "mxfp4", 32, 17, quant::to_float_mxfp4, nullptr, DType::q8_0},
}};

}  // namespace

std::span<const DTypeTraits> all_dtype_traits() { return kTraits; }

const DTypeTraits* find_dtype_traits(uint32_t id) {
  for (const auto& traits : kTraits) {
    if (static_cast<uint32_t>(traits.dtype) == id) return &traits;
  }
  return nullptr;
}

const DTypeTraits& dtype_traits(DType dtype) {
  const DTypeTraits* traits = find_dtype_traits(static_cast<uint32_t>(dtype));
  REWIND_CHECK(traits != nullptr, "dtype id {} has no traits row", static_cast<uint32_t>(dtype));
  return *traits;
}

size_t row_bytes(DType dtype, int64_t n) {
  const DTypeTraits& traits = dtype_traits(dtype);
  REWIND_CHECK(n % traits.block_size == 0, "row of {} values is not a whole number of {} blocks of {}", n,
               traits.name, traits.block_size);
  return static_cast<size_t>(n / traits.block_size) * traits.block_bytes;
}

bool is_supported_weight_type(DType dtype) {
  switch (dtype) {
    case DType::f32:
    case DType::f16:
    case DType::bf16:
    case DType::q4_0:
    case DType::q4_1:
    case DType::q5_0:
    case DType::q5_1:
    case DType::q8_0:
    case DType::q4_k:
    case DType::q5_k:
    case DType::q6_k:
    case DType::q2_k:
    case DType::q3_k:
    case DType::iq4_nl:
    case DType::iq4_xs:
    case DType::tq1_0:
    case DType::tq2_0:
    case DType::mxfp4:
    case DType::iq2_xxs:
    case DType::iq2_xs:
    case DType::iq2_s:
    case DType::iq3_xxs:
    case DType::iq3_s:
    case DType::iq1_s:
    case DType::iq1_m:
      return true;
    default:
      return false;
  }
}

}  // namespace rwd::tensor
