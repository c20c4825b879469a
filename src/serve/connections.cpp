#include "serve/connections.hpp"

#include <malloc.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <sys/socket.h>
#include <sys/stat.h>

#include <atomic>
#include <cerrno>

namespace met::serve {

using Clock = std::chrono::steady_clock;

struct Connections::Conn {
  Conn(int f, ino_t i) : fd(f), ino(i), since(Clock::now().time_since_epoch().count()) {}
  int fd;
  ino_t ino;                              // the socket's identity: fd numbers are reused after close
  std::atomic<bool> reading{true};        // waiting for, or reading, a request
  std::atomic<Clock::rep> since;          // when it began to wait for that request
};

namespace {
thread_local Connections::Conn* tl_conn = nullptr;
constexpr auto kTick = std::chrono::milliseconds(200);
constexpr auto kTrimEvery = std::chrono::seconds(10);

ino_t inode_of(int fd) {
  struct stat st {};
  return ::fstat(fd, &st) == 0 ? st.st_ino : 0;
}
}  // namespace

Connections::Connections(Limits limits) : limits_(limits), watchdog_([this] { watch(); }) {}

Connections::~Connections() {
  {
    std::lock_guard lock(mu_);
    stopping_ = true;
  }
  wake_.notify_all();
  watchdog_.join();
}

bool Connections::enter(int fd) {
  std::lock_guard lock(mu_);
  if (conns_.size() >= limits_.max_connections) return false;
  tl_conn = &conns_.emplace_back(fd, inode_of(fd));
  return true;
}

void Connections::leave() {
  std::lock_guard lock(mu_);
  for (auto it = conns_.begin(); it != conns_.end(); ++it)
    if (&*it == tl_conn) {
      conns_.erase(it);
      break;
    }
  tl_conn = nullptr;
}

void Connections::answering() {
  if (tl_conn) tl_conn->reading.store(false);
}

void Connections::reading() {
  if (!tl_conn) return;
  tl_conn->since.store(Clock::now().time_since_epoch().count());
  tl_conn->reading.store(true);
}

bool Connections::peer_finished() {
  if (!tl_conn) return false;
  char byte = 0;
  return ::recv(tl_conn->fd, &byte, 1, MSG_PEEK | MSG_DONTWAIT) == 0;
}

bool Connections::peer_reset() {
  if (!tl_conn) return false;
  tcp_info info{};
  socklen_t len = sizeof info;
  return ::getsockopt(tl_conn->fd, IPPROTO_TCP, TCP_INFO, &info, &len) == 0 && info.tcpi_state == TCP_CLOSE;
}

// Only while the descriptor is still the socket that was registered (under mu_, so the worker has
// not unregistered it; it may have closed it an instant before leave(), and the number been reused).
void Connections::cut(const Conn& c) {
  if (inode_of(c.fd) == c.ino) ::shutdown(c.fd, SHUT_RDWR);
}

void Connections::shutdown_all() {
  std::lock_guard lock(mu_);
  for (const auto& c : conns_) cut(c);
}

// Every tick: cuts each connection that has been reading one request for longer than read_timeout,
// or for longer than shed_after while `crowded` connections are open. Every kTrimEvery, hands the
// heap's free pages back to the system: connections come and go on short-lived threads, whose
// malloc arenas otherwise keep their peak.
void Connections::watch() {
  auto trimmed = Clock::now();
  std::unique_lock lock(mu_);
  while (!stopping_) {
    wake_.wait_for(lock, kTick);
    if (stopping_) break;
    const auto now = Clock::now();
    const bool crowded = conns_.size() >= limits_.crowded;
    const auto limit = crowded ? limits_.shed_after : limits_.read_timeout;
    for (const auto& c : conns_)
      if (c.reading.load() && now - Clock::time_point(Clock::duration(c.since.load())) > limit) cut(c);
    if (now - trimmed > kTrimEvery) {
      trimmed = now;
      lock.unlock();
      ::malloc_trim(0);
      lock.lock();
    }
  }
}

}  // namespace met::serve
