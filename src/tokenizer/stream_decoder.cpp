// StreamDecoder: append the piece, release all but an incomplete trailing UTF-8 sequence.
#include "tokenizer/stream_decoder.h"

#include "tokenizer/utf8.h"

namespace rwd::tokenizer {

std::string StreamDecoder::push(int32_t id) {
  pending_.append(tokenizer_->token_to_piece(id, render_special_));
  const size_t n_ready = pending_.size() - utf8_incomplete_tail(pending_);
  std::string ready = pending_.substr(0, n_ready);
  pending_.erase(0, n_ready);
  return ready;
}

std::string StreamDecoder::flush() {
  std::string rest;
  rest.swap(pending_);
  return rest;
}

}  // namespace rwd::tokenizer
