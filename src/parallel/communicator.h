// Communicator: the collectives one decode step needs across ranks (runtime.md §6.11),
// each taking the step's runtime row counts. Two implementations: one rank (copies and
// no-ops) and MPI (OpenMPI; ranks are processes, on one host or many). Rows are opaque
// byte strings of a fixed width per call; counts are rows per peer. Every call is
// collective: all ranks make it, in the same order, with consistent counts.
//
//   all_gather_rows  rank r contributes rows[r] rows; everyone receives all of them,
//                    concatenated in rank order
//   all_to_all_rows  rank r sends send_rows[p] rows to peer p (its send buffer holds
//                    them peer after peer) and receives recv_rows[p] rows from p (placed
//                    peer after peer)
//   broadcast        root's bytes to everyone
//   barrier
//   split            sub-communicators (a TP group, an EP group)
// The reduce-scatter of partials in fixed order (runtime.md §6.7) is an all-to-all of
// slabs followed by the owner's ascending sum (parallel/fixed_order.h), never an MPI
// reduction, whose order is unspecified.
//
// Bytes each rank sends per collective kind are counted (CollectiveBytes), for the
// deployment plan's predictions. Errors (a count that does not fit, a transport failure)
// come back as Status naming the collective.
#pragma once

#include <cstdint>
#include <memory>
#include <span>
#include <string>
#include <vector>

#include "base/status.h"

namespace dsv4 {

// kHeader: rank 0's step header (point to point, counted once per header, not per peer).
enum class Collective { kAllGather, kAllToAll, kBroadcast, kBarrier, kHeader };
inline constexpr int kCollectiveKinds = 5;
const char* collective_name(Collective c);

struct CollectiveBytes {
  int64_t sent[kCollectiveKinds] = {};   // payload bytes this rank sent to other ranks
  int64_t calls[kCollectiveKinds] = {};
};

class Communicator;

// A started non-blocking collective (Communicator::start_*). Default-constructed or finished:
// complete. Not copyable; wait() before its buffers are reused or the communicator goes.
class PendingCollective {
 public:
  PendingCollective() = default;
  PendingCollective(const PendingCollective&) = delete;
  PendingCollective& operator=(const PendingCollective&) = delete;
  bool done() const { return comm_ == nullptr; }
  // Progress and completion check (an MPI call); true once complete.
  bool test();
  // Blocks until complete; the transport's error names the collective.
  Status wait();

 private:
  friend class Communicator;
  Communicator* comm_ = nullptr;
  int slot_ = -1;
};

class Communicator {
 public:
  virtual ~Communicator() = default;
  virtual int rank() const = 0;
  virtual int size() const = 0;

  // rows: [size()] rows contributed by each rank (this rank's is rows[rank()]).
  // recv: Σ rows · row_bytes bytes.
  virtual Status all_gather_rows(const void* send, std::span<const int64_t> rows, int64_t row_bytes,
                                 void* recv) = 0;
  // send_rows / recv_rows: [size()].
  virtual Status all_to_all_rows(const void* send, std::span<const int64_t> send_rows, void* recv,
                                 std::span<const int64_t> recv_rows, int64_t row_bytes) = 0;

  // ---- Non-blocking and strided collectives (overlap, no staging copies) ----
  // start_* posts the collective and returns at once; send, recv and the peers' buffers stay
  // untouched by the caller until the handle's wait() returns (the counts are copied at start).
  // OpenMPI progresses a posted collective only inside MPI calls: test() is such a call,
  // cheap enough between compute chunks. Ordering: as for blocking calls, every rank starts
  // the same collectives in the same order (they may interleave with blocking ones). Bytes are
  // counted at start. Default: the blocking call, the handle complete (one rank, test fakes).
  virtual Status start_all_gather_rows(const void* send, std::span<const int64_t> rows, int64_t row_bytes,
                                       void* recv, PendingCollective* pending);
  virtual Status start_all_to_all_rows(const void* send, std::span<const int64_t> send_rows, void* recv,
                                       std::span<const int64_t> recv_rows, int64_t row_bytes,
                                       PendingCollective* pending);
  // All-to-all from a strided send layout (no pack by the caller): every peer p gets n rows
  // of row_bytes, row t at send + p·peer_offset + t·row_stride (bytes); received as by
  // all_to_all_rows. Default: one rank only (a copy).
  virtual Status all_to_all_strided(const void* send, int64_t n, int64_t row_stride, int64_t peer_offset, void* recv,
                                    std::span<const int64_t> recv_rows, int64_t row_bytes);
  // ---- end of non-blocking and strided collectives ----

