#include "zero/zero_memory.h"

#include <fmt/format.h>

namespace zt::zero {

void append_pools(const Arena& arena, bool host, std::vector<PoolBytes>& out) {
  for (size_t s = 0; s < arena.size(); ++s) {
    const auto slot = static_cast<Arena::Slot>(s);
    if (arena.bytes(slot) > 0)
      out.push_back({arena.name(slot), arena.bytes(slot), host, arena.pool()});
  }
}

size_t ZeroMemory::device_bytes() const {
  size_t n = 0;
  for (const PoolBytes& p : pools)
    if (!p.host) n += p.bytes;
  return n;
}

size_t ZeroMemory::host_bytes() const {
  size_t n = 0;
  for (const PoolBytes& p : pools)
    if (p.host) n += p.bytes;
  return n;
}

std::string ZeroMemory::describe() const {
  std::string dev, host;
  for (const PoolBytes& p : pools)
    (p.host ? host : dev) += fmt::format("{}{} {}", (p.host ? host : dev).empty() ? "" : ", ",
                                         p.name, format_bytes(p.bytes));
  return fmt::format("device {}{}{}{}; host {}{}{}{}", format_bytes(device_bytes()),
                     dev.empty() ? "" : " (", dev, dev.empty() ? "" : ")",
                     format_bytes(host_bytes()), host.empty() ? "" : " (", host,
                     host.empty() ? "" : ")");
}

}  // namespace zt::zero
