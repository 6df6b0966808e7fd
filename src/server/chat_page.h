// The chat page served at `/` (chat_page.html, embedded into the binary at build time).
#pragma once

#include <string_view>

namespace rwd::server {

std::string_view chat_page_html();

}  // namespace rwd::server
