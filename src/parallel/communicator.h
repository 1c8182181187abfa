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

#include "base/status.h"

namespace dsv4 {

enum class Collective { kAllGather, kAllToAll, kBroadcast, kBarrier };
inline constexpr int kCollectiveKinds = 4;
const char* collective_name(Collective c);

struct CollectiveBytes {
  int64_t sent[kCollectiveKinds] = {};   // payload bytes this rank sent to other ranks
  int64_t calls[kCollectiveKinds] = {};
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
  virtual Status broadcast(void* data, int64_t bytes, int root) = 0;
  virtual Status barrier() = 0;
  // Sub-communicator of the ranks passing the same color, ordered by key (then rank).
  // Collective over this communicator.
  virtual Result<std::unique_ptr<Communicator>> split(int color, int key) = 0;
  // Ends every rank of the job (a rank that failed while its peers may wait in a
  // collective); never returns.
  [[noreturn]] virtual void abort(int code) = 0;

  const CollectiveBytes& bytes() const { return bytes_; }
  // Payload bytes sent by every collective so far.
  int64_t total_sent() const {
    int64_t s = 0;
    for (int64_t b : bytes_.sent) s += b;
    return s;
  }
  void reset_bytes() { bytes_ = CollectiveBytes{}; }

 protected:
  void count(Collective c, int64_t sent) {
    bytes_.sent[static_cast<int>(c)] += sent;
    ++bytes_.calls[static_cast<int>(c)];
  }

 private:
  CollectiveBytes bytes_;
};

// One rank: collectives copy send to recv (or do nothing).
std::unique_ptr<Communicator> make_single_communicator();

// MPI over MPI_COMM_WORLD. Initializes MPI on first use (MPI_THREAD_FUNNELED: only the
// calling thread communicates) and finalizes it at exit; fails with a message when the
// library cannot start.
Result<std::unique_ptr<Communicator>> make_mpi_communicator();
// True when this process was started by mpirun (OpenMPI's environment), so a command
// can choose MPI without a flag.
bool launched_by_mpirun();
// A failing rank's last act: waits until every rank of the job has called this too (a
// failure every rank detects alike) or `seconds` have passed, so that rank 0's message is
// out before mpirun ends the job on the first non-zero exit. False: timed out, or MPI not
// started.
bool wait_for_ranks_at_exit(double seconds);

}  // namespace dsv4
