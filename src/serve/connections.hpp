// The TCP connections of `met serve`, as the server tracks them (cpp-httplib keeps no list): a cap
// on how many are open, separate from the worker threads; a deadline for reading each request
// (headers and body, from the moment the connection waits for it), so a client that trickles its
// request (slowloris) loses its connection; shedding of slow readers when the server is crowded;
// and the end of every connection at shutdown. Each connection is served by one worker thread from
// accept to close, so the calls below act on the calling thread's connection.
#pragma once

#include <chrono>
#include <condition_variable>
#include <cstddef>
#include <list>
#include <mutex>
#include <thread>

namespace met::serve {

class Connections {
 public:
  struct Limits {
    std::size_t max_connections = 512;                  // open at once; more are refused at accept
    std::chrono::milliseconds read_timeout{30'000};     // to send one whole request, headers and body
    std::chrono::milliseconds shed_after{2'000};        // reading longer than this is cut while crowded
    std::size_t crowded = 256;                          // open connections from which slow readers are shed
  };
  explicit Connections(Limits limits);
  ~Connections();
  Connections(const Connections&) = delete;
  Connections& operator=(const Connections&) = delete;

  // Registers socket `fd`, accepted, as the calling thread's connection, reading its first request;
  // false (nothing registered) when max_connections are open.
  bool enter(int fd);
  // Unregisters the calling thread's connection (before its socket is closed).
  void leave();
  // The calling thread's connection is answering a request: no read deadline until reading().
  static void answering();
  // The calling thread's connection is done answering and waits for (reads) its next request.
  static void reading();
  // True when the calling thread's client has sent FIN: it half-closed, or closed, which only the
  // next write can tell apart (a closed peer resets it).
  static bool peer_finished();
  // True when the calling thread's connection is over at the TCP level: the client reset it (a
  // write to a client that closed does that). Some kernels report that reset to the next
  // recv(MSG_PEEK) as an end of stream, not as ECONNRESET, so the socket's TCP state is asked.
  static bool peer_reset();

  struct Conn;  // one registered connection (connections.cpp)
  // Shuts down every connection (a blocked read or write returns); their threads close them.
  void shutdown_all();

 private:
  void watch();
  void cut(const Conn& c);

  Limits limits_;
  std::mutex mu_;
  std::condition_variable wake_;
  bool stopping_ = false;
  std::list<Conn> conns_;
  std::thread watchdog_;
};

}  // namespace met::serve