  virtual Status broadcast(void* data, int64_t bytes, int root) = 0;
  virtual Status barrier() = 0;
  // Sub-communicator of the ranks passing the same color, ordered by key (then rank).
  // Collective over this communicator.
  virtual Result<std::unique_ptr<Communicator>> split(int color, int key) = 0;
  // Ends every rank of the job (a rank that failed while its peers may wait in a
  // collective); never returns.
  [[noreturn]] virtual void abort(int code) = 0;

  // The world's step header (runtime.md §6; the world communicator only): rank 0's one
  // message per step to every other rank, on a channel of its own, so it never pairs with a
  // collective. send_header: rank 0; receive_header: the others wait for the next one,
  // sleeping between polls: an idle follower spins for at most kHeaderSpinSeconds, then
  // sleeps at most kHeaderSleepSeconds between polls. That cap bounds what the wait adds to
  // a first token (with the wake-up, under 2 ms) and sets the idle cost (a wake-up costs a
  // virtual machine about 20 µs of CPU: about 1 % of a core per idle rank).
  static constexpr double kHeaderSpinSeconds = 200e-6, kHeaderSleepSeconds = 1.9e-3;
  virtual Status send_header(std::span<const uint8_t> bytes) = 0;
  virtual Status receive_header(std::vector<uint8_t>& bytes) = 0;

  // Job failure (docs/ranks.md, "When a rank fails"): a rank whose step failed tells every
  // other rank; from then on every wait of this process (collectives of any communicator,
  // the header) returns an error naming the failed rank and its message instead of waiting
  // for it, so each rank leaves its step and the job ends cleanly. No-op once this process
  // knows the job failed.
  virtual void report_failure(const std::string& message) = 0;
  // An error naming the failed rank and its message once the job failed (this rank reported
  // it, or a notice arrived: polls for one), else ok.
  virtual Status job_status() const = 0;

  const CollectiveBytes& bytes() const { return bytes_; }
  // Payload bytes sent by every collective so far.
  int64_t total_sent() const {
    int64_t s = 0;
    for (int64_t b : bytes_.sent) s += b;
    return s;
  }
  void reset_bytes() { bytes_ = CollectiveBytes{}; }

 protected:
  // Non-blocking slots of an implementation that overrides start_*: a handle refers to one.
  friend class PendingCollective;
  static void bind_pending(PendingCollective* p, Communicator* c, int slot) {
    p->comm_ = c;
    p->slot_ = slot;
  }
  virtual bool test_slot(int) { return true; }
  virtual Status wait_slot(int) { return Status(); }

  void count(Collective c, int64_t sent) {
    bytes_.sent[static_cast<int>(c)] += sent;
    ++bytes_.calls[static_cast<int>(c)];
  }

 private:
  CollectiveBytes bytes_;
};

// One rank: collectives copy send to recv (or do nothing).
std::unique_ptr<Communicator> make_single_communicator();

// MPI over MPI_COMM_WORLD. Initializes MPI on first use and finalizes it at exit; fails with
// a message when the library cannot start or cannot give MPI_THREAD_SERIALIZED (serve and
// chat communicate from their service thread, set-up and exit from the main thread, never
// both at once).
Result<std::unique_ptr<Communicator>> make_mpi_communicator();
// The check of the thread level MPI_Init_thread provided (MPI_THREAD_* value), and the level
// MPI runs at (MPI_Query_thread; -1 before MPI_Init).
Status check_mpi_thread_level(int provided);
int mpi_thread_level();
inline constexpr int kMpiThreadSerialized = 2;  // MPI_THREAD_SERIALIZED in the standard's order
// True when this process was started by mpirun (OpenMPI's environment), so a command
// can choose MPI without a flag.
bool launched_by_mpirun();
// A failing rank's last act: waits until every rank of the job has called this too (a
// failure every rank detects alike) or `seconds` have passed, so that rank 0's message is
// out before mpirun ends the job on the first non-zero exit. False: timed out, or MPI not
// started.
bool wait_for_ranks_at_exit(double seconds);
// Ends this process after a job failure without MPI_Finalize (collectives of the failed step
// are still pending and would never complete); call after wait_for_ranks_at_exit.
[[noreturn]] void exit_failed_job(int code);

}  // namespace dsv4
